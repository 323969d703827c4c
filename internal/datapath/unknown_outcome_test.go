package datapath

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// Produces whose outcome the mirror never learns: the connection drops with a produce on it
// and the request reaches the broker later, or the broker appends it and its answer is lost.
// The next session continues the partition's data producer (or bumps its epoch where the
// partition does not list it), so the broker deduplicates or rejects the late batch: no
// record doubled, no partition FAILED.
func TestMirrorProduceWithUnknownOutcome(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	unknownOutcome(t, src, dst, "unknown")
}

func TestKafkaMirrorProduceWithUnknownOutcome(t *testing.T) {
	onKafkaTopic(t, unknownOutcome)
}

// faultyMirror creates topic on both clusters and mirrors 100 records with a mirror whose
// destination client breaks produces on demand. It returns the faults, the source's
// producer, the mirror's outcome and what stops the mirror.
func faultyMirror(t *testing.T, src, dst *kafkatest.Cluster, topic string) (*kafkatest.ProduceFaults, *kgo.Client, chan error, context.CancelFunc) {
	t.Helper()
	createBoth(t, src, dst, topic, 1, nil)
	prod := src.ManualProducer(t)
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 100, "before")...)

	faults := &kafkatest.ProduceFaults{}
	m := NewPartitionMirror(src.Client(t), dst.Client(t, faults.Opt()), PartitionConfig{Mirror: "m1", Topic: topic, FirstStart: true})
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	return faults, prod, errc, stop
}

func unknownOutcome(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
	faults, prod, errc, stop := faultyMirror(t, src, dst, topic)
	t.Cleanup(func() { stop(); <-errc })

	faults.HoldNext(time.Second)
	for i := range 5 {
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 20, fmt.Sprint("held-", i))...)
	}
	kafkatest.WaitUntil(t, 30*time.Second, "the held produce to be delivered", func() bool { return faults.Delivered() == 1 })
	// A held batch appended again would stand past the source's end.
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 10, "after-held")...)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)

	faults.DropNextAnswer()
	for i := range 5 {
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 20, fmt.Sprint("dropped-", i))...)
	}
	kafkatest.WaitUntil(t, 30*time.Second, "a produce answer to be dropped", func() bool { return faults.Fired() == 2 })
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	select {
	case err := <-errc:
		t.Fatalf("the mirror stopped: %v", err)
	default:
	}
}

// A worker dies with a produce on its way; the next worker (a new mirror with clients of its
// own) starts before the late produce lands. It continues the partition's data producer — or,
// where the partition does not list it, bumps its epoch — so the late batch is deduplicated
// or rejected, never appended a second time.
func TestMirrorUnknownOutcomeAcrossWorkers(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	unknownOutcomeAcrossWorkers(t, src, dst, "late")
}

func TestKafkaMirrorUnknownOutcomeAcrossWorkers(t *testing.T) {
	onKafkaTopic(t, unknownOutcomeAcrossWorkers)
}

func unknownOutcomeAcrossWorkers(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
	faults, prod, errc, kill := faultyMirror(t, src, dst, topic)

	faults.HoldNext(3 * time.Second)
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 20, "held")...)
	kafkatest.WaitUntil(t, 30*time.Second, "a produce to be held", func() bool { return faults.Fired() == 1 })
	kill()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	next := NewPartitionMirror(src.Client(t), dst.Client(t), PartitionConfig{Mirror: "m1", Topic: topic})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- next.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-errc })
	kafkatest.WaitUntil(t, 30*time.Second, "the held produce to be delivered", func() bool { return faults.Delivered() == 1 })
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 10, "after")...)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	select {
	case err := <-errc:
		t.Fatalf("the next worker's mirror stopped: %v", err)
	default:
	}
}

// The source changes leader, and the answer to the produce of the first records of its new
// leader epoch is lost. The next session checks the source's lineage with the epoch of the
// newest batch the destination may hold: with the older epoch, which ends where the new one
// begins, the landed batch looked like records the source no longer has (a truncation) and
// the partition stopped.
func TestMirrorUnknownOutcomeAfterSourceLeaderChange(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	faults, prod, errc, stop := faultyMirror(t, src, dst, "moving")
	t.Cleanup(func() { stop(); <-errc })

	src.Fake().ShufflePartitionLeaders()
	faults.DropNextAnswer()
	kafkatest.ProduceSync(t, prod, kafkatest.Records("moving", 0, 20, "new-epoch")...)
	kafkatest.WaitUntil(t, 30*time.Second, "a produce answer to be dropped", func() bool { return faults.Fired() == 1 })
	kafkatest.ProduceSync(t, prod, kafkatest.Records("moving", 0, 10, "after")...)
	kafkatest.WaitIdentical(t, src, dst, "moving", kafkatest.IdenticalWithin)
	select {
	case err := <-errc:
		t.Fatalf("the mirror stopped: %v", err)
	default:
	}
}
