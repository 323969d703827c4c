package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// A consumer group commits on the source mid-stream; the topic is promoted (or, separately,
// failed over) through the API; a consumer of the group on the destination continues at
// exactly the next record of every partition, checked record by record. On kfake and on
// Apache Kafka (3 brokers on each side, where replication matters).
func TestWorkerStopModesMoveConsumerGroups(t *testing.T) {
	type clusters struct {
		name string
		pair func(t *testing.T) (src, dst *kafkatest.Cluster)
	}
	cases := []clusters{{"kfake", func(t *testing.T) (*kafkatest.Cluster, *kafkatest.Cluster) { return kafkatest.Pair(t) }}}
	if kafkatest.TierEnabled(kafkatest.TierKafka) {
		v := kafkatest.KafkaNewest
		cases = append(cases, clusters{"kafka-" + v + "-3-brokers", func(t *testing.T) (*kafkatest.Cluster, *kafkatest.Cluster) {
			src := kafkatest.New(t, kafkatest.Kafka(v), kafkatest.Brokers(3))
			dst := kafkatest.New(t, kafkatest.Kafka(v), kafkatest.Brokers(3))
			kafkatest.Tally(t, src.Broker()+" (3 brokers) → "+dst.Broker()+" (3 brokers)")
			return src, dst
		}})
	}
	for _, cl := range cases {
		for _, mode := range []string{api.StopPromote, api.StopFailover} {
			t.Run(cl.name+"/"+mode, func(t *testing.T) {
				src, dst := cl.pair(t)
				stopModeMovesGroup(t, src, dst, mode)
			})
		}
	}
}

func stopModeMovesGroup(t *testing.T, src, dst *kafkatest.Cluster, mode string) {
	const topic, group, total = "orders", "billing", 400
	src.CreateTopic(t, topic, 3, nil)
	prod := src.Client(t)
	produceNumbered := func(from, n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(from + i)), Value: []byte(fmt.Sprintf("order-%04d", from+i))}
		}
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceNumbered(0, total/2)
	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)
	// The periodic sync is far too slow to help: only the stop's own sync can.
	if _, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m", Source: api.SourceConnection{BootstrapServers: src.Addrs()},
		Sync: &api.SyncSettings{Interval: "24h", ConsumerGroups: true}}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.StartTopics(ctx, "m", []string{topic}, ""); err != nil || res[0].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	waitTopic(t, c, "m", topic, "MIRRORING with lag 0", caughtUp(api.StateMirroring))

	// The group reads part of what is there and commits, mid-stream.
	read := kafkatest.Values(src.ConsumeAndCommit(t, group, topic, 123))
	produceNumbered(total/2, total/2)
	if mode == api.StopFailover {
		kafkatest.WaitIdentical(t, src, dst, topic, 60*time.Second) // a failover takes what is there
	}
	res, err := c.TopicCommand(ctx, "m", api.ActionStop, api.TopicsRequest{Topics: []string{topic}, Mode: mode})
	if err != nil || res[0].Err() != nil {
		t.Fatalf("%s: %+v, %v", mode, res, err)
	}
	if res[0].FinalSync != "synced" {
		t.Fatalf("%s: final sync %q, want synced", mode, res[0].FinalSync)
	}
	waitTopic(t, c, "m", topic, "STOPPED", inState(api.StateStopped))
	kafkatest.WaitIdentical(t, src, dst, topic, 60*time.Second)

	rest := kafkatest.Values(dst.ConsumeAndCommit(t, group, topic, total-len(read)))
	seen := map[string]bool{}
	for _, v := range append(read, rest...) {
		if seen[v] {
			t.Fatalf("%s read twice across the %s", v, mode)
		}
		seen[v] = true
	}
	if len(seen) != total {
		t.Fatalf("%d distinct records across the %s, want %d", len(seen), mode, total)
	}
}
