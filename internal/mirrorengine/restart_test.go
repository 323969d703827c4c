package mirrorengine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// sourceTopic starts a source and a destination cluster, creates topic on the source and
// writes n records tagged tag into each of its partitions.
func sourceTopic(t *testing.T, topic string, partitions int32, n int, tag string) (src, dst *kafkatest.Cluster, prod *kgo.Client) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	src.CreateTopic(t, topic, partitions, nil)
	prod = src.ManualProducer(t)
	for p := range partitions {
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, n, tag)...)
	}
	return src, dst, prod
}

// mirrored mirrors topic "t", with n records in each of its partitions, through mirror "m"
// until the destination is identical.
func mirrored(t *testing.T, partitions int32, n int) (src, dst *kafkatest.Cluster, e *Engine, prod *kgo.Client) {
	t.Helper()
	src, dst, prod = sourceTopic(t, "t", partitions, n, "first")
	e = openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	waitState(t, e, "m", "t", int(partitions), partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
	return src, dst, e, prod
}

// failWhileMirroring fails a MIRRORING partition for good, the way a failure that waits for
// the operator does: FAILED, not retryable, never stopped, so no last mirrored offset.
func failWhileMirroring(t *testing.T, e *Engine, mirror, topic string, p int32) {
	t.Helper()
	r := e.runner(partitionKey{mirror, topic, p})
	if s := r.Status().State; s != partitionstate.StateMirroring {
		t.Fatalf("partition %d is %s, not MIRRORING", p, s)
	}
	r.send(partitionstate.Fail{Err: "injected failure while mirroring", Retryable: false, Now: time.Now()})
	eventually(t, "the partition FAILED", func() error {
		if s := r.Status(); s.State != partitionstate.StateFailed || s.RetryAttempt != -1 {
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
			txn := src.ManualProducer(t, kgo.TransactionalID("restart-txn"))
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			kafkatest.ProduceSync(t, txn, kafkatest.Records("t", 1, 5, "txn")...)
			if err := txn.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
			id := topicID(t, dst, "t")

			failWhileMirroring(t, e, "m", "t", 1)
			for p := range int32(3) {
				kafkatest.ProduceSync(t, prod, kafkatest.Records("t", p, 40, "after")...)
			}
			healthy := stateEpochs(e, "m", "t")

			start(t, e, "m", "t", divergence)
			waitState(t, e, "m", "t", 3, partitionstate.StateMirroring)
			kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
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

// Partition 0 of a stopped topic is written on the destination (diverged) while the others
// stay the source's; after a start under "fail" they mirror and keep writing. "recreate"
// then deletes the topic only once no runner of it runs any more, and all partitions mirror
// again from scratch.
func TestEngineRecreateOnlyAfterEveryPartitionStopped(t *testing.T) {
	src, dst, e, prod := mirrored(t, 3, 40)
	topicCmd(t, e.StopMirrorTopics, "m", "t")
	waitState(t, e, "m", "t", 3, partitionstate.StateStopped)

	kafkatest.ProduceSync(t, dst.ManualProducer(t), kafkatest.Records("t", 0, 5, "foreign")...) // partition 0 only
	start(t, e, "m", "t", "fail")
	eventually(t, "partition 0 FAILED, the others MIRRORING", func() error {
		d, err := e.DescribeMirrorTopic(context.Background(), "m", "t")
		if err != nil || len(d.Partitions) != 3 || d.Partitions[0].State != partitionstate.StateFailed ||
			d.Partitions[1].State != partitionstate.StateMirroring || d.Partitions[2].State != partitionstate.StateMirroring {
			return fmt.Errorf("%+v %v", d, err)
		}
		if msg := d.Partitions[0].Error; !strings.Contains(msg, "5 records at offsets 40 to 44") {
			return fmt.Errorf("partition 0 error %q does not give the records to discard", msg)
		}
		return nil
	})
	id := topicID(t, dst, "t")

	// The healthy partitions keep writing until the recreation stops them.
	ctx, stopProducing := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			recs := append(kafkatest.Records("t", 1, 5, fmt.Sprint("busy-", i)), kafkatest.Records("t", 2, 5, fmt.Sprint("busy-", i))...)
			if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
				t.Errorf("producing: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { stopProducing(); wg.Wait() })

	// At the moment the destination topic is deleted, no runner of it may still run.
	runners := e.topicRunners("m", "t")
	var mu sync.Mutex
	var deletes int
	var running []string
	dst.Fake().ControlKey(int16(kmsg.DeleteTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		deletes++
		for _, r := range runners {
			select {
			case <-r.done:
			default:
				running = append(running, fmt.Sprintf("partition %d (%s)", r.key.partition, r.Status().State))
			}
		}
		return nil, nil, false
	})
	before := dst.EndOffsets(t, "t")
	eventually(t, "the healthy partitions writing", func() error {
		if after := dst.EndOffsets(t, "t"); after[1] == before[1] || after[2] == before[2] {
			return fmt.Errorf("destination ends %v, then %v", before, after)
		}
		return nil
	})

	start(t, e, "m", "t", "recreate")
	mu.Lock()
	if deletes != 1 || len(running) > 0 {
		t.Errorf("the destination topic was deleted %d times; still running at the delete: %v", deletes, running)
	}
	mu.Unlock()
	waitState(t, e, "m", "t", 3, partitionstate.StateMirroring)
	if topicID(t, dst, "t") == id {
		t.Fatal("the diverged destination topic was not recreated")
	}
	stopProducing()
	wg.Wait()
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
}

// A partition that does not stop writing in time (here: stuck in PREPARING) makes
// "recreate" refuse without deleting anything; started again once it settled, it recreates.
func TestEngineRecreateRefusedWhileAPartitionIsBusy(t *testing.T) {
	src, dst, _ := sourceTopic(t, "t", 2, 20, "a")
	dst.CreateTopic(t, "t", 2, nil)
	kafkatest.ProduceSync(t, dst.ManualProducer(t), kafkatest.Records("t", 0, 3, "foreign")...) // never mirrored

	release := make(chan struct{})
	var once sync.Once
	testHookAction = func(k partitionKey, a partitionstate.Action) {
		if k.partition == 1 && a.Kind == partitionstate.ActionPrepare {
			once.Do(func() { <-release })
		}
	}
	t.Cleanup(func() { testHookAction = nil })
	timeout := quiesceTimeout
	quiesceTimeout = 200 * time.Millisecond
	t.Cleanup(func() { quiesceTimeout = timeout })

	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "fail")
	eventually(t, "partition 0 FAILED, partition 1 PREPARING", func() error {
		rs := e.topicRunners("m", "t")
		if len(rs) != 2 || rs[0].Status().State != partitionstate.StateFailed || rs[1].Status().State != partitionstate.StatePreparing {
			return fmt.Errorf("%d runners", len(rs))
		}
		return nil
	})
	id := topicID(t, dst, "t")
	res, err := e.StartMirrorTopics(context.Background(), "m", []string{"t"}, "recreate")
	if err != nil || res[0].Err == nil || !strings.Contains(res[0].Err.Message, "partitions 1 (PREPARING) of topic \"t\" did not stop") {
		t.Fatalf("recreate while partition 1 prepares: %+v %v", res, err)
	}
	if topicID(t, dst, "t") != id {
		t.Fatal("the destination topic was deleted while a partition was busy")
	}

	close(release)
	waitState(t, e, "m", "t", 2, partitionstate.StateFailed)
	start(t, e, "m", "t", "recreate")
	waitState(t, e, "m", "t", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
	if topicID(t, dst, "t") == id {
		t.Fatal("the diverged destination topic was not recreated")
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
		kafkatest.ProduceSync(t, prod, kafkatest.Records("t", p, 30, "b")...)
	}
	again := openEngine(t, dst)
	if n := len(again.store.Partitions("m", "t")); n != 0 {
		t.Fatalf("%d partition records left", n)
	}
	waitState(t, again, "m", "t", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
	if topicID(t, dst, "t") != id {
		t.Fatal("the destination topic was recreated")
	}
}

// A restart with divergence = "recreate" right after a source leader election, whose new
// leader answers a high watermark below offsets the destination already holds (its log holds
// them too): neither the start command nor PREPARING takes the destination for diverged.
// Nothing is deleted and mirroring goes on.
func TestEngineRestartBesideALaggingSourceHighWatermark(t *testing.T) {
	src, dst, e, prod := mirrored(t, 1, 40)
	topicCmd(t, e.StopMirrorTopics, "m", "t")
	waitState(t, e, "m", "t", 1, partitionstate.StateStopped)
	id := topicID(t, dst, "t")

	lag := src.LagHighWatermark(t, "t", 0, 5, 6)
	start(t, e, "m", "t", "recreate")
	waitState(t, e, "m", "t", 1, partitionstate.StateMirroring)
	lag.Wait(t, 30*time.Second)
	if topicID(t, dst, "t") != id {
		t.Fatal("the destination topic was recreated: a lagging source high watermark was taken for a divergence")
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records("t", 0, 5, "more")...)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
}
