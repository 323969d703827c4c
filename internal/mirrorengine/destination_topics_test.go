package mirrorengine

import (
	"context"
	"reflect"
	"testing"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// A mirror's destination topic settings are stored in its version-1 record, only when set:
// a record written before them (every v1 fixture) decodes to the defaults, and one written
// without them is byte for byte what older workers wrote.
func TestRecordMirrorDestinationTopics(t *testing.T) {
	m := MirrorRecord{Name: "m", Source: SourceConnection{BootstrapServers: []string{"a:1"}},
		DestinationTopics: DestinationTopicSettings{ReplicationFactor: 3, MinInsyncReplicas: 2}}
	b, err := encodeMirror(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"source":{"bootstrap_servers":["a:1"]},"sync":{"topic_configs":false,"consumer_groups":false,"acls":false},` +
		`"destination_topics":{"replication_factor":3,"min_insync_replicas":2}}`
	if string(b) != want {
		t.Fatalf("encodes as\n%s\nwant\n%s", b, want)
	}
	got, err := decodeMirror("mirror/m", "m", b, nil, openSecrets)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %#v, %v", got, err)
	}
	only := MirrorRecord{Name: "m", DestinationTopics: DestinationTopicSettings{ReplicationFactor: 2}}
	if b, _ := encodeMirror(only, nil); !reflect.DeepEqual(mustDecodeMirror(t, "m", b), only) {
		t.Fatalf("replication factor alone: %s", b)
	}

	if got := mustDecodeMirror(t, "small", []byte(fixtureMirrorMinimalV1)); got.DestinationTopics != (DestinationTopicSettings{}) {
		t.Fatalf("a record from before the settings decodes with %+v", got.DestinationTopics)
	}
	b, err = encodeMirror(MirrorRecord{Name: "small", Source: SourceConnection{BootstrapServers: []string{"a:9092"}}}, nil)
	if err != nil || string(b) != fixtureMirrorMinimalV1 {
		t.Fatalf("a mirror without settings encodes as %s (%v), want the v1 fixture %s", b, err, fixtureMirrorMinimalV1)
	}
}

func mustDecodeMirror(t *testing.T, name string, b []byte) MirrorRecord {
	t.Helper()
	got, err := decodeMirror("mirror/"+name, name, b, nil, openSecrets)
	if err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return got
}

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
	if _, err := e.CreateClusterMirror(ctx, MirrorRecord{Name: "set", Source: sourceOf(src),
		DestinationTopics: DestinationTopicSettings{ReplicationFactor: 3, MinInsyncReplicas: 2}}); err != nil {
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
