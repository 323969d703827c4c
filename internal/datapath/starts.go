package datapath

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/rounds"
)

// Session starts ask some requests that answer for many partitions at once; the sessions
// that start together (a started topic's partitions) share one per client and round. A round
// begins after all its askers asked, so each session still sees the cluster as of its start.

// startRoundTimeout bounds one shared request: no asker's context may cut it short for the
// others.
const startRoundTimeout = time.Minute

// perClient runs rounds of one request per client, kept while a round is under way.
type perClient[K comparable, R any] struct {
	run func(ctx context.Context, c kafkareq.Cluster, keys []K) R

	mu sync.Mutex
	m  map[*kgo.Client]*rounds.Rounds[K, R]
}

func (p *perClient[K, R]) ask(ctx context.Context, c kafkareq.Cluster, k K) (R, error) {
	p.mu.Lock()
	rs := p.m[c.Client]
	if rs == nil {
		rs = &rounds.Rounds[K, R]{
			Run: func(keys []K) R {
				ctx, cancel := context.WithTimeout(context.Background(), startRoundTimeout)
				defer cancel()
				return p.run(ctx, c, keys)
			},
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
			p.m = map[*kgo.Client]*rounds.Rounds[K, R]{}
		}
		p.m[c.Client] = rs
	}
	p.mu.Unlock()
	return rs.Ask(ctx, k)
}

type listedTxns struct {
	listed kadm.ListedTransactions
	err    error
}

// transactionLists: ListTransactions asks every broker of the cluster; each session keeps
// its partition's transactional ids.
var transactionLists = perClient[struct{}, listedTxns]{
	run: func(ctx context.Context, c kafkareq.Cluster, _ []struct{}) listedTxns {
		listed, err := c.Admin.ListTransactions(ctx, nil, nil)
		return listedTxns{listed, err}
	},
}

type describedProducers struct {
	described kadm.DescribedProducersTopics
	err       error
}

// producerDescriptions: one DescribeProducers, which kadm splits by partition leader, for
// every partition of the round.
var producerDescriptions = perClient[kafkareq.TopicPartition, describedProducers]{
	run: func(ctx context.Context, c kafkareq.Cluster, tps []kafkareq.TopicPartition) describedProducers {
		set := kadm.TopicsSet{}
		for _, tp := range tps {
			set.Add(tp.Topic, tp.Partition)
		}
		described, err := c.Admin.DescribeProducers(ctx, set)
		return describedProducers{described, err}
	},
}

// describeProducers returns the producers the destination partition knows, read after the
// call.
func (s *session) describeProducers(ctx context.Context) (map[int64]kadm.DescribedProducer, error) {
	tp := kafkareq.TopicPartition{Topic: s.cfg.Topic, Partition: s.cfg.Partition}
	got, err := producerDescriptions.ask(ctx, s.m.dst, tp)
	if err != nil {
		return nil, err
	}
	// A leader that failed to answer fails only the partitions it leads.
	p, ok := got.described[tp.Topic].Partitions[tp.Partition]
	if !ok && got.err != nil {
		return nil, mirrorerr.WrapAuth("destination", "describe producers", got.err)
	}
	producers := map[int64]kadm.DescribedProducer{}
	for _, d := range p.ActiveProducers {
		producers[d.ProducerID] = d
	}
	return producers, nil
}

type clusterID struct {
	id  string
	err error
}

// clusterIDs: the source cluster id, checked by every session start.
var clusterIDs = perClient[struct{}, clusterID]{
	run: func(ctx context.Context, c kafkareq.Cluster, _ []struct{}) clusterID {
		id, err := kafkareq.ClusterID(ctx, c.Client)
		return clusterID{id, err}
	},
}
