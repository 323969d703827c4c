package kafkatest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ConsumeAndCommit reads exactly n records of topic as consumer group on the cluster (from
// the start when the group has no committed offsets) and commits after them, as an
// application that moves between clusters does. Fetches are kept tiny so the consumer never
// reads past n.
func (c *Cluster) ConsumeAndCommit(t TB, group, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := c.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(100), kgo.FetchMaxBytes(100))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fs := cl.PollRecords(ctx, n-len(got))
		if err := fs.Err0(); err != nil {
			t.Fatalf("kafkatest: consuming %s as %s on %s: %v", topic, group, c.id, err)
			return nil
		}
		got = append(got, fs.Records()...)
	}
	if len(got) > n {
		t.Fatalf("kafkatest: read %d records of %s, asked %d", len(got), topic, n)
		return nil
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("kafkatest: committing %s's offsets on %s: %v", group, c.id, err)
	}
	return got
}

// Values returns the records' values as strings.
func Values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}
