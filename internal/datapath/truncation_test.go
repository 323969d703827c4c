package datapath

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

func TestCheckLineage(t *testing.T) {
	for _, tc := range []struct {
		name             string
		epoch            int32
		epochEnd, dstEnd int64
		truncated        bool
	}{
		{"nothing copied yet", -1, 0, 10, false},
		{"the epoch's log reaches the destination end", 3, 10, 10, false},
		{"a later epoch began after the destination end", 3, 12, 10, false},
		{"the source was truncated below the destination end", 3, 7, 10, true},
	} {
		err := checkLineage(tc.epoch, tc.epochEnd, tc.dstEnd)
		var trunc *mirrorerr.SourceTruncatedError
		if errors.As(err, &trunc) != tc.truncated || (tc.truncated && mirrorerr.Classify(err) != mirrorerr.OperatorActs) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// mirroredOnce mirrors n records of a new one-partition topic until both logs are identical,
// stops, and returns the clusters, the source producer and the stopped mirror, whose next
// Run is its next session.
func mirroredOnce(t *testing.T, topic string, n int) (src, dst *kafkatest.Cluster, prod *kgo.Client, m *PartitionMirror) {
	t.Helper()
	src, dst, prod = mirroredTopic(t, topic, 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, n, "a")...)
	m = NewPartitionMirror(src.Client(t), dst.Client(t), PartitionConfig{Mirror: "m1", Topic: topic, FirstStart: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return src, dst, prod, m
}

// An unclean leader election truncated the source below what was copied (modelled by an
// OffsetForLeaderEpoch answer with a lower end): the next session stops with the offsets
// instead of copying over rewritten source offsets.
func TestMirrorSourceTruncated(t *testing.T) {
	src, _, _, m := mirroredOnce(t, "truncated", 50)
	if m.LastMirroredEpoch() < 0 {
		t.Fatalf("no last mirrored epoch kept")
	}

	src.Fake().ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		src.Fake().KeepControl()
		req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, rp.LeaderEpoch, 30
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := m.Run(ctx)
	var trunc *mirrorerr.SourceTruncatedError
	if !errors.As(err, &trunc) || trunc.EpochEnd != 30 || trunc.DestinationEnd != 50 {
		t.Fatalf("mirror error %v, want the source truncated to 30 below the destination end 50", err)
	}
}

// A source leader elected a moment ago answers, until its followers' next fetches, a high
// watermark below offsets its log holds and the destination already copied (seen on Apache
// Kafka 4.4 after a leader move: fresh seed 660531087 of TestKafkaMirrorRandomized). The next
// sessions wait for it instead of stopping the partition for diverged logs.
func TestMirrorWaitsForALaggingSourceHighWatermark(t *testing.T) {
	src, dst, prod, m := mirroredOnce(t, "lagging", 20)
	lag := src.LagHighWatermark(t, "lagging", 0, 5, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("mirror error %v, want it to wait while the source's log holds the destination's offsets", err)
	case <-lag.Served():
	case <-time.After(30 * time.Second):
		t.Fatal("the lagging high watermark was not asked for")
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records("lagging", 0, 10, "b")...)
	kafkatest.WaitIdentical(t, src, dst, "lagging", kafkatest.IdenticalWithin)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("mirror error %v, want none: the source's log held the destination's offsets", err)
	}
}

// A source whose log (not just its high watermark) ends below the destination's end diverged
// from it: the next session stops the partition.
func TestMirrorStopsWhenTheSourceLogEndsBelowTheDestination(t *testing.T) {
	src, _, _, m := mirroredOnce(t, "lost", 20)
	src.LoseLogEnd(t, "lost", 0, 5, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := m.Run(ctx)
	var ahead *mirrorerr.DestinationAheadError
	if !errors.As(err, &ahead) || ahead.DestinationEnd != 20 || ahead.SourceHighWatermark != 15 || mirrorerr.Classify(err) != mirrorerr.OperatorActs {
		t.Fatalf("mirror error %v, want the destination end 20 past the source's 15, for the operator", err)
	}
}
