package kafkatest

import (
	"os"
	"slices"
	"strings"
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
