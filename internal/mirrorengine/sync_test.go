package mirrorengine

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/topicconfig"
)

// syncedMirror starts a mirror of topic with every sync on a short interval.
func syncedMirror(t *testing.T, src, dst *kafkatest.Cluster, topic string, partitions int, excludes []string) *Engine {
	t.Helper()
	e := openEngine(t, dst)
	_, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "m", Source: mirrorstate.SourceConnection{
		BootstrapServers: src.Addrs(), SASL: &mirrorstate.SASLSettings{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: "admin-secret"},
	}, Sync: mirrorstate.SyncSettings{
		Interval: 50 * time.Millisecond, TopicConfigs: true, TopicConfigExcludes: excludes,
		ConsumerGroups: true, GroupExcludes: []string{"private-.*"}, ACLs: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", topic, "")
	waitState(t, e, "m", topic, partitions, partitionstate.StateMirroring)
	return e
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}

func topicOverrides(t *testing.T, c *kafkatest.Cluster, topic string) map[string]string {
	t.Helper()
	rcs, err := c.Admin(t).DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	got, err := topicconfig.Overrides(rcs, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range got {
		out[k] = *v
	}
	return out
}

func TestSyncTopicConfigs(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"))
	src.CreateTopic(t, "cfg", 1, map[string]*string{
		"retention.ms":        kadm.StringPtr("86400000"),
		"min.insync.replicas": kadm.StringPtr("2"), // the KIP's exclude list
		"segment.bytes":       kadm.StringPtr("1048576"),
	})
	syncedMirror(t, src, dst, "cfg", 1, []string{"segment.bytes"})

	set := func(key, value string) {
		op := kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: kadm.StringPtr(value)}
		if value == "" {
			op = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: key}
		}
		if _, err := src.Admin(t).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{op}, "cfg"); err != nil {
			t.Fatal(err)
		}
	}
	set("cleanup.policy", "compact,delete")
	eventually(t, "source overrides on the destination", func() error {
		got := topicOverrides(t, dst, "cfg")
		if got["retention.ms"] != "86400000" || got["cleanup.policy"] != "compact,delete" {
			return fmt.Errorf("destination overrides %v", got)
		}
		// Never copied by the sync; set at creation from the source's 2, capped by the
		// destination's single replica.
		if got["min.insync.replicas"] != "1" {
			return fmt.Errorf("min.insync.replicas is not the creation rule's 1: %v", got)
		}
		if got["message.timestamp.type"] != "CreateTime" || got["message.timestamp.after.max.ms"] != "9223372036854775807" {
			return fmt.Errorf("the managed timestamp configs are missing: %v", got)
		}
		if _, ok := got["segment.bytes"]; ok {
			return fmt.Errorf("user-excluded segment.bytes copied: %v", got)
		}
		return nil
	})
	set("retention.ms", "")
	eventually(t, "a removed source override is removed", func() error {
		if v, ok := topicOverrides(t, dst, "cfg")["retention.ms"]; ok {
			return fmt.Errorf("retention.ms still %s", v)
		}
		return nil
	})
}

