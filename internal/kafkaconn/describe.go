package kafkaconn

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicSummary is what a read-only look at a topic learns: whether it exists, its
// partitions, and the records (and transaction markers) it holds — the sum over partitions
// of end offset - start offset.
type TopicSummary struct {
	Exists     bool
	Partitions int
	Records    int64
}

// DescribeTopic connects with s for one look at topic and closes the connection: for
// callers that look rarely and have no place to keep a client (the provider's plan-time
// checks). ctx bounds it.
func DescribeTopic(ctx context.Context, s Settings, clientID, topic string) (TopicSummary, error) {
	opts, err := Opts(s)
	if err != nil {
		return TopicSummary{}, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ClientID(clientID), kgo.DialTimeout(5*time.Second), kgo.RetryTimeout(10*time.Second))...)
	if err != nil {
		return TopicSummary{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	meta, err := adm.Metadata(ctx, topic)
	if err != nil {
		return TopicSummary{}, fmt.Errorf("metadata of %q: %w", topic, err)
	}
	if !meta.Topics.Has(topic) {
		return TopicSummary{}, nil
	}
	if terr := meta.Topics[topic].Err; terr != nil {
		return TopicSummary{}, fmt.Errorf("metadata of %q: %w", topic, terr)
	}
	out := TopicSummary{Exists: true, Partitions: len(meta.Topics[topic].Partitions)}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return out, fmt.Errorf("start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return out, fmt.Errorf("end offsets of %q: %w", topic, err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			out.Records += o.Offset - s.Offset
		}
	})
	return out, nil
}
