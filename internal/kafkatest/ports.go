package kafkatest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A real broker binds its ports seconds after they are chosen, so a port that is merely
// free when chosen can be gone when the JVM binds it, or worse, bound by another cluster
// whose broker then answers in this one's name. Two things close that gap: ports come from
// outside the kernel's ephemeral range, where no outgoing connection and no listener on
// port 0 (kfake, the test proxies) lands, and each port is reserved for the cluster's life
// with a lock file that the test processes running beside this one (go test runs packages
// in parallel) respect.

// portLease is a set of reserved ports; release frees them for other clusters.
type portLease struct {
	ports []int
	locks []*os.File
}

// lowestPort keeps clear of the well-known and registered ports most services use.
const lowestPort = 10000

// leasePorts reserves n ports on 127.0.0.1 that are free now and outside the ephemeral range.
func leasePorts(n int) (*portLease, error) {
	ports, err := leasablePorts()
	if err != nil {
		return nil, err
	}
	if ports.size() < 100*n {
		return nil, fmt.Errorf("kafkatest: %v leaves too few ports outside the ephemeral range for %d ports", ports, n)
	}
	dir := filepath.Join(os.TempDir(), "kafkatest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	l := &portLease{}
	for tries := 0; len(l.ports) < n; tries++ {
		if tries == 1000 {
			l.release()
			return nil, fmt.Errorf("kafkatest: no free port in %v after %d tries", ports, tries)
		}
		port := ports.pick()
		lock, err := lockPort(dir, port)
		if err != nil {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			lock.Close()
			continue
		}
		ln.Close()
		l.ports = append(l.ports, port)
		l.locks = append(l.locks, lock)
	}
	return l, nil
}

// lockPort takes port's lock file, or fails when another lease holds it.
func lockPort(dir string, port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (l *portLease) release() {
	for _, f := range l.locks {
		f.Close() // closing the file drops its lock
	}
	l.locks = nil
}

// portRanges are the ports a lease picks from: [lowestPort, the ephemeral range) and
// (the ephemeral range, 65535].
type portRanges struct{ below, above int }

func (r portRanges) size() int { return r.below - lowestPort + 65535 - r.above }

// pick returns a random port of the ranges.
func (r portRanges) pick() int {
	i := rand.IntN(r.size())
	if i < r.below-lowestPort {
		return lowestPort + i
	}
	return r.above + 1 + i - (r.below - lowestPort)
}

func (r portRanges) String() string {
	return fmt.Sprintf("ports %d-%d and %d-65535", lowestPort, r.below-1, r.above+1)
}

// leasablePorts returns the ports outside the kernel's ephemeral range: Linux's own setting,
// or where the systems tests run on start it (Linux 32768, macOS and Windows 49152).
func leasablePorts() (portRanges, error) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if errors.Is(err, os.ErrNotExist) {
		return portRanges{below: 32768, above: 65535}, nil
	}
	if err != nil {
		return portRanges{}, fmt.Errorf("kafkatest: %w", err)
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil || low > high || high > 65535 {
		return portRanges{}, fmt.Errorf("kafkatest: ip_local_port_range %q", strings.TrimSpace(string(data)))
	}
	return portRanges{below: max(low, lowestPort), above: high}, nil
}
