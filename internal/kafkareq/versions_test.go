package kafkareq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// The version matrix: each side is checked against what the worker sends it, on kfake
// clusters that answer as the named Apache Kafka release would.
func TestBrokerVersionMatrix(t *testing.T) {
	cases := []struct {
		side, release string
		versions      *kversion.Versions
		missing       string // "" when supported
	}{
		{"source", "2.0", kversion.V2_0_0(), "Fetch (API key 1) v9+, Apache Kafka 2.1+"},
		{"source", "2.1", kversion.V2_1_0(), ""},
		{"source", "4.0", kversion.V4_0_0(), ""},
		{"destination", "2.8", kversion.V2_8_0(), "ListTransactions (API key 66) v0+, Apache Kafka 3.0+"},
		{"destination", "3.0", kversion.V3_0_0(), ""},
		{"destination", "4.0", kversion.V4_0_0(), ""},
	}
	for _, c := range cases {
		cl := kafkatest.New(t, kafkatest.MaxVersions(c.versions))
		err := kafkareq.CheckBrokerVersions(context.Background(), cl.Client(t), c.side)
		var unsupported *kafkareq.UnsupportedBrokerError
		switch {
		case c.missing == "" && err != nil:
			t.Errorf("%s on Kafka %s: %v, want supported", c.side, c.release, err)
		case c.missing != "" && (!errors.As(err, &unsupported) || !strings.Contains(err.Error(), c.missing)):
			t.Errorf("%s on Kafka %s: %v, want an unsupported broker naming %s", c.side, c.release, err, c.missing)
		}
	}
}
