package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// A record written into a mirrored destination topic by anyone but the worker (here a
// destination without an authorizer) shows at once: the first describe after it answers
// FAILED with both offsets, not MIRRORING with lag 0 until the next source record.
func TestWorkerDestinationAheadIsVisibleAtOnce(t *testing.T) {
	t.Parallel()
	src, dst, _ := filledPair(t, sourceTopic{"orders", 1, 70})
	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)
	mirrorTopics(ctx, t, c, "m", src.Addrs(), "orders")
	waitTopic(t, c, "m", "orders", "MIRRORING with lag 0", caughtUp(api.StateMirroring))

	if err := dst.Client(t).ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: []byte("foreign")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	topic, err := c.GetTopic(ctx, "m", "orders")
	if err != nil {
		t.Fatal(err)
	}
	p := topic.Partitions[0]
	if p.State != api.StateFailed || !strings.Contains(p.Error, "ends at offset 71, but the mirror wrote only up to offset 70") {
		t.Fatalf("the first describe after a foreign write: %+v, want FAILED naming offsets 71 and 70", p)
	}
}
