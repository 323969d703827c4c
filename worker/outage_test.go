package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
)

// describeBound is the worker's answer bound for a describe (3 s per cluster, asked at once)
// with room for a loaded test machine.
const describeBound = 5 * time.Second

// The source, then the destination, stops answering (a blackhole: connections are accepted,
// nothing is forwarded) for ten seconds each: describe and /metrics keep answering within
// their bounds, describe with the last known offsets, their age and the cluster that did not
// answer, and a failover during the source's outage completes; once healed, the worker
// catches up and the logs are identical, nobody acting.
func TestWorkerBlackhole(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"orders", 2, 100}, sourceTopic{"events", 1, 50})
	srcProxy, dstProxy := kafkatest.NewProxy(t, src), kafkatest.NewProxy(t, dst)

	w := startWorker(t, workerEnv(nil, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="+strings.Join(dstProxy.Addrs(), ",")))
	c, ctx := w.Client, ctxT(t)
	mirrorTopics(ctx, t, c, "m", srcProxy.Addrs(), "orders", "events")
	waitTopic(t, c, "m", "orders", "MIRRORING with lag 0", caughtUp(api.StateMirroring))
	waitTopic(t, c, "m", "events", "MIRRORING with lag 0", caughtUp(api.StateMirroring))

	for i, side := range []struct {
		name  string
		proxy *kafkatest.Proxy
	}{{"source", srcProxy}, {"destination", dstProxy}} {
		before := time.Now()
		side.proxy.Blackhole()
		kafkatest.ProduceKeyed(t, prod, "orders", 100+100*i, 100)
		labelled := false
		for time.Since(before) < 10*time.Second || !labelled {
			began := time.Now()
			reqCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			d, err := c.GetTopic(reqCtx, "m", "orders")
			cancel()
			if took := time.Since(began); took > describeBound {
				t.Fatalf("%s blackholed: describe took %v", side.name, took)
			}
			if err != nil {
				t.Fatalf("%s blackholed: describe: %v", side.name, err)
			}
			labelled = true
			for _, p := range d.Partitions {
				at := map[string]time.Time{"source": p.SourceOffsetAt, "destination": p.DestinationOffsetAt}
				labelled = labelled && slices.Equal(p.Unreachable, []string{side.name}) && at[side.name].Before(before) &&
					!at[side.name].IsZero() && p.SourceOffset >= 0 && p.DestinationOffset >= 0
			}
			if !labelled && time.Since(before) > 30*time.Second {
				t.Fatalf("%s blackholed: no labelled description: %+v", side.name, d)
			}
			began = time.Now()
			scrape(t, w.URL)
			if took := time.Since(began); took > 2*describeBound {
				t.Fatalf("%s blackholed: /metrics took %v", side.name, took)
			}
		}
		if side.name == "source" {
			began := time.Now()
			stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := c.StopTopics(stopCtx, "m", []string{"events"})
			cancel()
			if err != nil || res[0].Err() != nil || time.Since(began) > 30*time.Second {
				t.Fatalf("failover while the source does not answer: %+v, %v, after %v", res, err, time.Since(began))
			}
			waitTopic(t, c, "m", "events", "events STOPPED", inState(api.StateStopped))
		}
		side.proxy.Heal()
		waitTopic(t, c, "m", "orders", fmt.Sprintf("caught up after the %s came back", side.name), func(p api.Partition) bool {
			return caughtUp(api.StateMirroring)(p) && len(p.Unreachable) == 0 && p.Error == ""
		})
		kafkatest.WaitIdentical(t, src, dst, "orders", 60*time.Second)
	}
}

// commandBound is the worker's answer bound for a command while the destination does not
// answer (mirrorengine.StoreCommandTimeout) with room for a loaded test machine.
const commandBound = mirrorengine.StoreCommandTimeout + 5*time.Second

// While the destination is blackholed, every command that would write __mirror_state
// answers within its bound with COORDINATOR_NOT_AVAILABLE saying it did not take effect, and
// indeed none did; once healed, the same commands work and the logs are identical.
func TestWorkerCommandsDuringDestinationOutage(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"orders", 1, 50}, sourceTopic{"events", 1, 50}, sourceTopic{"later", 1, 50})
	dstProxy := kafkatest.NewProxy(t, dst)
	w := startWorker(t, workerEnv(nil, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="+strings.Join(dstProxy.Addrs(), ",")))
	c, ctx := w.Client, ctxT(t)
	for _, m := range []string{"m", "idle"} {
		if _, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: m, Source: api.SourceConnection{BootstrapServers: src.Addrs()}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := c.StartTopics(ctx, "m", []string{"orders", "events"}, ""); err != nil || res[0].Err() != nil || res[1].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	waitTopic(t, c, "m", "orders", "orders caught up", caughtUp(api.StateMirroring))
	waitTopic(t, c, "m", "events", "events caught up", caughtUp(api.StateMirroring))

	// No retries: each answer is the worker's own.
	once, err := api.NewClient(api.ClientConfig{URL: w.URL, Token: testToken, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	topicCmd := func(action, topic string) func(context.Context) error {
		return func(ctx context.Context) error {
			res, err := once.TopicCommand(ctx, "m", action, api.TopicsRequest{Topics: []string{topic}})
			if err == nil {
				err = res[0].Err()
			}
			return err
		}
	}
	commands := []struct {
		name string
		run  func(context.Context) error
	}{
		{"pause", topicCmd(api.ActionPause, "orders")},
		{"stop", topicCmd(api.ActionStop, "events")},
		{"start", topicCmd(api.ActionStart, "later")},
		{"create", func(ctx context.Context) error {
			_, err := once.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m2", Source: api.SourceConnection{BootstrapServers: src.Addrs()}})
			return err
		}},
		{"patch", func(ctx context.Context) error {
			_, err := once.UpdateMirror(ctx, "m", api.UpdateMirrorRequest{Sync: &api.SyncSettings{Interval: "2m"}})
			return err
		}},
		{"delete", func(ctx context.Context) error { return once.DeleteMirror(ctx, "idle") }},
	}

	// All at once, as Terraform sends them: commands run one at a time in the worker, and
	// still each answers within the bound.
	dstProxy.Blackhole()
	kafkatest.ProduceKeyed(t, prod, "orders", 50, 50)
	began := time.Now()
	errs := make([]error, len(commands))
	var wg sync.WaitGroup
	for i, cmd := range commands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmdCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[i] = cmd.run(cmdCtx)
			if took := time.Since(began); took > commandBound {
				errs[i] = fmt.Errorf("answered after %v: %w", took, errs[i])
			}
		}()
	}
	wg.Wait()
	for i, cmd := range commands {
		wantAPIError(t, cmd.name+" while the destination does not answer", errs[i], http.StatusServiceUnavailable, api.CodeCoordinatorNotAvailable)
		if !strings.Contains(errs[i].Error(), "did not take effect") {
			t.Errorf("%s: %v does not say the command did not take effect", cmd.name, errs[i])
		}
	}
	dstProxy.Heal()
	ctx = ctxT(t)

	// Nothing took effect.
	for _, topic := range []string{"orders", "events"} {
		d := waitTopic(t, c, "m", topic, topic+" caught up after the outage", caughtUp(api.StateMirroring))
		if d.DesiredState != api.DesiredMirroring {
			t.Errorf("%s: desired state %s after refused commands", topic, d.DesiredState)
		}
	}
	if _, err := c.GetTopic(ctx, "m", "later"); !api.IsCode(err, api.CodeTopicNotInClusterMirror) {
		t.Errorf("later after a refused start: %v", err)
	}
	mirrors, err := c.ListMirrors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mirrors {
		names = append(names, m.Name)
		if m.Name == "m" && m.Sync.Interval != api.DefaultSyncInterval.String() {
			t.Errorf("sync interval %s after a refused patch", m.Sync.Interval)
		}
	}
	if !slices.Equal(names, []string{"idle", "m"}) {
		t.Errorf("mirrors %v after a refused create and delete", names)
	}

	// The same commands work now.
	for _, cmd := range commands {
		if err := cmd.run(ctx); err != nil {
			t.Fatalf("%s after the outage: %v", cmd.name, err)
		}
	}
	waitTopic(t, c, "m", "orders", "orders PAUSED", inState(api.StatePaused))
	waitTopic(t, c, "m", "events", "events STOPPED", inState(api.StateStopped))
	waitTopic(t, c, "m", "later", "later caught up", caughtUp(api.StateMirroring))
	for _, topic := range []string{"orders", "events", "later"} {
		kafkatest.WaitIdentical(t, src, dst, topic, 60*time.Second)
	}
}

// A partition that cannot reach its source for longer than the stall threshold (2 s here,
// KAFKAMIRROR_STALL_AFTER) says so in describe, in the CLI's table and in the metrics, and
// stays MIRRORING; once the source answers again it catches up by itself and the logs are
// identical.
func TestWorkerStalledSource(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"orders", 1, 50}, sourceTopic{"events", 1, 50})
	srcProxy := kafkatest.NewProxy(t, src)
	w := startWorker(t, workerEnv(dst, "KAFKAMIRROR_STALL_AFTER=2s"))
	c, ctx := w.Client, ctxT(t)
	// "orders" comes through the proxy, "events" straight from the source.
	for _, m := range []struct {
		name  string
		addrs []string
		topic string
	}{{"m", srcProxy.Addrs(), "orders"}, {"direct", src.Addrs(), "events"}} {
		mirrorTopics(ctx, t, c, m.name, m.addrs, m.topic)
		waitTopic(t, c, m.name, m.topic, m.topic+" caught up", caughtUp(api.StateMirroring))
	}

	srcProxy.Blackhole()
	kafkatest.ProduceKeyed(t, prod, "orders", 50, 50)
	kafkatest.ProduceKeyed(t, prod, "events", 50, 50)
	var stalled api.Partition
	kafkatest.WaitFor(t, 2*time.Minute, "orders reported stalled", func() (bool, string) {
		reqCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := c.GetTopic(reqCtx, "m", "orders")
		if err != nil {
			return false, err.Error()
		}
		stalled = d.Partitions[0]
		return stalled.State == api.StateMirroring && strings.HasPrefix(stalled.Error, "stalled: source unreachable") &&
			slices.Equal(stalled.Unreachable, []string{"source"}), fmt.Sprintf("%+v", stalled)
	})
	if stalled.SourceOffset != 50 || stalled.DestinationOffset != 50 {
		t.Errorf("stalled partition: offsets %d/%d, want the last known 50/50", stalled.SourceOffset, stalled.DestinationOffset)
	}
	samples := scrape(t, w.URL)
	if v, ok := metric(samples, "kafkamirror_stalled_partitions"); !ok || v != 1 {
		t.Errorf("kafkamirror_stalled_partitions %v (present %v), want 1", v, ok)
	}
	if v, ok := metric(samples, "kafkamirror_partition_stalled_seconds", "mirror", "m", "topic", "orders", "partition", "0"); !ok || v < 2 {
		t.Errorf("kafkamirror_partition_stalled_seconds of orders %v (present %v), want at least 2", v, ok)
	}
	if _, ok := metric(samples, "kafkamirror_partition_stalled_seconds", "mirror", "direct"); ok {
		t.Error("the mirror whose source answers is reported stalled")
	}
	out, code := w.cli(t, "describe", "--mirror", "m")
	row := regexp.MustCompile(`(?m)^m +orders +0 +50 +50 +0 +MIRRORING +source unreachable, its offset from \d+s ago; stalled: source unreachable, mirroring sessions failing for \d+s`)
	if code != 0 || !row.MatchString(out) {
		t.Errorf("describe (exit %d) does not show the stall:\n%s", code, out)
	}
	// The other mirror goes on meanwhile.
	waitTopic(t, c, "direct", "events", "events caught up during the outage", caughtUp(api.StateMirroring))

	srcProxy.Heal()
	waitTopic(t, c, "m", "orders", "orders caught up after the source came back", func(p api.Partition) bool {
		return caughtUp(api.StateMirroring)(p) && p.SourceOffset == 100 && p.Error == "" && len(p.Unreachable) == 0
	})
	kafkatest.WaitFor(t, 30*time.Second, "no stalled partition in the metrics", func() (bool, string) {
		v, _ := metric(scrape(t, w.URL), "kafkamirror_stalled_partitions")
		return v == 0, fmt.Sprintf("kafkamirror_stalled_partitions %v", v)
	})
	for _, topic := range []string{"orders", "events"} {
		kafkatest.WaitIdentical(t, src, dst, topic, 60*time.Second)
	}
}
