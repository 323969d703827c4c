package datapath

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/rounds"
)

// Session starts make requests that answer for many partitions at once (a topic's metadata,
// ListTransactions of every broker, DescribeProducers per leader, ...); the sessions that
// start together, a started topic's partitions, share one per client and round. A round
// begins after all its askers asked, so each session still sees the cluster as of its start.

// startRoundTimeout bounds one shared request: no asker's context may cut it short for the
// others.
const startRoundTimeout = time.Minute

// startRoundGather is how long a round begun from idle waits for more askers: a start's
// requests follow one another, each shared in rounds, and the sessions one round answers
// reach the next request a moment apart. Without it each request splits the sessions
// further: 50 partitions starting under load sent the last request of a start in nine rounds.
const startRoundGather = 2 * time.Millisecond

// roundAnswer is a round's answer for one key.
type roundAnswer[V any] struct {
	v   V
	err error
}

// perClient runs rounds of one request per client, kept while a round is under way.
type perClient[K comparable, V any] struct {
	run func(ctx context.Context, c kafkareq.Cluster, keys []K) map[K]roundAnswer[V]

	mu sync.Mutex
	m  map[*kgo.Client]*rounds.Rounds[K, map[K]roundAnswer[V]]
}

// ask returns k's answer from a round of c's requests that began after the call.
func (p *perClient[K, V]) ask(ctx context.Context, c kafkareq.Cluster, k K) (V, error) {
	p.mu.Lock()
	rs := p.m[c.Client]
	if rs == nil {
		rs = &rounds.Rounds[K, map[K]roundAnswer[V]]{
			Run: func(keys []K) map[K]roundAnswer[V] {
				ctx, cancel := context.WithTimeout(context.Background(), startRoundTimeout)
				defer cancel()
				return p.run(ctx, c, keys)
			},
			Gather: func() { time.Sleep(startRoundGather) },
		}
		// Forgotten once idle, so a closed client is not kept; a late asker of the old
		// one only starts another round of it.
		rs.Spawn = func(loop func()) {
			go func() {
				loop()
				p.mu.Lock()
				if p.m[c.Client] == rs {
					delete(p.m, c.Client)
				}
				p.mu.Unlock()
			}()
		}
		if p.m == nil {
			p.m = map[*kgo.Client]*rounds.Rounds[K, map[K]roundAnswer[V]]{}
		}
		p.m[c.Client] = rs
	}
	p.mu.Unlock()
	got, err := rs.Ask(ctx, k)
	if err != nil {
		var zero V
		return zero, err
	}
	a, ok := got[k]
	if !ok {
		return a.v, fmt.Errorf("%w: %s request round left %v unanswered", mirrorerr.ErrInvariant, c.Name, k)
	}
	return a.v, a.err
}

// whole is a round of a request about the whole cluster: one answer for every asker.
func whole[V any](fn func(kafkareq.Cluster, context.Context) (V, error)) func(context.Context, kafkareq.Cluster, []struct{}) map[struct{}]roundAnswer[V] {
	return func(ctx context.Context, c kafkareq.Cluster, _ []struct{}) map[struct{}]roundAnswer[V] {
		v, err := fn(c, ctx)
		return map[struct{}]roundAnswer[V]{{}: {v, err}}
	}
}

// each is a round of a request per key (a topic, a broker): the partitions that start
// together share a few keys.
func each[K comparable, V any](fn func(kafkareq.Cluster, context.Context, K) (V, error)) func(context.Context, kafkareq.Cluster, []K) map[K]roundAnswer[V] {
	return func(ctx context.Context, c kafkareq.Cluster, keys []K) map[K]roundAnswer[V] {
		out := make(map[K]roundAnswer[V], len(keys))
		for _, k := range keys {
			v, err := fn(c, ctx, k)
			out[k] = roundAnswer[V]{v, err}
		}
		return out
	}
}

