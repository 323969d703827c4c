package kafkatest

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel kill a broker JVM when the test process dies, so a
// crashed or interrupted test run leaves no brokers behind.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
