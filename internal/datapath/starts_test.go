package datapath

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// The partitions of a topic start their sessions together: the requests that answer for the
// whole cluster or for many partitions (ListTransactions to every broker, DescribeProducers
// per leader, the source cluster id) are asked a few times for all of them, not once each.
func TestSessionStartsShareClusterWideRequests(t *testing.T) {
	const partitions = 50
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.Brokers(3))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"), kafkatest.Brokers(3))
	src.CreateTopic(t, "starts", partitions, nil)
	dst.CreateTopic(t, "starts", partitions, nil)
	prod := src.Client(t)
	for p := range int32(partitions) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("starts", p, 3, "r")...)
	}
	cfg := PartitionConfig{Mirror: "m1", Topic: "starts", FirstStart: true, SourceClusterID: "source-cluster"}
	run := startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t), cfg, partitions)
	kafkatest.WaitIdentical(t, src, dst, "starts", kafkatest.IdenticalWithin)
	run.stop(t)

	// The restart finds every partition's data producer: each session lists and describes
	// the destination's transactions and producers. (DescribeTransactions is left out: the
	// strict mode of kafkatest sends one of its own for every InitProducerId.)
	type counted struct {
		c       *kafkatest.Cluster
		key     kmsg.Key
		perEach int64 // requests a session start made on its own
	}
	const brokers = 3
	counts := []counted{
		{dst, kmsg.ListTransactions, brokers},
		{dst, kmsg.DescribeProducers, 2},
		{dst, kmsg.DescribeConfigs, 2}, // the topic's and its leader's
		{dst, kmsg.ListOffsets, 2},
		{src, kmsg.ListOffsets, 2},
		{src, kmsg.DescribeCluster, 1},
	}
	seen := make([]*atomic.Int64, len(counts))
	for i, c := range counts {
		seen[i] = countRequests(c.c, c.key, nil)
	}
	cfg.FirstStart = false
	run = startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t), cfg, partitions)
	deadline := time.Now().Add(30 * time.Second)
	for run.sessions.Load() < partitions {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sessions started", run.sessions.Load(), partitions)
		}
		time.Sleep(10 * time.Millisecond)
	}
	run.stop(t)
	// Rounds overlap staggered starts, so how many there are depends on timing; half of
	// what the sessions asked on their own is far more than they take.
	for i, c := range counts {
		alone := c.perEach * partitions
		t.Logf("%s: %d requests, %d alone", c.key.Name(), seen[i].Load(), alone)
		if seen[i].Load() > alone/2 {
			t.Errorf("%d partitions starting sent %d %s requests; want rounds for many, not %d", partitions, seen[i].Load(), c.key.Name(), alone)
		}
	}
}

// A partition the destination answers DescribeProducers for with an error kgo does not retry
// has no producer state to go by: the session does not start (the runner retries the
// partition), and the next start goes on exactly.
func TestSessionStartFailsOnAProducersError(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "refused", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("refused", 0, 10, "a")...)
	mirrorIdentical(t, src, dst, "refused", 1, true)

	var refused atomic.Bool
	dst.Fake().ControlKey(int16(kmsg.DescribeProducers), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if !refused.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		req := kreq.(*kmsg.DescribeProducersRequest)
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, kerr.UnknownServerError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	kafkatest.ProduceSync(t, prod, kafkatest.Records("refused", 0, 10, "b")...)
	run := startMirror(t, src, dst, "refused", 1, false)
	ended := make(chan struct{})
	go func() { run.wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		run.cancel()
		<-ended
		t.Fatal("the mirror went on for 30 s without the destination's producer state")
	}
	if err := run.errs[0]; !errors.Is(err, kerr.UnknownServerError) {
		t.Fatalf("the mirror ended with %v, want the UNKNOWN_SERVER_ERROR DescribeProducers answered", err)
	}
	mirrorIdentical(t, src, dst, "refused", 1, false)
}
