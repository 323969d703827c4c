package datapath

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

// Apache Kafka's cleaner keeps emptied batches (a control batch as a "transaction
// cleaned" marker, a data batch for its producer's state): their offsets are copied as a
// gap, and the records after them keep their offsets.
func TestMirrorEmptyBatchesAreGaps(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "t", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("t", 0, 3, "a")...)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("t", 0, 6, "cleaned")...)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("t", 0, 2, "b")...)
	stored := rawBatches(t, src, "t", 0)
	first, last := stored[0], stored[len(stored)-1]
	if first.LastOffset() != 2 || last.BaseOffset() != 9 || last.LastOffset() != 10 {
		t.Fatalf("source batches %d-%d ... %d-%d, want 0-2 ... 9-10", first.BaseOffset(), first.LastOffset(), last.BaseOffset(), last.LastOffset())
	}
	emptyMarker, emptyData := batchtest.Craft(recordbatch.AttrControl|recordbatch.AttrTransactional, 0, 0, nil), batchtest.Craft(0, 4, 0, nil)
	setBase(emptyMarker, 3)
	setBase(emptyData, 4)
	src.ServeFetches(t, "t", 0, 11, first, emptyMarker, emptyData, last)

	counter := &offsetCounter{}
	run := startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t), PartitionConfig{Mirror: "m1", Topic: "t", FirstStart: true, Observer: counter}, 1)
	cl := dst.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
	want := map[int64]string{}
	for _, b := range []recordbatch.Batch{first, last} {
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			want[b.BaseOffset()+int64(r.OffsetDelta)] = string(r.Value)
		}
	}
	got := map[int64]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < len(want) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[r.Offset] = string(r.Value) })
	}
	for off, v := range want {
		if got[off] != v {
			t.Fatalf("destination offset %d holds %q, the source %q (destination: %v)", off, got[off], v, got)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("destination records at %v, want only the source's at 0-2 and 9-10", got)
	}
	_, end, err := kafkareq.NewCluster("destination", dst.Client(t)).Offsets(context.Background(), "t", 0)
	if err != nil || end != 11 {
		t.Fatalf("destination end %d (%v), want 11", end, err)
	}
	run.stop(t)
	// The holes' lone markers count as mirrored offsets like records do.
	requireEveryOffsetCounted(t, dst, "t", counter)
}

// setBase moves a batch to another base offset (outside the CRC).
func setBase(b recordbatch.Batch, base int64) {
	binary.BigEndian.PutUint64(b[recordbatch.OffBaseOffset:], uint64(base))
}
