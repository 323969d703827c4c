package mirrorengine

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// A source batch that fails its CRC fails its partition for good, naming the offset; the
// topic's other partitions keep mirroring and the worker keeps running.
func TestEngineFailsOnlyThePartitionWithACorruptBatch(t *testing.T) {
	src, dst, stored := twoPartitionTopic(t, "a", "b")
	last := recordbatch.Batch(stored[len(stored)-1])
	bad := slices.Clone(stored[len(stored)-1])
	bad[len(bad)-1] ^= 0xff // a bit flipped on disk, or on the way
	src.ServeFetches(t, "t", 0, last.LastOffset()+1, append(stored[:len(stored)-1], bad)...)

	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	p0 := awaitFailedForGoodBesideMirroring(t, e)
	want := fmt.Sprintf("corrupt source record batch at offset %d: CRC-32C", last.BaseOffset())
	if !strings.Contains(p0.Error, want) {
		t.Fatalf("partition 0: %+v; want an error with %q", p0, want)
	}
	// Everything before the corrupt batch was copied.
	if end := dst.EndOffsets(t, "t")[0]; end != last.BaseOffset() {
		t.Fatalf("destination partition 0 ends at %d, want %d", end, last.BaseOffset())
	}
}

// twoPartitionTopic creates topic t of two partitions on a fresh source, writes a batch of
// 5 records to partition 0 for each of rounds and one of 7 to partition 1, and returns the
// clusters and partition 0's stored batches.
func twoPartitionTopic(t *testing.T, rounds ...string) (src, dst *kafkatest.Cluster, stored [][]byte) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	src.CreateTopic(t, "t", 2, nil)
	prod := src.ManualProducer(t)
	for _, r := range rounds {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("t", 0, 5, r)...)
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records("t", 1, 7, "c")...)
	return src, dst, src.RawBatches(t, "t", 0)
}

// awaitFailedForGoodBesideMirroring waits until partition 0 of topic t of mirror m is
// FAILED waiting for the operator while partition 1 mirrors with no lag, and returns
// partition 0.
func awaitFailedForGoodBesideMirroring(t *testing.T, e *Engine) PartitionDescription {
	t.Helper()
	var p0 PartitionDescription
	kafkatest.WaitFor(t, time.Minute, "partition 0 FAILED for good beside a mirroring partition 1", func() (bool, string) {
		d, err := e.DescribeMirrorTopic(context.Background(), "m", "t")
		if err != nil || len(d.Partitions) != 2 {
			return false, fmt.Sprintf("%+v (%v)", d, err)
		}
		p0 = d.Partitions[0]
		p1 := d.Partitions[1]
		// A FAILED with a retry is a transient error while the destination topic appears.
		return p0.State == partitionstate.StateFailed && p0.RetryAttempt == -1 && p1.State == partitionstate.StateMirroring && p1.Lag == 0,
			fmt.Sprintf("%+v", d)
	})
	return p0
}

// A source batch whose CRC holds but whose records do not parse is forwarded as it is (the
// worker does not decode what it forwards) and refused by the destination with
// INVALID_RECORD, as Apache Kafka answers it. The partition goes FAILED, its runner retries
// with back-off and then waits for the operator, naming the refusal; the topic's other
// partition mirrors on, and nothing after the batch is written.
func TestEngineFailsThePartitionWhoseBatchTheDestinationRefuses(t *testing.T) {
	src, dst, stored := twoPartitionTopic(t, "a")
	next := recordbatch.Batch(stored[len(stored)-1]).LastOffset() + 1
	// One record whose length claims more bytes than the batch holds, sealed with a true CRC.
	bad := recordbatch.Seal(recordbatch.Spec{Producer: recordbatch.Producer{ID: -1, Epoch: -1, Sequence: -1}}, 0, []byte{0x7e, 0, 0, 0}, 1, 0)
	binary.BigEndian.PutUint64(bad[recordbatch.OffBaseOffset:], uint64(next))
	src.ServeFetches(t, "t", 0, next+1, append(stored, bad)...)

	e := openEngineRetrying(t, dst, partitionstate.RetryPolicy{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond, MaxAttempts: 2})
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	if p0 := awaitFailedForGoodBesideMirroring(t, e); !strings.Contains(p0.Error, "INVALID_RECORD") {
		t.Fatalf("partition 0: %+v; want the destination's INVALID_RECORD in its error", p0)
	}
	if end := dst.EndOffsets(t, "t")[0]; end != next {
		t.Fatalf("destination partition 0 ends at %d, want %d", end, next)
	}
}
