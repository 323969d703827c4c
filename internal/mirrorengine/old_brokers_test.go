package mirrorengine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
)

// A source too old is refused when the mirror is created, a destination too old when the
// engine opens: both name what is missing.
func TestOldBrokersAreRefusedClearly(t *testing.T) {
	src := kafkatest.New(t, kafkatest.MaxVersions(kversion.V2_0_0()))
	dst := kafkatest.New(t)
	e := openEngine(t, dst)
	_, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "m", Source: sourceOf(src)})
	var cerr *CommandError
	if !errors.As(err, &cerr) || cerr.Code != kip.CodeUnsupportedVersion || !strings.Contains(cerr.Message, "Apache Kafka 2.1 or newer as the source") {
		t.Fatalf("mirror from Kafka 2.0: %v, want UNSUPPORTED_VERSION naming the minimum", err)
	}

	old := kafkatest.New(t, kafkatest.MaxVersions(kversion.V2_8_0()))
	_, err = Open(context.Background(), Config{Destination: old.Client(t)})
	var unsupported *kafkareq.UnsupportedBrokerError
	if !errors.As(err, &unsupported) || !strings.Contains(err.Error(), "ListTransactions") {
		t.Fatalf("engine on a Kafka 2.8 destination: %v, want an unsupported broker naming ListTransactions", err)
	}
}
