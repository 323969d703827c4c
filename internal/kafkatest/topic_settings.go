package kafkatest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicReplication returns topic's replication factor and its min.insync.replicas override
// ("" when the topic has none), as a created topic's settings are asserted.
func (c *Cluster) TopicReplication(t TB, topic string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.internal)
	meta, err := adm.Metadata(ctx, topic)
	if err != nil || len(meta.Topics[topic].Partitions) == 0 {
		t.Fatalf("kafkatest: metadata of %q on %s: %v", topic, c.id, err)
		return 0, ""
	}
	rf := len(meta.Topics[topic].Partitions[0].Replicas)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("kafkatest: configs of %q on %s: %v", topic, c.id, err)
		return 0, ""
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: configs of %q on %s: %v", topic, c.id, err)
		return 0, ""
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "min.insync.replicas" && cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && cfg.Value != nil {
			return rf, *cfg.Value
		}
	}
	return rf, ""
}
