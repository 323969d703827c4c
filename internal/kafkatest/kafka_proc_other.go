//go:build !linux

package kafkatest

import (
	"os"
	"os/exec"
)

// killWithParent has no portable equivalent of Linux's parent-death signal; the test's
// cleanup stops the brokers.
func killWithParent(*exec.Cmd) {}

// lockFile has no portable equivalent of Linux's flock: ports are then not reserved, only
// checked to be free when chosen.
func lockFile(*os.File) error { return nil }
