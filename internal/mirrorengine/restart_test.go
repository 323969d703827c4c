package mirrorengine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// mirrored mirrors topic "t", with n records in each of its partitions, through mirror "m"
// until the destination is identical.
func mirrored(t *testing.T, partitions int32, n int) (src, dst *kafkatest.Cluster, e *Engine, prod *kgo.Client) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	src.CreateTopic(t, "t", partitions, nil)
	prod = manualProducer(t, src)
	for p := range partitions {
		produceSync(t, prod, records("t", p, n, "first")...)
	}
	e = openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	waitState(t, e, "m", "t", int(partitions), StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", waitIdentical)
	return src, dst, e, prod
}

// failWhileMirroring fails a MIRRORING partition for good, the way a failure that waits for
// the operator does: FAILED, not retryable, never stopped, so no last mirrored offset.
func failWhileMirroring(t *testing.T, e *Engine, mirror, topic string, p int32) {
	t.Helper()
	r := e.runner(partitionKey{mirror, topic, p})
	if s := r.Status().State; s != StateMirroring {
		t.Fatalf("partition %d is %s, not MIRRORING", p, s)
	}
	r.send(Fail{Err: "injected failure while mirroring", Retryable: false, Now: time.Now()})
	eventually(t, "the partition FAILED", func() error {
		if s := r.Status(); s.State != StateFailed || s.RetryAttempt != -1 {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if _, ok := e.store.LastMirror(mirror, topic, p); ok {
		t.Fatal("a last mirrored offset was recorded for a partition that never stopped")
	}
}

// stateEpochs returns each partition's state epoch: it moves on every state change.
func stateEpochs(e *Engine, mirror, topic string) map[int32]int32 {
	out := map[int32]int32{}
	for _, r := range e.topicRunners(mirror, topic) {
		out[r.key.partition] = r.Status().StateEpoch
	}
	return out
}

// A partition that FAILED while mirroring (never stopped) is restarted by the operator: its
// destination is a prefix of the source, so it continues under either divergence policy,
// the topic is not recreated and the healthy partitions are never interrupted.
func TestEngineRestartFailedWhileMirroring(t *testing.T) {
	for _, divergence := range []string{"fail", "recreate"} {
		t.Run(divergence, func(t *testing.T) {
			src, dst, e, prod := mirrored(t, 3, 60)
			// Partition 1 ends with a committed transaction: the destination's last offset is
			// a marker the destination's coordinator wrote with its own timestamp.
			txn := manualProducer(t, src, kgo.TransactionalID("restart-txn"))
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			produceSync(t, txn, records("t", 1, 5, "txn")...)
			if err := txn.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			kafkatest.WaitIdentical(t, src, dst, "t", waitIdentical)
			id := topicID(t, dst, "t")

			failWhileMirroring(t, e, "m", "t", 1)
			for p := range int32(3) {
				produceSync(t, prod, records("t", p, 40, "after")...)
			}
			healthy := stateEpochs(e, "m", "t")

			start(t, e, "m", "t", divergence)
			waitState(t, e, "m", "t", 3, StateMirroring)
			kafkatest.WaitIdentical(t, src, dst, "t", waitIdentical)
			if topicID(t, dst, "t") != id {
				t.Fatal("the destination topic was recreated, though it was a prefix of the source")
			}
			now := stateEpochs(e, "m", "t")
			for _, p := range []int32{0, 2} {
				if now[p] != healthy[p] {
					t.Errorf("healthy partition %d changed state (epoch %d → %d)", p, healthy[p], now[p])
				}
			}
		})
	}
}

// A partition whose record in __mirror_state was lost starts over as UNKNOWN; its
// destination equals the source, so it continues instead of demanding a full copy.
func TestEngineContinuesAfterLosingPartitionRecords(t *testing.T) {
	src, dst, e, prod := mirrored(t, 2, 50)
	id := topicID(t, dst, "t")
	e.Close()

	if err := e.store.DeletePartitions(context.Background(), "m", "t"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		produceSync(t, prod, records("t", p, 30, "b")...)
	}
	again := openEngine(t, dst)
	if n := len(again.store.Partitions("m", "t")); n != 0 {
		t.Fatalf("%d partition records left", n)
	}
	waitState(t, again, "m", "t", 2, StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", waitIdentical)
	if topicID(t, dst, "t") != id {
		t.Fatal("the destination topic was recreated")
	}
}
