package kafkatest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
)

// Helpers the mirror tests of several packages share: records to write, writing them, and
// reading what a partition holds.

// IdenticalWithin is how long a test waits for a mirrored topic to become identical.
const IdenticalWithin = 60 * time.Second

// Records makes n records for partition p with keys, values, headers and (deliberately
// non-monotonic) timestamps that a mirror must keep.
func Records(topic string, p int32, n int, tag string) []*kgo.Record {
	base := time.Now().Add(-time.Hour)
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{
			Topic:     topic,
			Partition: p,
			Key:       []byte(fmt.Sprintf("%s-key-%d", tag, i%17)),
			Value:     bytes.Repeat([]byte(fmt.Sprintf("%s-value-%d;", tag, i)), 1+i%5),
			Headers:   []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}},
			Timestamp: base.Add(time.Duration((i*7919)%1000) * time.Millisecond),
		}
	}
	return out
}

// ProduceSync writes recs and fails the test if any write fails.
func ProduceSync(t TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// ProduceKeyed writes n records to topic through cl (keys key-0 to key-16, values value-from
// to value-from+n-1, partitioned by key) and waits for their acknowledgement.
func ProduceKeyed(t TB, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := from + i
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(k%17)), Value: []byte("value-" + strconv.Itoa(k))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// ManualProducer is a client that writes each record to the partition it names.
func (c *Cluster) ManualProducer(t TB, opts ...kgo.Opt) *kgo.Client {
	return c.Client(t, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5 * time.Millisecond)}, opts...)...)
}

// TopicFor names a topic after the running (sub)test, so scenarios on shared clusters keep
// out of each other's way. A name given before in this process (a test repeated with
// -test.count) gets a run number: the shared clusters still hold the earlier run's topic.
func TopicFor(t interface{ Name() string }, suffix string) string {
	name := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	if suffix != "" {
		name += "." + suffix
	}
	topicsGivenMu.Lock()
	defer topicsGivenMu.Unlock()
	topicsGiven[name]++
	if n := topicsGiven[name]; n > 1 {
		name += ".run" + strconv.Itoa(n)
	}
	return name
}

var (
	topicsGivenMu sync.Mutex
	topicsGiven   = map[string]int{}
)

// EndOffsets are the end offsets of topic's partitions.
func (c *Cluster) EndOffsets(t TB, topic string) map[int32]int64 {
	t.Helper()
	ends, err := c.Admin(t).ListEndOffsets(context.Background(), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s on %s: %v", topic, c.ID(), err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// DeleteRecords moves the log start of topic's partition to at, as retention or an operator
// does, the way the worker does (kafkareq: done once the leader's log start is there, though
// a follower may not have taken it yet). A retriable error is asked again: a leader elected a
// moment ago may not be the one the request reached.
func (c *Cluster) DeleteRecords(t TB, topic string, partition int32, at int64) {
	t.Helper()
	cl := kafkareq.NewCluster(c.ID(), c.Client(t))
	WaitFor(t, time.Minute, fmt.Sprintf("DeleteRecords of %s[%d] at %d on %s", topic, partition, at, c.ID()), func() (bool, string) {
		err := cl.DeleteRecords(context.Background(), topic, partition, at)
		if err != nil && !kerr.IsRetriable(err) {
			t.Fatalf("DeleteRecords of %s[%d] at %d on %s: %v", topic, partition, at, c.ID(), err)
		}
		return err == nil, fmt.Sprint(err)
	})
}

// RawBatches are the record batches a partition holds from its log start to its high
// watermark, as the broker stores them.
func (c *Cluster) RawBatches(t TB, topic string, partition int32) [][]byte {
	t.Helper()
	ctx := context.Background()
	cl := c.Client(t)
	meta, err := describeTopic(ctx, cl, topic)
	if err != nil || !meta.exists {
		t.Fatalf("raw batches of %s: %v (exists %v)", topic, err, meta.exists)
	}
	br := cl.Broker(int(meta.leaders[partition]))
	start, err := listOffset(ctx, br, topic, partition, -2, 0)
	if err != nil {
		t.Fatalf("raw batches of %s[%d]: log start: %v", topic, partition, err)
	}
	end, err := listOffset(ctx, br, topic, partition, -1, 0)
	if err != nil {
		t.Fatalf("raw batches of %s[%d]: high watermark: %v", topic, partition, err)
	}
	var out [][]byte
	for at := start; at < end; {
		raw, err := asClient.fetchRaw(ctx, br, topic, meta.id, partition, at)
		if err != nil {
			t.Fatalf("raw batches of %s[%d] at %d: %v", topic, partition, at, err)
		}
		from := at
		for _, b := range splitBatches(raw) {
			if last := lastOffset(b); last >= at {
				out = append(out, b)
				at = last + 1
			}
		}
		if at == from {
			break
		}
	}
	return out
}

// ServeFetches answers every fetch of a partition of a kfake cluster with the first of
// batches that ends at or after the fetch offset (one batch an answer: each is the last of
// its answer once), and the high watermark end; it skips tests on real Kafka.
func (c *Cluster) ServeFetches(t TB, topic string, partition int32, end int64, batches ...[]byte) {
	t.Helper()
	if c.Fake() == nil {
		t.Skipf("needs kfake to answer fetches")
	}
	c.AnswerFetches(t, topic, partition, func(fp kmsg.FetchRequestTopicPartition) *kmsg.FetchResponseTopicPartition {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = end, end, 0
		for _, b := range batches {
			if lastOffset(b) >= fp.FetchOffset {
				rp.RecordBatches = b
				break
			}
		}
		return &rp
	})
}

// lastOffset is a batch's last offset: its base offset plus its last offset delta.
func lastOffset(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:])))
}

// CreateACLs creates the ACLs the builders describe and fails the test unless every one
// was created.
func (c *Cluster) CreateACLs(t TB, acls ...*kadm.ACLBuilder) {
	t.Helper()
	for _, b := range acls {
		res, err := c.Admin(t).CreateACLs(context.Background(), b)
		for i := 0; err == nil && i < len(res); i++ {
			err = res[i].Err
		}
		if err != nil {
			t.Fatalf("creating ACLs: %v", err)
		}
	}
}

// ProduceAs writes one record to topic as user, with no retries and no idempotence (one
// attempt, as an application would be refused), and returns the broker's answer.
func (c *Cluster) ProduceAs(t TB, user, password, topic string, value []byte) error {
	t.Helper()
	cl, err := kgo.NewClient(append(c.ClientOptsAs(user, password), kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))...)
	if err != nil {
		t.Fatalf("a client as %s: %v", user, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr()
}
