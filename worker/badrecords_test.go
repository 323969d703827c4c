package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

// Garbage under a partition key and under a mirror key of __mirror_state, written while the
// worker was down: it starts, reports both keys (API, metrics, log), keeps every other
// mirror mirroring and under command, keeps what each record describes waiting, and the
// state commands restore it: the partition continues from its destination, the mirror's
// topic resumes once the mirror is created again.
func TestWorkerBadStateRecords(t *testing.T) {
	t.Parallel()
	topics := map[string]struct {
		mirror     string
		partitions int32
	}{"orders": {"a", 3}, "payments": {"b", 2}, "audit": {"c", 1}}
	var filled []sourceTopic
	for topic, tm := range topics {
		filled = append(filled, sourceTopic{topic, tm.partitions, 120})
	}
	src, dst, prod := filledPair(t, filled...)

	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)
	for topic, tm := range topics {
		mirrorTopics(ctx, t, c, tm.mirror, src.Addrs(), topic)
	}
	for topic, tm := range topics {
		waitTopic(t, c, tm.mirror, topic, "MIRRORING with lag 0", caughtUp(api.StateMirroring))
	}
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	state := dst.Client(t)
	if err := state.ProduceSync(ctx,
		&kgo.Record{Topic: "__mirror_state", Key: []byte("partition/a/orders/1"), Value: []byte("garbage{")},
		&kgo.Record{Topic: "__mirror_state", Key: []byte("mirror/c"), Value: []byte(`{"v":1,"source":`)},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for topic := range topics {
		kafkatest.ProduceKeyed(t, prod, topic, 120, 60)
	}

	w = startWorker(t, workerEnv(dst))
	c = w.Client
	bad, err := c.BadStateRecords(ctx)
	if err != nil || len(bad) != 2 || bad[0].Key != "mirror/c" || bad[1].Key != "partition/a/orders/1" ||
		bad[1].Kind != "partition" || bad[1].Mirror != "a" || bad[1].Topic != "orders" || bad[1].Partition != 1 || bad[1].Offset <= 0 {
		t.Fatalf("bad records %+v, %v", bad, err)
	}
	for _, b := range bad {
		if !strings.Contains(b.Problem, b.Key) || !strings.Contains(w.Stderr.String(), b.Key) {
			t.Fatalf("bad record %+v: its problem or the worker's log does not name it", b)
		}
	}
	s := scrape(t, w.URL)
	for kind, want := range map[string]float64{"mirror": 1, "partition": 1, "topicconfig": 0} {
		if v, ok := metric(s, "kafkamirror_state_bad_records", "kind", kind); !ok || v != want {
			t.Errorf("kafkamirror_state_bad_records{kind=%q} = %v (present %v), want %v", kind, v, ok, want)
		}
	}

	// Every other mirror mirrors; the bad partition waits, naming its key.
	waitTopic(t, c, "b", "payments", "mirror b caught up", caughtUp(api.StateMirroring))
	waitTopic(t, c, "a", "orders", "partition 1 FAILED for the operator, the others caught up", func(p api.Partition) bool {
		if p.Partition == 1 {
			return p.State == api.StateFailed && p.RetryAttempt == -1 && strings.Contains(p.Error, "partition/a/orders/1") &&
				strings.Contains(p.Error, "kafkamirror-worker state remove")
		}
		return caughtUp(api.StateMirroring)(p)
	})
	// The mirror with the bad record is listed and described with it; commands on it are refused.
	m, err := c.GetMirror(ctx, "c")
	if err != nil || !strings.Contains(m.Error, "mirror/c") || strings.Join(m.Topics, ",") != "audit" {
		t.Fatalf("mirror c: %+v, %v", m, err)
	}
	if list, err := c.ListMirrors(ctx); err != nil || len(list) != 3 || list[2].Name != "c" || list[2].Error == "" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	waitTopic(t, c, "c", "audit", "mirror c's partitions FAILED naming the key", func(p api.Partition) bool {
		return p.State == api.StateFailed && strings.Contains(p.Error, "mirror/c")
	})
	_, err = c.StopTopics(ctx, "c", []string{"audit"})
	wantAPIError(t, "stop on mirror c", err, 409, api.CodeMirrorStateRecordUnreadable)
	_, err = c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "c", Source: api.SourceConnection{BootstrapServers: src.Addrs()}})
	wantAPIError(t, "create over mirror c", err, 409, api.CodeMirrorStateRecordUnreadable)
	// Stop (failover) of another mirror works.
	if res, err := c.StopTopics(ctx, "b", []string{"payments"}); err != nil || res[0].Err() != nil {
		t.Fatalf("stop b: %+v, %v", res, err)
	}
	waitTopic(t, c, "b", "payments", "mirror b STOPPED", inState(api.StateStopped))

	// The operator's repair, through the CLI.
	out, code := w.cli(t, "state", "bad-records")
	if code != 0 || !strings.Contains(out, "mirror/c") || !strings.Contains(out, "partition/a/orders/1") {
		t.Fatalf("state bad-records (exit %d):\n%s", code, out)
	}
	out, code = w.cli(t, "state", "show", "--key", "partition/a/orders/1")
	var shown api.StateRecord
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.ValueBase64 != "Z2FyYmFnZXs=" || shown.Problem == "" {
		t.Fatalf("state show (exit %d, %v):\n%s", code, err, out)
	}
	if _, code := w.cli(t, "state", "remove", "--key", "partition/a/orders/0"); code != 1 {
		t.Fatalf("removing a readable record without --force: exit %d, want 1", code)
	}
	if out, code := w.cli(t, "state", "remove", "--key", "partition/a/orders/1"); code != 0 {
		t.Fatalf("state remove (exit %d):\n%s", code, out)
	}
	waitTopic(t, c, "a", "orders", "orders caught up after the repair", caughtUp(api.StateMirroring))
	kafkatest.WaitIdentical(t, src, dst, "orders", 60*time.Second)
	if log := w.Stderr.String(); strings.Contains(log, "recreating the diverged destination topic") {
		t.Fatal("the repair recreated a destination topic")
	}

	if out, code := w.cli(t, "state", "remove", "--key", "mirror/c"); code != 0 {
		t.Fatalf("state remove mirror/c (exit %d):\n%s", code, out)
	}
	if _, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "c", Source: api.SourceConnection{BootstrapServers: src.Addrs()}}); err != nil {
		t.Fatal(err)
	}
	waitTopic(t, c, "c", "audit", "audit caught up once mirror c is back", caughtUp(api.StateMirroring))
	kafkatest.WaitIdentical(t, src, dst, "audit", 60*time.Second)
	if bad, err := c.BadStateRecords(context.Background()); err != nil || len(bad) != 0 {
		t.Fatalf("bad records after the repair: %+v, %v", bad, err)
	}
	if v, _ := metric(scrape(t, w.URL), "kafkamirror_state_bad_records", "kind", "partition"); v != 0 {
		t.Fatalf("kafkamirror_state_bad_records{kind=partition} = %v after the repair", v)
	}
}