var (
	topicMetadata  = perClient[string, kafkareq.Topic]{run: each(kafkareq.Cluster.TopicMetadata)}
	topicConfigs   = perClient[string, kafkareq.DestinationTopic]{run: each(kafkareq.Cluster.TopicConfig)}
	maxTxnTimeouts = perClient[int32, time.Duration]{run: each(kafkareq.Cluster.MaxTransactionTimeout)}
	epochBumps     = perClient[struct{}, bool]{run: whole(kafkareq.Cluster.BumpsEpochPerTxn)}
	clusterIDs     = perClient[struct{}, string]{run: whole(func(c kafkareq.Cluster, ctx context.Context) (string, error) {
		return kafkareq.ClusterID(ctx, c.Client)
	})}
	// logOffsets: log start and end of every partition of the round, in one request per
	// leader and offset kind.
	logOffsets = perClient[kafkareq.TopicPartition, [2]int64]{run: func(ctx context.Context, c kafkareq.Cluster, tps []kafkareq.TopicPartition) map[kafkareq.TopicPartition]roundAnswer[[2]int64] {
		out := map[kafkareq.TopicPartition]roundAnswer[[2]int64]{}
		for tp, o := range c.LogOffsets(ctx, tps) {
			err := o.Start.Err
			if err == nil {
				err = o.End.Err
			}
			out[tp] = roundAnswer[[2]int64]{[2]int64{o.Start.Offset, o.End.Offset}, err}
		}
		return out
	}}
	partitionTxns = perClient[string, []kadm.DescribedTransaction]{run: describePartitionTxns}
	producers     = perClient[kafkareq.TopicPartition, kadm.DescribedProducers]{run: describeRoundProducers}
)

// describePartitionTxns lists the cluster's transactions once (ListTransactions asks every
// broker) and describes those of the round's partition prefixes.
func describePartitionTxns(ctx context.Context, c kafkareq.Cluster, prefixes []string) map[string]roundAnswer[[]kadm.DescribedTransaction] {
	out := make(map[string]roundAnswer[[]kadm.DescribedTransaction], len(prefixes))
	listed, err := c.Admin.ListTransactions(ctx, nil, nil)
	if err != nil {
		err = mirrorerr.WrapAuth(c.Name, "list transactions", err)
		for _, p := range prefixes {
			out[p] = roundAnswer[[]kadm.DescribedTransaction]{err: err}
		}
		return out
	}
	asked := map[string]bool{}
	for _, p := range prefixes {
		asked[p] = true
	}
	of := map[string][]string{} // a prefix's transactional ids
	want := map[string]bool{}
	for id := range listed {
		// Prefixes end in a dot; one id can have several that were asked (topic "t.1"
		// partition 2 and topic "t" partition 1): each partition sorts out its own.
		for i, ch := range id {
			if p := id[:i+1]; ch == '.' && asked[p] {
				of[p] = append(of[p], id)
				want[id] = true
			}
		}
	}
	var described kadm.DescribedTransactions
	if len(want) > 0 { // no ids would describe every transaction of the cluster
		described, err = c.Admin.DescribeTransactions(ctx, slices.Collect(maps.Keys(want))...)
	}
	for _, p := range prefixes {
		var a roundAnswer[[]kadm.DescribedTransaction]
		for _, id := range of[p] {
			d, ok := described[id]
			if !ok {
				// A coordinator that did not answer fails only the partitions it serves.
				a = roundAnswer[[]kadm.DescribedTransaction]{err: unanswered(c, "describe transactions", err)}
				break
			}
			a.v = append(a.v, d)
		}
		out[p] = a
	}
	return out
}

// unanswered is why a shared request has no answer for one asker.
func unanswered(c kafkareq.Cluster, what string, err error) error {
	if err == nil {
		return fmt.Errorf("%s %s: no answer", c.Name, what)
	}
	return mirrorerr.WrapAuth(c.Name, what, err)
}

// describeRoundProducers asks each leader once for the producers of the round's partitions.
func describeRoundProducers(ctx context.Context, c kafkareq.Cluster, tps []kafkareq.TopicPartition) map[kafkareq.TopicPartition]roundAnswer[kadm.DescribedProducers] {
	set := kadm.TopicsSet{}
	for _, tp := range tps {
		set.Add(tp.Topic, tp.Partition)
	}
	described, err := c.Admin.DescribeProducers(ctx, set)
	out := make(map[kafkareq.TopicPartition]roundAnswer[kadm.DescribedProducers], len(tps))
	for _, tp := range tps {
		// A leader that did not answer fails only the partitions it leads; a partition it
		// answered with an error (a leader that moved) has no producer state to go by.
		if p, ok := described[tp.Topic].Partitions[tp.Partition]; ok && p.Err != nil {
			out[tp] = roundAnswer[kadm.DescribedProducers]{err: fmt.Errorf("%s describe producers of %s[%d]: %w", c.Name, tp.Topic, tp.Partition, p.Err)}
		} else if ok {
			out[tp] = roundAnswer[kadm.DescribedProducers]{v: p.ActiveProducers}
		} else {
			out[tp] = roundAnswer[kadm.DescribedProducers]{err: unanswered(c, "describe producers", err)}
		}
	}
	return out
}
