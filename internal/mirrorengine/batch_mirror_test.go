package mirrorengine

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

// Source batches that kfake never writes itself, served in place of its fetch answers.

// serveFetches answers every fetch of partition 0 of topic "t" with the first batch of served
// that ends at or after the fetch offset (one batch an answer: each is the last of its answer
// once), and the high watermark end.
func serveFetches(t *testing.T, src *kafkatest.Cluster, end int64, served ...recordbatch.Batch) {
	t.Helper()
	if src.Fake() == nil {
		t.Skip("needs kfake to answer fetches")
	}
	src.AnswerFetches(t, "t", 0, func(fp kmsg.FetchRequestTopicPartition) *kmsg.FetchResponseTopicPartition {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = end, end, 0
		for _, b := range served {
			if b.LastOffset() >= fp.FetchOffset {
				rp.RecordBatches = b
				break
			}
		}
		return &rp
	})
}

// A source batch that fails its CRC fails its partition for good, naming the offset; the
// topic's other partitions keep mirroring and the worker keeps running.
func TestEngineFailsOnlyThePartitionWithACorruptBatch(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "t", 2, nil)
	prod := manualProducer(t, src)
	produceSync(t, prod, records("t", 0, 5, "a")...)
	produceSync(t, prod, records("t", 0, 5, "b")...)
	produceSync(t, prod, records("t", 1, 7, "c")...)
	stored := rawBatches(t, src, "t", 0)
	last := stored[len(stored)-1]
	bad := slices.Clone(last)
	bad[len(bad)-1] ^= 0xff // a bit flipped on disk, or on the way
	serveFetches(t, src, last.LastOffset()+1, append(stored[:len(stored)-1], bad)...)

	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	deadline := time.Now().Add(60 * time.Second)
	for {
		d, err := e.DescribeMirrorTopic(context.Background(), "m", "t")
		if err == nil && len(d.Partitions) == 2 {
			p0, p1 := d.Partitions[0], d.Partitions[1]
			// A FAILED with a retry is a transient error while the destination topic appears.
			if p0.State == partitionstate.StateFailed && p0.RetryAttempt == -1 && p1.State == partitionstate.StateMirroring && p1.Lag == 0 {
				want := fmt.Sprintf("corrupt source record batch at offset %d: CRC-32C", last.BaseOffset())
				if !strings.Contains(p0.Error, want) {
					t.Fatalf("partition 0: %+v; want an error with %q", p0, want)
				}
				// Everything before the corrupt batch was copied.
				if end := endOffsets(t, dst, "t")[0]; end != last.BaseOffset() {
					t.Fatalf("destination partition 0 ends at %d, want %d", end, last.BaseOffset())
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0 not FAILED beside a mirroring partition 1: %+v (%v)", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Apache Kafka's cleaner keeps emptied batches (a control batch as a "transaction
// cleaned" marker, a data batch for its producer's state): their offsets are copied as a
// gap, and the records after them keep their offsets.
func TestMirrorEmptyBatchesAreGaps(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "t", 1, nil)
	dst.CreateTopic(t, "t", 1, nil)
	prod := manualProducer(t, src)
	produceSync(t, prod, records("t", 0, 3, "a")...)
	produceSync(t, prod, records("t", 0, 6, "cleaned")...)
	produceSync(t, prod, records("t", 0, 2, "b")...)
	stored := rawBatches(t, src, "t", 0)
	first, last := stored[0], stored[len(stored)-1]
	if first.LastOffset() != 2 || last.BaseOffset() != 9 || last.LastOffset() != 10 {
		t.Fatalf("source batches %d-%d ... %d-%d, want 0-2 ... 9-10", first.BaseOffset(), first.LastOffset(), last.BaseOffset(), last.LastOffset())
	}
	emptyMarker, emptyData := batchtest.Craft(recordbatch.AttrControl|recordbatch.AttrTransactional, 0, 0, nil), batchtest.Craft(0, 4, 0, nil)
	setBase(emptyMarker, 3)
	setBase(emptyData, 4)
	serveFetches(t, src, 11, first, emptyMarker, emptyData, last)

	run := startMirror(t, src, dst, "t", 1, true)
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
}

// setBase moves a batch to another base offset (outside the CRC).
func setBase(b recordbatch.Batch, base int64) {
	binary.BigEndian.PutUint64(b[recordbatch.OffBaseOffset:], uint64(base))
}
