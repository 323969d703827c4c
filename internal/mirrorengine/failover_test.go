package mirrorengine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// groupMirror mirrors topic "orders" (2 partitions, n numbered records) with group offset
// sync on but a period far too long to help: only the stop's own final sync can carry a
// commit made just before it.
func groupMirror(t *testing.T, n int) (src, dst *kafkatest.Cluster, e *Engine) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	src.CreateTopic(t, "orders", 2, nil)
	produceNumbered(t, src, "orders", 0, n)
	e = openEngine(t, dst)
	if _, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "m", Source: sourceOf(src),
		Sync: mirrorstate.SyncSettings{Interval: 24 * time.Hour, ConsumerGroups: true}}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", "orders", "fail")
	waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring)
	return src, dst, e
}

// continuesExactly checks that group, moved to dst, reads exactly the records it had not
// read on src: none skipped, none repeated.
func continuesExactly(t *testing.T, src, dst *kafkatest.Cluster, group, topic string, read []string, total int) {
	t.Helper()
	rest := kafkatest.Values(dst.ConsumeAndCommit(t, group, topic, total-len(read)))
	seen := map[string]bool{}
	for _, v := range append(read, rest...) {
		if seen[v] {
			t.Fatalf("%s read twice across the move", v)
		}
		seen[v] = true
	}
	if len(seen) != total {
		t.Fatalf("%d distinct records across the move, want %d", len(seen), total)
	}
}

func produceNumbered(t *testing.T, c *kafkatest.Cluster, topic string, from, n int) {
	t.Helper()
	prod := c.ManualProducer(t)
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(fmt.Sprintf("record-%04d", i))})
	}
	kafkatest.ProduceSync(t, prod, recs...)
}

func TestEngineFailoverSyncsGroupOffsetsAfterTheLastRecord(t *testing.T) {
	src, dst, e := groupMirror(t, 100)
	read := kafkatest.Values(src.ConsumeAndCommit(t, "billing", "orders", 37)) // mid-stream, after the sync's first cycle
	produceNumbered(t, src, "orders", 100, 20)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)

	res, err := e.StopMirrorTopics(context.Background(), "m", []string{"orders"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("failover: %v %v", err, res[0].Err)
	}
	if res[0].FinalSync != FinalSyncDone {
		t.Fatalf("final sync %q, want %q", res[0].FinalSync, FinalSyncDone)
	}
	waitState(t, e, "m", "orders", 2, partitionstate.StateStopped)
	srcOffsets, err := src.Admin(t).FetchOffsets(context.Background(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	dstOffsets, err := dst.Admin(t).FetchOffsets(context.Background(), "billing")
	if err != nil {
		t.Fatal(err)
	}
	srcOffsets.Each(func(o kadm.OffsetResponse) {
		if d, ok := dstOffsets.Lookup(o.Topic, o.Partition); !ok || d.At != o.At {
			t.Errorf("%s[%d]: source committed %d, destination %d", o.Topic, o.Partition, o.At, d.At)
		}
	})
	continuesExactly(t, src, dst, "billing", "orders", read, 120)
}

func TestEnginePromoteWaitsForLagZeroThenStops(t *testing.T) {
	src, dst, e := groupMirror(t, 60)
	read := kafkatest.Values(src.ConsumeAndCommit(t, "billing", "orders", 25))
	produceNumbered(t, src, "orders", 60, 40) // still being copied when the promote starts

	res, err := e.PromoteMirrorTopics(context.Background(), "m", []string{"orders"}, time.Minute)
	if err != nil || res[0].Err != nil {
		t.Fatalf("promote: %v %v", err, res[0].Err)
	}
	if res[0].FinalSync != FinalSyncDone {
		t.Fatalf("final sync %q", res[0].FinalSync)
	}
	waitState(t, e, "m", "orders", 2, partitionstate.StateStopped)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)
	continuesExactly(t, src, dst, "billing", "orders", read, 100)
}

// A promote that cannot finish stops nothing and says why, per partition.
func TestEnginePromoteRefusals(t *testing.T) {
	src, _, e := groupMirror(t, 10)
	topicCmd(t, e.PauseMirrorTopics, "m", "orders")
	waitState(t, e, "m", "orders", 2, partitionstate.StatePaused)
	produceNumbered(t, src, "orders", 10, 10)

	res, err := e.PromoteMirrorTopics(context.Background(), "m", []string{"orders"}, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Message, "partition 0 is PAUSED") || !strings.Contains(res[0].Err.Message, "nothing was stopped") {
		t.Fatalf("promote of a paused topic: %v, want a refusal naming the paused partitions", res[0].Err)
	}
	topicCmd(t, e.ResumeMirrorTopics, "m", "orders")
	waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring)
	if d := waitState(t, e, "m", "orders", 2, partitionstate.StateMirroring); d.Desired != partitionstate.DesiredMirroring {
		t.Fatalf("desired %s after a refused promote", d.Desired)
	}

	// The source goes away: a promote refuses, a failover still stops.
	src.Close()
	res, err = e.PromoteMirrorTopics(context.Background(), "m", []string{"orders"}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[0].Err.Code != kip.CodeSourceClusterUnreachable {
		t.Fatalf("promote without a source: %v, want SOURCE_CLUSTER_UNREACHABLE", res[0].Err)
	}
	res, err = e.StopMirrorTopics(context.Background(), "m", []string{"orders"})
	if err != nil || res[0].Err != nil {
		t.Fatalf("failover without a source: %v %v", err, res[0].Err)
	}
	if !strings.HasPrefix(res[0].FinalSync, "not synced: ") {
		t.Fatalf("final sync without a source: %q, want the reason it did not happen", res[0].FinalSync)
	}
	waitState(t, e, "m", "orders", 2, partitionstate.StateStopped)
}
