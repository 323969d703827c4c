package kafkatest

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// The two test tiers. The fast tier runs on kfake in strict mode; the real-broker tier on
// Apache Kafka brokers (KRaft, one JVM per node). KAFKAMIRROR_TEST_TIERS selects them
// (comma-separated; default both), KAFKAMIRROR_KAFKA_VERSIONS the Kafka versions of the
// real tier (default KafkaNewest,KafkaOldest).
const (
	TierFake  = "kfake"
	TierKafka = "kafka"
)

// TierEnabled reports whether tier runs in this test process.
func TierEnabled(tier string) bool {
	v := strings.TrimSpace(os.Getenv("KAFKAMIRROR_TEST_TIERS"))
	if v == "" {
		return true
	}
	return slices.Contains(splitList(v), tier)
}

// KafkaVersions returns the Apache Kafka versions of the real-broker tier, newest first.
func KafkaVersions() []string {
	if v := strings.TrimSpace(os.Getenv("KAFKAMIRROR_KAFKA_VERSIONS")); v != "" {
		return splitList(v)
	}
	return []string{KafkaNewest, KafkaOldest}
}

// RequireKafka skips t unless the real-broker tier runs.
func RequireKafka(t TB) {
	t.Helper()
	if !TierEnabled(TierKafka) {
		t.Skipf("real-broker tier not selected (KAFKAMIRROR_TEST_TIERS=%q)", os.Getenv("KAFKAMIRROR_TEST_TIERS"))
	}
}

// requireTier skips t unless the tier of a cluster started with opts runs.
func requireTier(t TB, opts []Option) {
	t.Helper()
	var probe config
	for _, o := range opts {
		o(&probe)
	}
	if probe.kafkaVersion != "" {
		RequireKafka(t)
	} else {
		RequireFake(t)
	}
}

// RequireFake skips t unless the kfake tier runs.
func RequireFake(t TB) {
	t.Helper()
	if !TierEnabled(TierFake) {
		t.Skipf("kfake tier not selected (KAFKAMIRROR_TEST_TIERS=%q)", os.Getenv("KAFKAMIRROR_TEST_TIERS"))
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// tally counts the real-broker tier's scenarios by what they ran on, for the test command's
// report.
var tally struct {
	mu     sync.Mutex
	counts map[string]*[2]int // label → passed, failed
}

// Tally counts t, when it ends, as a scenario run on label (for example
// "kafka-4.4.0 → kafka-4.0.0"). Main appends the counts to the file named by
// KAFKAMIRROR_TIER_REPORT, which the test command prints at its end.
func Tally(t TB, label string) {
	t.Cleanup(func() {
		tally.mu.Lock()
		defer tally.mu.Unlock()
		if tally.counts == nil {
			tally.counts = map[string]*[2]int{}
		}
		c := tally.counts[label]
		if c == nil {
			c = new([2]int)
			tally.counts[label] = c
		}
		if t.Failed() {
			c[1]++
		} else {
			c[0]++
		}
	})
}

// writeTally appends "package: label: N passed, M failed" lines to KAFKAMIRROR_TIER_REPORT.
func writeTally(pkg string) error {
	path := os.Getenv("KAFKAMIRROR_TIER_REPORT")
	tally.mu.Lock()
	defer tally.mu.Unlock()
	if path == "" || len(tally.counts) == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, label := range slices.Sorted(maps.Keys(tally.counts)) {
		c := tally.counts[label]
		if _, err := fmt.Fprintf(f, "%s: %s: %d scenarios passed, %d failed\n", pkg, label, c[0], c[1]); err != nil {
			return err
		}
	}
	return nil
}
