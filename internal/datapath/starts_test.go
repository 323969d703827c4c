package datapath

import (
	"context"
	"testing"
	"time"

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
	// the destination's transactions and producers.
	lists := countRequests(dst, kmsg.ListTransactions, nil)
	describes := countRequests(dst, kmsg.DescribeProducers, nil)
	clusterIDs := countRequests(src, kmsg.DescribeCluster, nil)
	started := sessionStarts(dst)
	cfg.FirstStart = false
	run = startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t), cfg, partitions)
	deadline := time.Now().Add(30 * time.Second)
	for started.Load() < partitions {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sessions started", started.Load(), partitions)
		}
		time.Sleep(10 * time.Millisecond)
	}
	run.stop(t)
	const brokers = 3
	t.Logf("%d brokers: ListTransactions %d, DescribeProducers %d, DescribeCluster %d", brokers, lists.Load(), describes.Load(), clusterIDs.Load())
	// Each session asks ListTransactions of every broker, DescribeProducers twice and the
	// cluster id once. Rounds overlap staggered starts, so how many there are depends on
	// timing; half of one request each is far more than they take.
	if lists.Load() > brokers*partitions/2 || describes.Load() > partitions || clusterIDs.Load() > partitions/2 {
		t.Fatalf("%d partitions starting on %d brokers sent %d ListTransactions, %d DescribeProducers, %d DescribeCluster; want rounds for many, not requests for each",
			partitions, brokers, lists.Load(), describes.Load(), clusterIDs.Load())
	}
}