// A consumer group reads half a topic on the source; after failover it continues on the
// destination at exactly the next record.
func TestSyncGroupOffsetsFailover(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"))
	src.CreateTopic(t, "events", 2, nil)
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.ProduceSync(t, src.ManualProducer(t), recs...)
	e := syncedMirror(t, src, dst, "events", 2, nil)
	kafkatest.WaitIdentical(t, src, dst, "events", kafkatest.IdenticalWithin)

	seen := map[string]bool{}
	consume := func(c *kafkatest.Cluster, n int) {
		cl := c.Client(t, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("events"), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(400), kgo.FetchMaxBytes(400))
		got := 0
		for got < n {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			fs := cl.PollRecords(ctx, n-got)
			cancel()
			if err := fs.Err0(); err != nil {
				t.Fatalf("consuming: %v", err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				key := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
				if seen[key] {
					t.Fatalf("record %s delivered twice", key)
				}
				seen[key] = true
				got++
			})
		}
		if err := cl.CommitUncommittedOffsets(context.Background()); err != nil {
			t.Fatal(err)
		}
		cl.Close() // leave the group so it has no members
	}
	consume(src, 100)

	// The committed offsets reach the destination unchanged.
	srcCommitted, err := src.Admin(t).FetchOffsets(context.Background(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "group offsets on the destination", func() error {
		dstCommitted, err := dst.Admin(t).FetchOffsets(context.Background(), "billing")
		if err != nil {
			return err
		}
		var diff error
		srcCommitted.Each(func(o kadm.OffsetResponse) {
			if d, ok := dstCommitted.Lookup(o.Topic, o.Partition); !ok || d.At != o.At || d.LeaderEpoch != -1 {
				diff = fmt.Errorf("%s[%d]: source %d, destination %+v", o.Topic, o.Partition, o.At, d.Offset)
			}
		})
		return diff
	})

	topicCmd(t, e.StopMirrorTopics, "m", "events")
	waitState(t, e, "m", "events", 2, partitionstate.StateStopped)
	consume(dst, 100)
	if len(seen) != 200 {
		t.Fatalf("%d distinct records consumed across the failover, want 200", len(seen))
	}
}

func TestSyncSkipsActiveDestinationGroup(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"))
	src.CreateTopic(t, "events", 1, nil)
	dst.CreateTopic(t, "side", 1, nil)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("events", 0, 20, "e")...)
	// The group is busy on the destination (consuming another topic there).
	member := dst.Client(t, kgo.ConsumerGroup("busy"), kgo.ConsumeTopics("side"))
	eventually(t, "destination group has a member", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		member.PollFetches(ctx) // joins the group
		cancel()
		d, err := dst.Admin(t).DescribeGroups(context.Background(), "busy")
		if err != nil || len(d["busy"].Members) == 0 {
			return fmt.Errorf("members: %v %v", d, err)
		}
		return nil
	})
	if _, err := src.Admin(t).CommitOffsets(context.Background(), "busy", kadm.Offsets{"events": {0: {Topic: "events", At: 10, LeaderEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	e := syncedMirror(t, src, dst, "events", 1, nil)
	eventually(t, "the active group is skipped", func() error {
		st, err := e.SyncStatus("m")
		if err != nil || st.SkippedActiveGroups == 0 {
			return fmt.Errorf("sync status %+v %v", st, err)
		}
		return nil
	})
	got, err := dst.Admin(t).FetchOffsets(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("events", 0); ok && o.At >= 0 {
		t.Fatalf("an active destination group's offsets were overwritten: %+v", o)
	}
}

func TestSyncACLs(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"))
	src.CreateTopic(t, "shared", 1, nil)
	grant := func(c *kafkatest.Cluster, principal string) {
		b := kadm.NewACLs().Allow(principal).AllowHosts("*").Topics("shared").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)
		c.CreateACLs(t, b)
	}
	grant(src, "User:reader")
	syncedMirror(t, src, dst, "shared", 1, nil)
	grant(dst, "User:destination-only")

	has := func(principal string) error {
		res, err := dst.Admin(t).DescribeACLs(context.Background(), kadm.NewACLs().Allow(principal).AllowHosts().Topics("shared").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
		if err != nil {
			return err
		}
		if len(res) == 0 || len(res[0].Described) == 0 {
			return fmt.Errorf("no ACL for %s on the destination", principal)
		}
		return nil
	}
	eventually(t, "source ACL on the destination", func() error { return has("User:reader") })
	// Several more cycles run; the destination's own ACL survives them.
	e := time.Now().Add(300 * time.Millisecond)
	eventually(t, "destination-only ACL survives", func() error {
		if err := has("User:destination-only"); err != nil {
			t.Fatal(err)
		}
		if time.Now().Before(e) {
			return fmt.Errorf("waiting for more sync cycles")
		}
		return nil
	})
}

func TestSyncAddsPartitions(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"))
	src.CreateTopic(t, "growing", 1, nil)
	prod := src.ManualProducer(t)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("growing", 0, 30, "a")...)
	e := syncedMirror(t, src, dst, "growing", 1, nil)
	kafkatest.WaitIdentical(t, src, dst, "growing", kafkatest.IdenticalWithin)

	if _, err := src.Admin(t).UpdatePartitions(context.Background(), 3, "growing"); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("growing", 2, 40, "new")...) // a client that sees 3 partitions
	waitState(t, e, "m", "growing", 3, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "growing", kafkatest.IdenticalWithin)
}
