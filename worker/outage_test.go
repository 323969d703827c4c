package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
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
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "orders", 2, nil)
	src.CreateTopic(t, "events", 1, nil)
	prod := src.Client(t)
	produce(t, prod, "orders", 0, 100)
	produce(t, prod, "events", 0, 50)
	srcProxy, dstProxy := kafkatest.NewProxy(t, src), kafkatest.NewProxy(t, dst)

	w := startWorker(t, workerEnv(nil, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="+strings.Join(dstProxy.Addrs(), ",")))
	c, ctx := w.Client, ctxT(t)
	if _, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m", Source: api.SourceConnection{BootstrapServers: srcProxy.Addrs()}}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.StartTopics(ctx, "m", []string{"orders", "events"}, ""); err != nil || res[0].Err() != nil || res[1].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	waitTopic(t, c, "m", "orders", "MIRRORING with lag 0", caughtUp(api.StateMirroring))
	waitTopic(t, c, "m", "events", "MIRRORING with lag 0", caughtUp(api.StateMirroring))

	for i, side := range []struct {
		name  string
		proxy *kafkatest.Proxy
	}{{"source", srcProxy}, {"destination", dstProxy}} {
		before := time.Now()
		side.proxy.Blackhole()
		produce(t, prod, "orders", 100+100*i, 100)
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
