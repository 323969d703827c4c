package kafkatest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// epochEnd asks OffsetForLeaderEpoch, as a consumer, where partition 0's current epoch ends.
func epochEnd(t *testing.T, c *Cluster, topic string) int64 {
	t.Helper()
	info := c.Fake().PartitionInfo(topic, 0)
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = 0, info.Epoch, info.Epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatal(err)
	}
	return p.EndOffset
}

// A leader elected a moment ago answers a high watermark below its log's end, n times.
func TestStrictLagHighWatermark(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 1, nil)
	cl := c.Client(t)
	mustProduce(t, cl, "t", 0, kv("k", "a", 1), kv("k", "b", 2), kv("k", "c", 3))
	lag := c.LagHighWatermark(t, "t", 0, 2, 2) // the high watermark and the last stable offset
	if got := partitionOffsets(t, cl, "t", 0); got != (offsets{0, 1, 1}) {
		t.Fatalf("offsets %+v while lagging, want the log start 0 and the ends 1", got)
	}
	if got := epochEnd(t, c, "t"); got != 3 {
		t.Fatalf("epoch end %d while the high watermark lags, want the log end 3", got)
	}
	lag.Wait(t, time.Second)
	if got := partitionOffsets(t, cl, "t", 0); got != (offsets{0, 3, 3}) {
		t.Fatalf("offsets %+v after the lag, want 0, 3, 3", got)
	}
}

// A source truncated by an unclean election: its high watermark and log end both lower.
func TestStrictLoseLogEnd(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 1, nil)
	cl := c.Client(t)
	mustProduce(t, cl, "t", 0, kv("k", "a", 1), kv("k", "b", 2), kv("k", "c", 3))
	c.LoseLogEnd(t, "t", 0, 2, 100)
	if got := partitionOffsets(t, cl, "t", 0); got.hw != 1 {
		t.Fatalf("offsets %+v, want the high watermark 1", got)
	}
	if got := epochEnd(t, c, "t"); got != 1 {
		t.Fatalf("epoch end %d, want 1", got)
	}
}

// A partition whose log the leader has not created yet: NOT_LEADER_OR_FOLLOWER for it, its
// neighbours' offsets beside, n times.
func TestStrictLogNotCreated(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 2, nil)
	cl := c.Client(t)
	mustProduce(t, cl, "t", 0, kv("k", "a", 1), kv("k", "b", 2))
	list := func() (codes [2]int16, offsets [2]int64) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		for p := range int32(2) {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl.Broker(int(c.Fake().LeaderFor("t", 0))))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Topics[0].Partitions {
			codes[p.Partition], offsets[p.Partition] = p.ErrorCode, p.Offset
		}
		return codes, offsets
	}
	notCreated := c.LogNotCreated(t, "t", 1, 1)
	if codes, offsets := list(); codes != [2]int16{0, kerr.NotLeaderForPartition.Code} || offsets[0] != 2 {
		t.Fatalf("error codes %v, offsets %v; want partition 0 at 2 beside NOT_LEADER_OR_FOLLOWER for partition 1", codes, offsets)
	}
	notCreated.Wait(t, time.Second)
	if codes, offsets := list(); codes != [2]int16{} || offsets != [2]int64{2, 0} {
		t.Fatalf("error codes %v, offsets %v once its log exists; want offsets 2 and 0", codes, offsets)
	}
}
