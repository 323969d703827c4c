package main

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// A mirror's destination_topics settings go through the API (checked, stored, described,
// changed) and decide how the worker creates destination topics, on 3-broker clusters.
func TestWorkerDestinationTopicSettings(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.Brokers(3))
	src.CreateTopic(t, "orders", 2, nil) // replication factor 1 on the source
	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)
	source := api.SourceConnection{BootstrapServers: src.Addrs()}

	for _, bad := range []api.DestinationTopics{
		{ReplicationFactor: -1}, {ReplicationFactor: 40000}, {MinInsyncReplicas: -2}, {ReplicationFactor: 2, MinInsyncReplicas: 3},
	} {
		_, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "bad", Source: source, DestinationTopics: &bad})
		if !api.IsCode(err, api.CodeInvalidClusterMirrorConfig) {
			t.Errorf("destination_topics %+v: %v, want %s", bad, err, api.CodeInvalidClusterMirrorConfig)
		}
	}

	m, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m", Source: source,
		DestinationTopics: &api.DestinationTopics{ReplicationFactor: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if m.DestinationTopics != (api.DestinationTopics{ReplicationFactor: 2}) {
		t.Fatalf("created mirror describes destination_topics %+v", m.DestinationTopics)
	}
	// A PATCH without destination_topics keeps them; one with them replaces both.
	if m, err = c.UpdateMirror(ctx, "m", api.UpdateMirrorRequest{Sync: &api.SyncSettings{Interval: "30s"}}); err != nil || m.DestinationTopics.ReplicationFactor != 2 {
		t.Fatalf("after a sync change: %+v, %v", m, err)
	}
	want := api.DestinationTopics{ReplicationFactor: 3, MinInsyncReplicas: 2}
	if m, err = c.UpdateMirror(ctx, "m", api.UpdateMirrorRequest{DestinationTopics: &want}); err != nil || m.DestinationTopics != want {
		t.Fatalf("after the change: %+v, %v", m, err)
	}
	if m, err = c.GetMirror(ctx, "m"); err != nil || m.DestinationTopics != want {
		t.Fatalf("described: %+v, %v", m, err)
	}

	if res, err := c.StartTopics(ctx, "m", []string{"orders"}, ""); err != nil || res[0].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	waitTopic(t, c, "m", "orders", "MIRRORING", inState(api.StateMirroring))
	adm := dst.Admin(t)
	meta, err := adm.Metadata(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if rf := len(meta.Topics["orders"].Partitions[0].Replicas); rf != 3 {
		t.Errorf("destination topic replication factor %d, want 3 (the mirror's setting; the source has 1)", rf)
	}
	rcs, err := adm.DescribeTopicConfigs(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, cfg := range rc.Configs {
		if cfg.Source == kmsg.ConfigSourceDynamicTopicConfig && cfg.Value != nil {
			got[cfg.Key] = *cfg.Value
		}
	}
	for key, v := range map[string]string{"min.insync.replicas": "2", "message.timestamp.type": "CreateTime"} {
		if got[key] != v {
			t.Errorf("destination topic %s = %q, want %q (configs: %v)", key, got[key], v, got)
		}
	}
}
