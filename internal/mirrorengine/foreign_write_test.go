package mirrorengine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// A foreign write into a mirrored destination (one without an authorizer) fails the
// partition as soon as a describe reads the destination end, without waiting for the next
// source record, and a restart says which offsets are not the source's.
func TestEngineForeignWriteFailsAtOnce(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	ctx := context.Background()
	src.CreateTopic(t, "orders", 1, nil)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("orders", 0, 70, "a")...)
	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "orders", "fail")
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)
	waitState(t, e, "m", "orders", 1, partitionstate.StateMirroring)

	kafkatest.ProduceSync(t, dst.ManualProducer(t), &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("foreign")})
	d, err := e.DescribeMirrorTopic(ctx, "m", "orders")
	if err != nil {
		t.Fatal(err)
	}
	p := d.Partitions[0]
	if p.State != partitionstate.StateFailed || p.RetryAttempt >= 0 || !strings.Contains(p.Error, "ends at offset 71, but the mirror wrote only up to offset 70") {
		t.Fatalf("the first describe after a foreign write: %+v", p)
	}

	// The operator's restart goes through PREPARING, which names the foreign record.
	start(t, e, "m", "orders", "fail")
	want := "its 1 records at offsets 70 to 70 are not the source's"
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err = e.DescribeMirrorTopic(ctx, "m", "orders")
		if err == nil && d.Partitions[0].State == partitionstate.StateFailed && strings.Contains(d.Partitions[0].Error, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("restart after a foreign write: %+v (%v), want FAILED with %q", d, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
