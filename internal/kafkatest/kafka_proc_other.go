//go:build !linux

package kafkatest

import "os/exec"

// killWithParent has no portable equivalent of Linux's parent-death signal; the test's
// cleanup stops the brokers.
func killWithParent(*exec.Cmd) {}
