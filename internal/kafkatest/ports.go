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
// below the kernel's ephemeral range, where no outgoing connection and no listener on
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

// leasePorts reserves n ports on 127.0.0.1 that are free now and below the ephemeral range.
func leasePorts(n int) (*portLease, error) {
	top, err := ephemeralLow()
	if err != nil {
		return nil, err
	}
	if top-lowestPort < 100*n {
		return nil, fmt.Errorf("kafkatest: the ephemeral port range starts at %d, leaving too few ports below it for %d brokers' ports", top, n)
	}
	dir := filepath.Join(os.TempDir(), "kafkatest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	l := &portLease{}
	for tries := 0; len(l.ports) < n; tries++ {
		if tries == 1000 {
			l.release()
			return nil, fmt.Errorf("kafkatest: no free port between %d and %d after %d tries", lowestPort, top, tries)
		}
		port := lowestPort + rand.IntN(top-lowestPort)
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

// ephemeralLow returns the lowest port of the kernel's ephemeral range: Linux's own
// setting, or the lowest default of the systems tests run on (Linux's 32768; macOS and
// Windows start at 49152).
func ephemeralLow() (int, error) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if errors.Is(err, os.ErrNotExist) {
		return 32768, nil
	}
	if err != nil {
		return 0, fmt.Errorf("kafkatest: %w", err)
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0, fmt.Errorf("kafkatest: ip_local_port_range %q", data)
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, fmt.Errorf("kafkatest: ip_local_port_range %q: %w", data, err)
	}
	return low, nil
}