// Garbage under a topic's topicconfig key: the worker starts, reports the key, refuses
// commands on that topic naming the repair, and every other mirror mirrors and obeys; once
// the record is removed, starting the topic again continues it from its destination. A
// readable partition record removed by force makes the partition prepare again, and it
// continues from its destination too.
func TestWorkerBadTopicConfigRecordAndForcedRemoval(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"orders", 1, 80}, sourceTopic{"payments", 2, 80})
	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)
	for mirror, topic := range map[string]string{"a": "orders", "b": "payments"} {
		mirrorTopics(ctx, t, c, mirror, src.Addrs(), topic)
		waitTopic(t, c, mirror, topic, topic+" caught up", caughtUp(api.StateMirroring))
	}
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if err := dst.Client(t).ProduceSync(ctx, &kgo.Record{Topic: "__mirror_state", Key: []byte("topicconfig/orders"), Value: []byte(`{"v":1,"mirror.name":`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceKeyed(t, prod, "orders", 80, 40)
	kafkatest.ProduceKeyed(t, prod, "payments", 80, 40)

	w = startWorker(t, workerEnv(dst))
	c = w.Client
	bad, err := c.BadStateRecords(ctx)
	if err != nil || len(bad) != 1 || bad[0].Key != "topicconfig/orders" || bad[0].Kind != "topicconfig" || bad[0].Topic != "orders" ||
		!strings.Contains(bad[0].Problem, "topicconfig/orders") || !strings.Contains(w.Stderr.String(), "topicconfig/orders") {
		t.Fatalf("bad records %+v, %v", bad, err)
	}
	if v, ok := metric(scrape(t, w.URL), "kafkamirror_state_bad_records", "kind", "topicconfig"); !ok || v != 1 {
		t.Errorf("kafkamirror_state_bad_records{kind=topicconfig} = %v (present %v), want 1", v, ok)
	}
	_, err = c.GetTopic(ctx, "a", "orders")
	wantAPIError(t, "describe orders", err, 409, api.CodeMirrorStateRecordUnreadable)
	if !strings.Contains(err.Error(), "kafkamirror-worker state remove topicconfig/orders") {
		t.Errorf("describe orders: %v does not name the repair", err)
	}
	if res, err := c.PauseTopics(ctx, "a", []string{"orders"}); err != nil || res[0].ErrorCode != api.CodeMirrorStateRecordUnreadable {
		t.Fatalf("pause orders: %+v, %v", res, err)
	}
	// The other mirror mirrors and obeys.
	waitTopic(t, c, "b", "payments", "payments caught up", caughtUp(api.StateMirroring))
	for _, cmd := range []struct {
		action, state string
	}{{api.ActionPause, api.StatePaused}, {api.ActionResume, api.StateMirroring}} {
		if res, err := c.TopicCommand(ctx, "b", cmd.action, api.TopicsRequest{Topics: []string{"payments"}}); err != nil || res[0].Err() != nil {
			t.Fatalf("%s payments: %+v, %v", cmd.action, res, err)
		}
		waitTopic(t, c, "b", "payments", "payments "+cmd.state, inState(cmd.state))
	}

	// The repair: remove the record, start the topic again.
	if out, code := w.cli(t, "state", "remove", "--key", "topicconfig/orders"); code != 0 {
		t.Fatalf("state remove (exit %d):\n%s", code, out)
	}
	if res, err := c.StartTopics(ctx, "a", []string{"orders"}, ""); err != nil || res[0].Err() != nil {
		t.Fatalf("start orders after the repair: %+v, %v", res, err)
	}
	waitTopic(t, c, "a", "orders", "orders caught up after the repair", caughtUp(api.StateMirroring))
	kafkatest.WaitIdentical(t, src, dst, "orders", 60*time.Second)
	if bad, err := c.BadStateRecords(ctx); err != nil || len(bad) != 0 {
		t.Fatalf("bad records after the repair: %+v, %v", bad, err)
	}

	// Forced removal of a readable partition record.
	if out, code := w.cli(t, "state", "remove", "--key", "partition/b/payments/1", "--force"); code != 0 {
		t.Fatalf("state remove --force (exit %d):\n%s", code, out)
	}
	kafkatest.ProduceKeyed(t, prod, "payments", 120, 40)
	waitTopic(t, c, "b", "payments", "payments caught up after the forced removal", func(p api.Partition) bool {
		return caughtUp(api.StateMirroring)(p) && p.Error == ""
	})
	kafkatest.WaitIdentical(t, src, dst, "payments", 60*time.Second)
	if log := w.Stderr.String(); !strings.Contains(log, "partition/b/payments/1") || strings.Contains(log, "recreating the diverged destination topic") {
		t.Fatalf("the log does not name the removed record, or a destination topic was recreated:\n%s", workertest.Tail(log, 3000))
	}
}
