package mirrorengine

import (
	"context"
	"testing"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// On 3-broker clusters (kfake keeps replication factors), a mirror's destination topic
// settings decide the created topic's replication factor and min.insync.replicas; without
// them the source topic's replication (here 1, so the broker's min.insync.replicas) is
// followed.
func TestEngineDestinationTopicSettings(t *testing.T) {
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.Brokers(3))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"), kafkatest.Brokers(3))
	ctx := context.Background()
	for _, topic := range []string{"set", "default"} {
		if _, err := src.Admin(t).CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		src.WaitTopic(t, topic, 2)
	}
	e := openEngine(t, dst)
	if _, err := e.CreateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "set", Source: sourceOf(src),
		DestinationTopics: mirrorstate.DestinationTopicSettings{ReplicationFactor: 3, MinInsyncReplicas: 2}}); err != nil {
		t.Fatal(err)
	}
	createMirror(t, e, "default", src)
	for _, topic := range []string{"set", "default"} {
		start(t, e, topic, topic, "fail")
		waitState(t, e, topic, topic, 2, partitionstate.StateMirroring)
	}
	for topic, want := range map[string]struct {
		rf        int
		minInsync string
	}{"set": {3, "2"}, "default": {1, ""}} {
		rf, minInsync := dst.TopicReplication(t, topic)
		if rf != want.rf || minInsync != want.minInsync {
			t.Errorf("destination topic %q: replication factor %d, min.insync.replicas override %q; want %d, %q",
				topic, rf, minInsync, want.rf, want.minInsync)
		}
	}
}
