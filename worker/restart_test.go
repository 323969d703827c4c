package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// topicIDOf returns the topic's id on the cluster.
func topicIDOf(t *testing.T, c *kafkatest.Cluster, topic string) kadm.TopicID {
	t.Helper()
	details, err := c.Admin(t).ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		t.Fatalf("topic %q: %v", topic, d.Err)
	}
	return d.ID
}

// denyFetches makes the source answer TOPIC_AUTHORIZATION_FAILED to fetches of one
// partition of the topic while denied is set: a permission taken away and given back, as
// an operator's ACL change would do to a whole topic.
func denyFetches(t *testing.T, src *kafkatest.Cluster, topic string, partition int32, denied *atomic.Bool) {
	t.Helper()
	src.AnswerFetches(t, topic, partition, func(kmsg.FetchRequestTopicPartition) *kmsg.FetchResponseTopicPartition {
		if !denied.Load() {
			return nil
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return &rp
	})
}

// A partition FAILED while mirroring (never stopped) and is restarted through the API with
// divergence = "recreate": its destination is a prefix of the source, so it continues and
// the destination topic, written by the healthy partitions all along, is not recreated.
func TestWorkerRestartFailedPartitionKeepsTopic(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"orders", 3, 300})
	var denied atomic.Bool
	denyFetches(t, src, "orders", 1, &denied)

	// Few automatic retries: the denied partition soon waits for the operator (a first
	// start can still meet a transient UNKNOWN_TOPIC_OR_PARTITION of the new topic).
	w := startWorker(t, workerEnv(dst, "KAFKAMIRROR_RETRY_MAX_ATTEMPTS=3"))
	c, ctx := w.Client, ctxT(t)
	mirrorTopics(ctx, t, c, "r", src.Addrs(), "orders")
	waitTopic(t, c, "r", "orders", "MIRRORING with lag 0", caughtUp(api.StateMirroring))
	kafkatest.WaitIdentical(t, src, dst, "orders", 60*time.Second)
	id := topicIDOf(t, dst, "orders")

	denied.Store(true)
	kafkatest.ProduceKeyed(t, prod, "orders", 300, 150)
	waitTopic(t, c, "r", "orders", "partition 1 FAILED for good, the others caught up", func(p api.Partition) bool {
		if p.Partition == 1 {
			return p.State == api.StateFailed && p.RetryAttempt == -1 && strings.Contains(p.Error, "TOPIC_AUTHORIZATION_FAILED")
		}
		return caughtUp(api.StateMirroring)(p)
	})

	denied.Store(false)
	kafkatest.ProduceKeyed(t, prod, "orders", 450, 150)
	if res, err := c.StartTopics(ctx, "r", []string{"orders"}, "recreate"); err != nil || res[0].Err() != nil {
		t.Fatalf("restart: %+v, %v", res, err)
	}
	waitTopic(t, c, "r", "orders", "MIRRORING with lag 0 after the restart", caughtUp(api.StateMirroring))
	kafkatest.WaitIdentical(t, src, dst, "orders", 60*time.Second)
	if topicIDOf(t, dst, "orders") != id {
		t.Fatal("the restart recreated the destination topic, though it was a prefix of the source")
	}
	if log := w.Stderr.String(); strings.Contains(log, "recreating the diverged destination topic") {
		t.Fatal("the worker logged a recreation")
	}
}
