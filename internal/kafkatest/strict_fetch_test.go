package kafkatest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionlessFetch fetches partition 0 of topic at offset the way the mirror does.
func sessionlessFetch(t *testing.T, c *Cluster, topic string, offset int64) *kmsg.FetchResponse {
	t.Helper()
	return fetchPartitions(t, c, topic, map[int32]int64{0: offset})
}

// fetchPartitions fetches partitions of topic (all led by one broker) from their offsets in
// one sessionless fetch, as the mirror's fetcher does.
func fetchPartitions(t *testing.T, c *Cluster, topic string, offsets map[int32]int64) *kmsg.FetchResponse {
	t.Helper()
	req, br := fetchRequest(t, c, topic, offsets, 0)
	resp, err := req.RequestWith(testCtx(t), br)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// fetchRequest is a sessionless fetch of partitions of topic (all led by one broker) from
// their offsets that waits up to maxWait for records, and the broker to send it to.
func fetchRequest(t *testing.T, c *Cluster, topic string, offsets map[int32]int64, maxWait time.Duration) (*kmsg.FetchRequest, *kgo.Broker) {
	t.Helper()
	meta, err := describeTopic(testCtx(t), c.internal, topic)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = -1, int32(maxWait.Milliseconds()), 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, meta.id
	for p, offset := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = p, offset, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req, c.Client(t).Broker(int(meta.leaders[0]))
}

func answered(resp *kmsg.FetchResponse) (hw int64, batches int, err error) {
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, 0, kerr.UnknownServerError
	}
	p := resp.Topics[0].Partitions[0]
	return p.HighWatermark, len(splitBatches(p.RecordBatches)), kerr.ErrorForCode(p.ErrorCode)
}

// A tiered-storage read that did not finish in time: no records, error NONE, the real high
// watermark. Only fetches below the high watermark count; afterwards kfake answers again.
func TestStrictEmptyFetches(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 1, nil)
	cl := c.Client(t)
	mustProduce(t, cl, "t", 0, kv("k", "a", 1), kv("k", "b", 2))
	mustProduce(t, cl, "t", 0, kv("k", "c", 3))
	faults := c.EmptyFetches(t, "t", 0, 2)

	if hw, n, err := answered(sessionlessFetch(t, c, "t", 3)); hw != 3 || n != 0 || err != nil {
		t.Fatalf("fetch at the high watermark: hw %d, %d batches, %v", hw, n, err)
	}
	for range 2 {
		if hw, n, err := answered(sessionlessFetch(t, c, "t", 1)); hw != 3 || n != 0 || err != nil {
			t.Fatalf("empty answer: hw %d, %d batches, %v; want hw 3, no batches, no error", hw, n, err)
		}
	}
	faults.Wait(t, time.Second)
	if hw, n, err := answered(sessionlessFetch(t, c, "t", 1)); hw != 3 || n != 2 || err != nil {
		t.Fatalf("after the faults: hw %d, %d batches, %v; want both batches", hw, n, err)
	}
}

// In a fetch of many partitions (the mirror's fetcher), the faulted partition and the others
// all get no records with their high watermarks, as from a broker whose answer is full.
func TestStrictEmptyFetchesOfManyPartitions(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 2, nil)
	cl := c.Client(t)
	mustProduce(t, cl, "t", 0, kv("k", "a", 1))
	mustProduce(t, cl, "t", 1, kv("k", "b", 2), kv("k", "c", 3))
	faults := c.EmptyFetches(t, "t", 0, 1)
	want := map[int32]int64{0: 1, 1: 2}
	resp := fetchPartitions(t, c, "t", map[int32]int64{0: 0, 1: 0})
	faults.Wait(t, time.Second)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("answer of %d topics; want one with both partitions", len(resp.Topics))
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.HighWatermark != want[p.Partition] || len(p.RecordBatches) != 0 || p.ErrorCode != 0 {
			t.Fatalf("partition %d: hw %d, %d bytes, error %d; want hw %d, no records", p.Partition, p.HighWatermark, len(p.RecordBatches), p.ErrorCode, want[p.Partition])
		}
	}
	resp = fetchPartitions(t, c, "t", map[int32]int64{0: 0, 1: 0})
	for _, p := range resp.Topics[0].Partitions {
		if len(p.RecordBatches) == 0 {
			t.Fatalf("after the fault: partition %d answered without records", p.Partition)
		}
	}
}

// A throttled fetch has no partitions at all, no error and the throttle time.
func TestStrictThrottleFetches(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 1, nil)
	mustProduce(t, c.Client(t), "t", 0, kv("k", "a", 1))
	faults := c.ThrottleFetches(t, "t", 0, 1, 150*time.Millisecond)
	resp := sessionlessFetch(t, c, "t", 0)
	if len(resp.Topics) != 0 || resp.ErrorCode != 0 || resp.ThrottleMillis != 150 {
		t.Fatalf("throttled answer: %d topics, error %d, throttle %d ms", len(resp.Topics), resp.ErrorCode, resp.ThrottleMillis)
	}
	faults.Wait(t, time.Second)
	if hw, n, err := answered(sessionlessFetch(t, c, "t", 0)); hw != 1 || n != 1 || err != nil {
		t.Fatalf("after the throttle: hw %d, %d batches, %v", hw, n, err)
	}
}
