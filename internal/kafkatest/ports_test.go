package kafkatest

import (
	"runtime"
	"strings"
	"testing"
)

// Ports leased for one cluster are not leased again, by this process or another, until
// released, and come from below the ephemeral range where no outgoing connection lands.
func TestLeasePortsAreExclusiveUntilReleased(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ports are reserved across processes on Linux only")
	}
	ranges, err := leasablePorts()
	if err != nil {
		t.Fatal(err)
	}
	first, err := leasePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	second, err := leasePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	defer second.release()
	held := map[int]bool{}
	for _, p := range append(append([]int(nil), first.ports...), second.ports...) {
		if held[p] {
			t.Fatalf("port %d leased twice: %v and %v", p, first.ports, second.ports)
		}
		held[p] = true
		if p < lowestPort || p >= ranges.below && p <= ranges.above {
			t.Fatalf("port %d outside %v", p, ranges)
		}
	}
	dir := t.TempDir()
	a, err := lockPort(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockPort(dir, 1); err == nil {
		t.Fatal("a held port lock was taken again")
	}
	a.Close()
	b, err := lockPort(dir, 1)
	if err != nil {
		t.Fatalf("a released port lock cannot be taken: %v", err)
	}
	b.Close()

	first.release()
	if len(first.locks) != 0 {
		t.Fatalf("locks left after release: %d", len(first.locks))
	}
}

// Both ranges outside the ephemeral one are picked from, and nothing else.
func TestPortRangesPick(t *testing.T) {
	r := portRanges{below: lowestPort + 3, above: 65533}
	seen := map[int]bool{}
	for range 1000 {
		seen[r.pick()] = true
	}
	want := map[int]bool{lowestPort: true, lowestPort + 1: true, lowestPort + 2: true, 65534: true, 65535: true}
	if len(seen) != len(want) || r.size() != len(want) {
		t.Fatalf("picked %v (size %d), want %v", seen, r.size(), want)
	}
	for p := range seen {
		if !want[p] {
			t.Fatalf("picked %d, want only %v", p, want)
		}
	}
}

// A broker whose port another cluster holds cannot start: Start fails, naming the node
// and its log, instead of handing out a cluster whose brokers are the other cluster's.
func TestKafkaStartFailsWhenAnotherClusterHoldsItsPort(t *testing.T) {
	other := Shared(t, "kafka-"+KafkaNewest, Kafka(KafkaNewest))
	Tally(t, other.Broker()+" (port taken)")
	taken := other.kafka.brokers[0].clientPort
	c, err := Start(Kafka(KafkaNewest), func(cfg *config) {
		cfg.leasePorts = func(n int) (*portLease, error) {
			l, err := leasePorts(n)
			if err == nil {
				l.ports[0] = taken
			}
			return l, err
		}
	})
	if err == nil {
		c.Close()
		t.Fatalf("a cluster started on port %d, which %s (id %s) holds; it answers with id %s", taken, other.Broker(), other.ID(), c.ID())
	}
	// Whether the other cluster answered first or the broker's exit was seen first
	// depends on timing; either way Start says which.
	if msg := err.Error(); !strings.Contains(msg, "answers with cluster id "+other.ID()) && !strings.Contains(msg, "exited during startup") {
		t.Fatalf("error %q says neither that %s answers on the port nor that the broker exited", err, other.ID())
	}
	// The cluster that holds the port still serves.
	if _, err := other.Admin(t).BrokerMetadata(testCtx(t)); err != nil {
		t.Fatalf("%s after the failed start: %v", other.Broker(), err)
	}
}
