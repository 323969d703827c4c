package datapath

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// offsetCounter adds up the offsets a mirror reports as mirrored.
type offsetCounter struct {
	NopObserver
	offsets atomic.Int64
}

func (o *offsetCounter) Mirrored(_, _ string, _ int32, offsets, _ int64) { o.offsets.Add(offsets) }

// requireEveryOffsetCounted fails the test unless the mirror reported every offset of the
// destination partition as mirrored, once: kafkamirror_mirrored_records_total counts them.
func requireEveryOffsetCounted(t *testing.T, dst *kafkatest.Cluster, topic string, counter *offsetCounter) {
	t.Helper()
	_, end, err := kafkareq.NewCluster("destination", dst.Client(t)).Offsets(context.Background(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := counter.offsets.Load(); got != end {
		t.Fatalf("the mirror reported %d offsets mirrored; the destination holds %d", got, end)
	}
}

// The markers of replayed transactions, committed and aborted, count as mirrored offsets
// like records do.
func TestMirroredCountsTransactionMarkers(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "counted", 1, nil)
	txp := src.ManualProducer(t, kgo.TransactionalID("counted.app"))
	kafkatest.ProduceSync(t, prod, kafkatest.Records("counted", 0, 3, "a")...)
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txp.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		kafkatest.ProduceSync(t, txp, kafkatest.Records("counted", 0, 2, "txn")...)
		if err := txp.EndTransaction(context.Background(), end); err != nil {
			t.Fatal(err)
		}
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records("counted", 0, 2, "b")...)
	counter := &offsetCounter{}
	run := startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t),
		PartitionConfig{Mirror: "m1", Topic: "counted", FirstStart: true, Observer: counter}, 1)
	kafkatest.WaitIdentical(t, src, dst, "counted", kafkatest.IdenticalWithin)
	run.stop(t)
	requireEveryOffsetCounted(t, dst, "counted", counter)
}
