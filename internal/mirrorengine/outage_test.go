package mirrorengine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// TestEngineSourceBlackhole: while the source does not answer, describe answers within its
// bound with the last known source offsets, their age and the cluster that did not answer,
// and a partition whose sessions keep failing is reported stalled; once the source answers
// again, everything is identical with nobody acting.
func TestEngineSourceBlackhole(t *testing.T) {
	src, dst, prod := sourceTopic(t, "orders", 2, 50, "before")
	proxy := kafkatest.NewProxy(t, src)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Open(ctx, Config{
		Destination: dst.Client(t), Retry: fastRetry, StallAfter: time.Second,
		// A request that gets no answer fails in a second, not kgo's default ten.
		SourceOpts: []kgo.Opt{kgo.RetryTimeout(5 * time.Second), kgo.RequestTimeoutOverhead(time.Second)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if _, err := e.CreateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "m", Source: mirrorstate.SourceConnection{BootstrapServers: proxy.Addrs()}}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", "orders", "")
	waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)
	before := time.Now()

	proxy.Blackhole()
	for p := range int32(2) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("orders", p, 30, "during")...)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		began := time.Now()
		d, err := e.DescribeMirrorTopic(context.Background(), "m", "orders")
		if took := time.Since(began); took > describeTimeout+time.Second {
			t.Fatalf("describe took %v during the outage; its bound is %v", took, describeTimeout)
		}
		if err != nil {
			t.Fatal(err)
		}
		stalled := len(e.StalledPartitions()) == 2
		for _, p := range d.Partitions {
			stalled = stalled && p.State == partitionstate.StateMirroring && strings.HasPrefix(p.Error, "stalled: source unreachable, mirroring sessions failing for ") &&
				slices.Equal(p.Unreachable, []string{sideSource}) &&
				p.SourceOffset == 50 && p.SourceOffsetAt.Before(before) && p.DestinationOffset == 50 && p.DestinationOffsetAt.After(before)
		}
		if stalled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stalled, labelled description during the outage: %+v; stalled: %+v", d, e.StalledPartitions())
		}
		time.Sleep(100 * time.Millisecond)
	}

	proxy.Heal()
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)
	d := waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring)
	deadline = time.Now().Add(30 * time.Second)
	for len(e.StalledPartitions()) > 0 || d.Partitions[0].Error != "" || d.Partitions[1].Error != "" || len(d.Partitions[0].Unreachable) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still stalled after healing: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
		d = waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring)
	}
	if p := d.Partitions[0]; p.SourceOffset != 80 || p.Lag != 0 {
		t.Fatalf("after healing: %+v", p)
	}
}

// A destination partition its leader answers NOT_LEADER_OR_FOLLOWER for (Apache Kafka does
// for a new topic's partition, for seconds, until it created the partition's log) is asked
// once per describe: the answer comes at once with its neighbours' fresh offsets and its own
// last known one, and names no cluster unreachable (the broker answered). A describe used to
// ask the leader again and again until its 3 s bound. The destination client has the
// worker's options: a test client's quick retries would give up on the partition sooner.
func TestDescribeAsksEachLeaderOnce(t *testing.T) {
	src, dst, _ := sourceTopic(t, "t", 2, 50, "first")
	opts, err := kafkaconn.Opts(kafkaconn.Settings{BootstrapServers: dst.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := Open(ctx, Config{Destination: cl, Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	waitState(t, e, "m", "t", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
	kafkatest.WaitFor(t, 30*time.Second, "describe to read partition 1's destination offset 50", func() (bool, string) {
		d, err := e.DescribeMirrorTopic(context.Background(), "m", "t")
		if err != nil {
			return false, err.Error()
		}
		return d.Partitions[1].DestinationOffset == 50, fmt.Sprint(d.Partitions)
	})

	notServed := dst.LogNotCreated(t, "t", 1, 1)
	asked := time.Now()
	d, err := e.DescribeMirrorTopic(context.Background(), "m", "t")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-notServed.Served():
	default:
		t.Fatal("the describe did not ask for partition 1's destination offset")
	}
	p0, p1 := d.Partitions[0], d.Partitions[1]
	if len(p0.Unreachable) > 0 || len(p1.Unreachable) > 0 {
		t.Fatalf("a partition its leader does not serve yet made describe report a cluster unreachable: %+v", d.Partitions)
	}
	if p1.DestinationOffset != 50 || p1.DestinationOffsetAt.After(asked) {
		t.Fatalf("partition 1's destination offset %d read at %v, want 50 read before the describe at %v: its leader was asked again", p1.DestinationOffset, p1.DestinationOffsetAt, asked)
	}
	if p0.DestinationOffset != 50 || !p0.DestinationOffsetAt.After(asked) {
		t.Fatalf("partition 0's destination offset %d read at %v, want 50 read by the describe at %v", p0.DestinationOffset, p0.DestinationOffsetAt, asked)
	}
}
