package kafkatest

import "time"

// WaitFor polls cond every 20 ms until it holds, failing the test at the deadline with what
// it waited for and cond's last words. Tests wait this way, never with fixed sleeps.
func WaitFor(t TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitUntil is WaitFor for a condition with nothing more to say.
func WaitUntil(t TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	WaitFor(t, timeout, what, func() (bool, string) { return ok(), "not yet" })
}

// FreePort returns a TCP port on 127.0.0.1 that is free now and reserved against other
// tests' clusters and FreePorts until the test ends (see leasePorts).
func FreePort(t TB) int {
	t.Helper()
	l, err := leasePorts(1)
	if err != nil {
		t.Fatalf("%v", err)
		return 0
	}
	t.Cleanup(l.release)
	return l.ports[0]
}
