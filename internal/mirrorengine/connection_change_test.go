package mirrorengine

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// waitFlowing produces more records on the source and waits until the destination holds
// them, and no partition is stalled: the mirror's running partitions use the current
// connection.
func waitFlowing(t *testing.T, e *Engine, src, dst *kafkatest.Cluster, topic, tag string) {
	t.Helper()
	prod := manualProducer(t, src)
	for p := range int32(2) {
		produceSync(t, prod, records(topic, p, 40, tag)...)
	}
	kafkatest.WaitIdentical(t, src, dst, topic, waitIdentical)
	d := waitState(t, e, "m", topic, 2, partitionstate.StateMirroring)
	for _, p := range d.Partitions {
		if p.Error != "" || p.Lag != 0 {
			t.Errorf("partition %d after the change: lag %d, error %q", p.Partition, p.Lag, p.Error)
		}
	}
	if s := e.StalledPartitions(); len(s) > 0 {
		t.Errorf("stalled partitions: %+v", s)
	}
}

// A rotated source password reaches the running partitions: records produced after the
// rotation arrive (the mirror's old client is closed by the update, so a partition that
// kept it would retry "client closed" forever while reporting MIRRORING).
func TestEngineSourcePasswordRotation(t *testing.T) {
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("mirror", "password-1"))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"))
	ctx := context.Background()
	src.CreateTopic(t, "orders", 2, nil)
	createACLs(t, src, kadm.NewACLs().Allow("User:mirror").Topics("orders").Operations(kadm.OpRead, kadm.OpDescribe, kadm.OpDescribeConfigs))

	e := openEngine(t, dst)
	conn := func(password string) mirrorstate.SourceConnection {
		c := sourceOf(src)
		c.SASL = &mirrorstate.SASLSettings{Mechanism: "SCRAM-SHA-256", Username: "mirror", Password: password}
		return c
	}
	if _, err := e.CreateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "m", Source: conn("password-1")}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", "orders", "fail")
	waitFlowing(t, e, src, dst, "orders", "before")

	altered, err := src.Admin(t).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: "mirror", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "password-2",
	}})
	if err == nil {
		err = altered.Error()
	}
	if err != nil {
		t.Fatalf("rotating the password on the source: %v", err)
	}
	if _, err := e.UpdateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "m", Source: conn("password-2")}); err != nil {
		t.Fatalf("updating the mirror with the new password: %v", err)
	}
	waitFlowing(t, e, src, dst, "orders", "after")
}

// New bootstrap servers reach the running partitions: once the mirror is patched off the
// old address, that address goes dark and records still arrive.
func TestEngineSourceBootstrapChange(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	ctx := context.Background()
	src.CreateTopic(t, "orders", 2, nil)
	old := kafkatest.NewProxy(t, src)

	e := openEngine(t, dst)
	if _, err := e.CreateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "m", Source: mirrorstate.SourceConnection{BootstrapServers: old.Addrs()}}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", "orders", "fail")
	waitFlowing(t, e, src, dst, "orders", "before")

	if _, err := e.UpdateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "m", Source: sourceOf(src)}); err != nil {
		t.Fatalf("updating the bootstrap servers: %v", err)
	}
	old.Blackhole()
	waitFlowing(t, e, src, dst, "orders", "after")
}
