package api

// Input rules shared by the worker, which enforces them on requests and on its own
// configuration, and the provider, which checks them at plan time: one home each, so a plan
// the provider passes is a request the worker accepts.

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// DurationRange is the inclusive range of a duration setting.
type DurationRange struct {
	Min, Max time.Duration
}

// SyncIntervalRange bounds sync.interval. Every cycle lists topics, configs, groups and
// ACLs on both clusters, so a shorter interval loads them for nothing; metadata copied less
// often than daily is too stale to fail over to.
var SyncIntervalRange = DurationRange{Min: time.Second, Max: 24 * time.Hour}

// PromoteTimeoutRange bounds a promote's wait for lag 0; it must end well within the
// worker's command bound (CommandTimeout).
var PromoteTimeoutRange = DurationRange{Min: time.Second, Max: 4 * time.Minute}

// Parse parses s as a Go duration within r. The error quotes s and names the range.
func (r DurationRange) Parse(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration; give a number with a unit, such as 30s, 5m or 1h30m, %s", s, r)
	}
	if d < r.Min || d > r.Max {
		return 0, fmt.Errorf("%q is out of range: it must be %s", s, r)
	}
	return d, nil
}

// String is the range as messages and descriptions give it: "from 1s to 24h".
func (r DurationRange) String() string {
	return fmt.Sprintf("from %s to %s", FormatDuration(r.Min), FormatDuration(r.Max))
}

// FormatDuration is d as time.Duration.String writes it, without the zero minutes and
// seconds it appends ("24h", "1m", "1h30m" rather than "24h0m0s").
func FormatDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// CheckBrokerAddress returns why s is not the address of a Kafka broker, host:port with a
// port from 1 to 65535, or nil. A bad address is the caller's mistake (400), not an
// unreachable cluster (502, which clients retry).
func CheckBrokerAddress(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port (such as kafka-1.example.com:9092)", s)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q has port %q; a port is a number from 1 to 65535", s, port)
	}
	return nil
}
