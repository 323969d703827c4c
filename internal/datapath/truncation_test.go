package datapath

import (
	"context"
	"errors"
	"testing"

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

// An unclean leader election truncated the source below what was copied (modelled by an
// OffsetForLeaderEpoch answer with a lower end): the next session stops with the offsets
// instead of copying over rewritten source offsets.
func TestMirrorSourceTruncated(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "truncated", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("truncated", 0, 50, "x")...)
	m := NewPartitionMirror(src.Client(t), dst.Client(t), PartitionConfig{Mirror: "m1", Topic: "truncated", FirstStart: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	kafkatest.WaitIdentical(t, src, dst, "truncated", kafkatest.IdenticalWithin)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
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
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	err := m.Run(ctx)
	var trunc *mirrorerr.SourceTruncatedError
	if !errors.As(err, &trunc) || trunc.EpochEnd != 30 || trunc.DestinationEnd != 50 {
		t.Fatalf("mirror error %v, want the source truncated to 30 below the destination end 50", err)
	}
}
