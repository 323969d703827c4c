package kafkatest

import (
	"os"
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill a broker JVM when the test process dies, so a
// crashed or interrupted test run leaves no brokers behind.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// lockFile takes an exclusive lock on f without waiting. The lock belongs to this open
// file (a second open in the same process conflicts too) and goes with it when it is
// closed or the process dies.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
