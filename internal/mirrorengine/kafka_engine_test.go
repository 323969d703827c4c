package mirrorengine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// The destination topics and __mirror_state the engine creates on a 3-broker Apache Kafka
// destination are fit for disaster recovery: the source's replication (3) with
// min.insync.replicas 2, CreateTime with unbounded timestamp checks (a record two hours
// ahead is copied), and the source's configs minus those Apache Kafka refuses — another
// distribution's, ones removed in 4.0, and an unknown one — each left out, not fatal. The
// source is kfake, which keeps any config, as a Confluent or Redpanda source would.
func TestKafkaEngineCreatesDestinationTopicsForDR(t *testing.T) {
	kafkatest.RequireKafka(t)
	kafkatest.RequireFake(t)
	for _, v := range kafkatest.KafkaVersions() {
		t.Run("to-kafka-"+v, func(t *testing.T) { destinationTopicsForDR(t, v) })
	}
}

func destinationTopicsForDR(t *testing.T, version string) {
	src := kafkatest.New(t, kafkatest.Brokers(3))
	dst := kafkatest.New(t, kafkatest.Kafka(version), kafkatest.Brokers(3))
	kafkatest.Tally(t, "kfake (3 brokers) → "+dst.Broker()+" (3 brokers)")
	ctx := context.Background()
	topic := "dr"
	if _, err := src.Admin(t).CreateTopic(ctx, 3, 3, map[string]*string{
		"retention.ms":                    kadm.StringPtr("604800000"),
		"confluent.placement.constraints": kadm.StringPtr("{}"),
		"message.format.version":          kadm.StringPtr("3.0-IV1"),
		"totally.bogus.config":            kadm.StringPtr("x"),
		"message.timestamp.type":          kadm.StringPtr("LogAppendTime"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	src.WaitTopic(t, topic, 3)
	prod := src.ManualProducer(t)
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 50, "a")...)
	kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("from the future"), Timestamp: time.Now().Add(2 * time.Hour)})

	e := openEngine(t, dst)
	createMirror(t, e, "dr", src)
	start(t, e, "dr", topic, "fail")
	waitState(t, e, "dr", topic, 3, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)

	// Each config left out is reported with its reason.
	d, err := e.DescribeMirrorTopic(ctx, "dr", topic)
	if err != nil {
		t.Fatal(err)
	}
	leftOut := strings.Join(d.ConfigsLeftOut, "; ")
	for _, want := range []string{
		"confluent.placement.constraints (another distribution's config)",
		"message.format.version (removed in Apache Kafka 4.0)",
		"totally.bogus.config (refused by the destination: INVALID_CONFIG",
	} {
		if !strings.Contains(leftOut, want) {
			t.Errorf("configs left out %q: want %q among them", leftOut, want)
		}
	}
	adm := dst.Admin(t)
	for _, name := range []string{topic, mirrorstate.DefaultStoreTopic} {
		meta, err := adm.Metadata(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if rf := len(meta.Topics[name].Partitions[0].Replicas); rf != 3 {
			t.Errorf("%s: replication factor %d, want 3", name, rf)
		}
	}
	want := map[string]map[string]string{
		topic: {
			"min.insync.replicas": "2", "retention.ms": "604800000", "message.timestamp.type": "CreateTime",
			"message.timestamp.before.max.ms": "9223372036854775807", "message.timestamp.after.max.ms": "9223372036854775807",
			"confluent.placement.constraints": "", "message.format.version": "", "totally.bogus.config": "",
		},
		mirrorstate.DefaultStoreTopic: {"min.insync.replicas": "2", "cleanup.policy": "compact"},
	}
	for name, configs := range want {
		rcs, err := adm.DescribeTopicConfigs(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The topic's own settings: a 3.x broker also describes its defaults of configs the
		// worker leaves out (message.format.version "3.0-IV1").
		have := map[string]string{}
		for _, c := range rc.Configs {
			if c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				have[c.Key] = *c.Value
			}
		}
		for key, v := range configs {
			if have[key] != v {
				t.Errorf("%s: %s = %q, want %q", name, key, have[key], v)
			}
		}
	}
}
