package datapath

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// wiredBatch is one batch of a produce request, as the destination received it.
type wiredBatch struct {
	part string // "topic/partition"
	seq  int32
}

// requestLog records requests of one kind that a kfake cluster receives, an entry each.
type requestLog[T any] struct {
	mu   sync.Mutex
	reqs []T
}

// add records a request. With release set, the first one is held until release() is true
// (polled, for at most 30 s); the client's next requests wait behind it on the connection.
func (l *requestLog[T]) add(c *kafkatest.Cluster, entry T, release func() bool) {
	l.mu.Lock()
	l.reqs = append(l.reqs, entry)
	first := len(l.reqs) == 1
	l.mu.Unlock()
	if first && release != nil {
		c.Fake().SleepControl(func() {
			for deadline := time.Now().Add(30 * time.Second); !release() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		})
	}
}

func (l *requestLog[T]) requests() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// produceLog records the non-transactional produce requests of some topics that a kfake
// cluster receives.
type produceLog struct{ requestLog[[]wiredBatch] }

// watchProduces records c's produce requests of topics. With release set, the first one is
// held until release() is true (polled, for at most 30 s); the client's next requests wait
// behind it on the connection.
func watchProduces(t *testing.T, c *kafkatest.Cluster, release func() bool, topics ...string) *produceLog {
	t.Helper()
	names := map[[16]byte]string{}
	for _, topic := range topics {
		names[c.Fake().TopicInfo(topic).TopicID] = topic
	}
	l := &produceLog{}
	c.Fake().ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID != nil {
			return nil, nil, false
		}
		var batches []wiredBatch
		for _, rt := range req.Topics {
			name := rt.Topic
			if req.Version >= 13 {
				name = names[rt.TopicID]
			}
			if !slices.Contains(topics, name) {
				continue
			}
			for _, rp := range rt.Partitions {
				batches = append(batches, wiredBatch{fmt.Sprintf("%s/%d", name, rp.Partition), int32(binary.BigEndian.Uint32(rp.Records[recordbatch.OffBaseSequence:]))})
			}
		}
		if len(batches) == 0 {
			return nil, nil, false
		}
		l.add(c, batches, release)
		return nil, nil, false
	})
	return l
}

// partitions returns the partitions request i carried, none if it was not received yet.
func (l *produceLog) partitions(i int) []string {
	var out []string
	if reqs := l.requests(); i < len(reqs) {
		for _, b := range reqs[i] {
			out = append(out, b.part)
		}
	}
	return out
}

// checkOrder fails unless every request carried at most one batch per partition and each
// partition's sequences reached the broker in order.
func (l *produceLog) checkOrder(t *testing.T) {
	t.Helper()
	last := map[string]int32{}
	for i, req := range l.requests() {
		seen := map[string]bool{}
		for _, b := range req {
			if seen[b.part] {
				t.Fatalf("request %d carried two batches of %s", i, b.part)
			}
			seen[b.part] = true
			if prev, ok := last[b.part]; ok && b.seq <= prev {
				t.Fatalf("request %d carried sequence %d of %s after sequence %d", i, b.seq, b.part, prev)
			}
			last[b.part] = b.seq
		}
	}
}

// queuedPartitions returns the partitions ("topic/partition") with a batch waiting to join
// a request in a pipeline of cl.
func queuedPartitions(cl *kgo.Client) map[string]bool {
	out := map[string]bool{}
	brokerProducers.each(func(k brokerKey) bool { return k.cl == cl }, func(bp *brokerProducer) {
		bp.queue.each(func(it *produceItem) { out[fmt.Sprintf("%s/%d", it.topic, it.partition)] = true })
	})
	return out
}

// testPipeline is a pipeline to the leader of c's topic (every partition of a one-broker
// cluster) and an idempotent producer id to write with.
func testPipeline(t *testing.T, c *kafkatest.Cluster, topic string, requestsInFlight int) (*brokerProducer, kafkareq.TopicMeta, recordbatch.Producer) {
	t.Helper()
	ctx := context.Background()
	dst := kafkareq.NewCluster("destination", c.Client(t))
	meta, err := dst.Metadata(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	idem, err := dst.InitProducerID(ctx, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := PartitionConfig{ProduceRequestsInFlight: requestsInFlight}
	cfg.defaults()
	bp := acquireProducer(dst, meta.Leader, &cfg)
	t.Cleanup(bp.release)
	return bp, meta, idem
}

func testBatch(t *testing.T, as recordbatch.Producer, sequence int32, value []byte) []byte {
	t.Helper()
	as.Sequence = sequence
	batch, err := recordbatch.Encode(recordbatch.Spec{Producer: as}, []kmsg.Record{{Value: value}})
	if err != nil {
		t.Fatal(err)
	}
	return batch
}

func answer(t *testing.T, done <-chan produced) produced {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("no answer for a batch within 60 s")
		return produced{}
	}
}

// Many batches of several partitions in flight at once reach the broker in each partition's
// order, each request carrying one batch of every partition that has one waiting.
func TestProducerKeepsEachPartitionsOrderOnTheWire(t *testing.T) {
	c := kafkatest.New(t)
	const partitions, batches = 4, 100
	c.CreateTopic(t, "ordered", partitions, nil)
	var enqueued atomic.Bool
	wire := watchProduces(t, c, enqueued.Load, "ordered")
	bp, meta, idem := testPipeline(t, c, "ordered", 0)
	dones := make([][]chan produced, partitions)
	for i := range batches {
		for p := range int32(partitions) {
			done := make(chan produced, 1)
			bp.enqueue(context.Background(), "ordered", meta.ID, p, testBatch(t, idem, int32(i), []byte(strconv.Itoa(i))), done)
			dones[p] = append(dones[p], done)
		}
	}
	enqueued.Store(true)
	for p := range dones {
		for i, done := range dones[p] {
			if r := answer(t, done); r.err != nil || r.base != int64(i) {
				t.Fatalf("partition %d batch %d: base offset %d, error %v; want base offset %d", p, i, r.base, r.err, i)
			}
		}
	}
	wire.checkOrder(t)
	// Every answered batch leaves the count of its partition's batches in flight.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		bp.mu.Lock()
		left := len(bp.partsInFlight)
		bp.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d partitions still counted in flight 30 s after every batch was answered", left)
		}
	}
	full := 0
	for _, req := range wire.requests() {
		if len(req) == partitions {
			full++
		}
	}
	if full == 0 {
		t.Fatalf("no produce request carried a batch of every partition")
	}
}

// A partition's error in a grouped request is its own: the other partitions' batches in the
// request land.
func TestProducerErrorAnswersOnlyItsPartition(t *testing.T) {
	c := kafkatest.New(t)
	c.CreateTopic(t, "small", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("1000")})
	c.CreateTopic(t, "wide", 1, nil)
	var enqueued atomic.Bool
	wire := watchProduces(t, c, enqueued.Load, "small", "wide")
	bp, wide, idem := testPipeline(t, c, "wide", 1)
	small, err := kafkareq.NewCluster("destination", c.Client(t)).Metadata(context.Background(), "small", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wide0, tooLarge, wide1 := make(chan produced, 1), make(chan produced, 1), make(chan produced, 1)
	bp.enqueue(ctx, "wide", wide.ID, 0, testBatch(t, idem, 0, []byte("a")), wide0)
	bp.enqueue(ctx, "small", small.ID, 0, testBatch(t, idem, 0, bytes.Repeat([]byte("x"), 5000)), tooLarge)
	bp.enqueue(ctx, "wide", wide.ID, 0, testBatch(t, idem, 1, []byte("b")), wide1)
	enqueued.Store(true)
	if r := answer(t, tooLarge); !errors.Is(r.err, kerr.MessageTooLarge) {
		t.Fatalf("the batch over max.message.bytes was answered %+v, want MESSAGE_TOO_LARGE", r)
	}
	for i, done := range []chan produced{wide0, wide1} {
		if r := answer(t, done); r.err != nil || r.base != int64(i) {
			t.Fatalf("wide batch %d: base offset %d, error %v; want base offset %d", i, r.base, r.err, i)
		}
	}
	// One request in flight: the second batch of wide goes in a later request than the
	// first, and the too-large batch joins one of them.
	grouped := false
	for i := range wire.requests() {
		grouped = grouped || slices.Equal(wire.partitions(i), []string{"wide/0", "small/0"}) || slices.Equal(wire.partitions(i), []string{"small/0", "wide/0"})
	}
	if !grouped {
		t.Fatalf("requests %v: the too-large batch did not share a request", wire.requests())
	}
}

// produceCounter counts what the pipelines report.
type produceCounter struct {
	NopObserver
	requests, partitions atomic.Int64
}

func (o *produceCounter) DestinationProduce(_ int32, partitions int, _ int64) {
	o.requests.Add(1)
	o.partitions.Add(int64(partitions))
}

// The partitions led by one destination broker share produce requests (issue #16), each
// partition's batches in order, and the logs are identical.
func TestMirrorGroupsProducesByDestinationLeader(t *testing.T) {
	const partitions = 8
	src, dst, prod := mirroredTopic(t, "wide", partitions, nil)
	for round := range 5 {
		for p := range int32(partitions) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records("wide", p, 20, fmt.Sprint("r", round))...)
		}
	}
	dc := dst.Client(t)
	// The first request waits until every partition's first batch is in it or queued
	// behind it: with one request in flight, the next one carries all the others.
	var wire *produceLog
	wire = watchProduces(t, dst, func() bool {
		waiting := queuedPartitions(dc)
		for _, p := range wire.partitions(0) {
			waiting[p] = true
		}
		return len(waiting) == partitions
	}, "wide")
	counter := &produceCounter{}
	run := startMirrorConfig(context.Background(), t, src.Client(t), dc,
		PartitionConfig{Mirror: "m1", Topic: "wide", FirstStart: true, ProduceRequestsInFlight: 1, Observer: counter}, partitions)
	kafkatest.WaitIdentical(t, src, dst, "wide", kafkatest.IdenticalWithin)
	run.stop(t)

	wire.checkOrder(t)
	first := append(wire.partitions(0), wire.partitions(1)...)
	slices.Sort(first)
	if first = slices.Compact(first); len(first) != partitions {
		t.Fatalf("the first two produce requests carried %v, want a batch of every partition", first)
	}
	reqs := wire.requests()
	batches := 0
	for _, req := range reqs {
		batches += len(req)
	}
	if n := counter.requests.Load(); n != int64(len(reqs)) || counter.partitions.Load() != int64(batches) {
		t.Fatalf("observer counted %d requests of %d batches, the destination received %d of %d", n, counter.partitions.Load(), len(reqs), batches)
	}
	if n := run.sessions.Load(); n != partitions {
		t.Fatalf("%d mirror sessions for %d partitions, want one each (an out-of-order sequence restarts one)", n, partitions)
	}
}

func TestMirrorProduceErrorFailsOnlyItsPartition(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	produceErrorFailsOnlyItsPartition(t, src, dst, "small", "wide")
}

func TestKafkaMirrorProduceErrorFailsOnlyItsPartition(t *testing.T) {
	onKafka(t, func(t *testing.T, src, dst *kafkatest.Cluster) {
		produceErrorFailsOnlyItsPartition(t, src, dst, kafkatest.TopicFor(t, "small"), kafkatest.TopicFor(t, "wide"))
	})
}

// produceErrorFailsOnlyItsPartition: a destination topic's max.message.bytes shrinks under
// a running mirror; the batch it refuses fails its partition (the pipeline shares requests
// between topics), and the other topic's partitions go on.
func produceErrorFailsOnlyItsPartition(t *testing.T, src, dst *kafkatest.Cluster, small, wide string) {
	createBoth(t, src, dst, small, 1, nil)
	createBoth(t, src, dst, wide, 2, nil)
	prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.NoCompression()))
	write := func(tag string) {
		for p := range int32(2) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records(wide, p, 30, tag)...)
		}
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records(small, 0, 5, "a")...)
	write("a")
	sc, dc := src.Client(t), dst.Client(t)
	smallRun := startMirrorClients(context.Background(), t, sc, dc, small, 1, true)
	wideRun := startMirrorClients(context.Background(), t, sc, dc, wide, 2, true)
	kafkatest.WaitIdentical(t, src, dst, small, kafkatest.IdenticalWithin)
	kafkatest.WaitIdentical(t, src, dst, wide, kafkatest.IdenticalWithin)

	// The running session checks batches against the limit it read at its start.
	if _, err := dst.Admin(t).AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("1000")}}, small); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: small, Value: bytes.Repeat([]byte("x"), 5000)})
	write("b")
	err := smallRun.waitErr(t, 0)
	var tooLarge *mirrorerr.BatchTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Offset != 5 {
		t.Fatalf("mirror of %s stopped with %v, want a batch too large at offset 5", small, err)
	}
	kafkatest.WaitIdentical(t, src, dst, wide, kafkatest.IdenticalWithin)
	write("c")
	kafkatest.WaitIdentical(t, src, dst, wide, kafkatest.IdenticalWithin)
	wideRun.stop(t)
	if !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("error %q does not name max.message.bytes", err)
	}
}

// The partitions of one destination broker share produce requests on real Kafka too, and
// the logs are identical.
func TestKafkaMirrorGroupsProduces(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		const partitions = 8
		createBoth(t, src, dst, topic, partitions, nil)
		prod := src.ManualProducer(t)
		batches := 0
		for round := range 5 {
			for p := range int32(partitions) {
				kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 20, fmt.Sprint("r", round))...)
				batches++
			}
		}
		counter := &produceCounter{}
		run := startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t),
			PartitionConfig{Mirror: "m1", Topic: topic, FirstStart: true, Observer: counter}, partitions)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		run.stop(t)
		if n := counter.partitions.Load(); n < int64(batches) {
			t.Fatalf("produce requests carried %d batches, want at least the %d source batches", n, batches)
		}
		t.Logf("%d batches of %d partitions in %d produce requests", batches, partitions, counter.requests.Load())
	})
}

// endedLease is an ownership context whose clock says it ended before its Done fired.
type endedLease struct{ context.Context }

func (endedLease) Err() error { return context.DeadlineExceeded }

// A batch whose partition's writer was stopped (or whose lease ended) before it joined a
// request is answered with that and never sent; one in a request on its way is answered
// with the broker's answer whatever its partition's context does since.
func TestProducerWithdrawsOnlyBatchesNotYetSent(t *testing.T) {
	c := kafkatest.New(t)
	c.CreateTopic(t, "t", 3, nil)
	var release atomic.Bool
	wire := watchProduces(t, c, release.Load, "t")
	bp, meta, idem := testPipeline(t, c, "t", 1)

	sentCtx, stopSent := context.WithCancel(context.Background())
	sent := make(chan produced, 1)
	bp.enqueue(sentCtx, "t", meta.ID, 0, testBatch(t, idem, 0, []byte("sent")), sent)
	for deadline := time.Now().Add(30 * time.Second); len(wire.requests()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first batch did not reach the broker within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	// Queued behind the held request (one in flight): one partition's writer stops, the
	// other's lease ended although its context does not know yet.
	stoppedCtx, stop := context.WithCancel(context.Background())
	stopped, lapsed := make(chan produced, 1), make(chan produced, 1)
	bp.enqueue(stoppedCtx, "t", meta.ID, 1, testBatch(t, idem, 0, []byte("stopped")), stopped)
	leaseCtx := lease.With(context.Background(), endedLease{context.Background()})
	bp.enqueue(leaseCtx, "t", meta.ID, 2, testBatch(t, idem, 0, []byte("lapsed")), lapsed)
	stop()
	if r := answer(t, stopped); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("the stopped partition's batch was answered %+v, want its context's error", r)
	}
	stopSent()
	release.Store(true)
	if r := answer(t, lapsed); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("the batch of an ended lease was answered %+v, want the lease's error", r)
	}
	if r := answer(t, sent); r.err != nil || r.base != 0 {
		t.Fatalf("the batch on its way was answered %+v, want the broker's base offset 0", r)
	}
	for i := range wire.requests() {
		if parts := wire.partitions(i); !slices.Equal(parts, []string{"t/0"}) {
			t.Fatalf("request %d carried %v; only the batch of t/0 was to be sent", i, parts)
		}
	}
}

// While a request is in flight, the next one is sent only when it carries pipelineMinBytes or
// a batch of a partition that has one in flight: small batches of partitions writing in turn
// wait for the answer, so the partitions queued meanwhile share one request instead of a
// request each, and a streaming partition's batches are pipelined.
func TestProducerPipelinesBigRequestsAndStreamingPartitions(t *testing.T) {
	small, big := make([]byte, 100), make([]byte, pipelineMinBytes)
	type queued struct {
		partition int32
		batch     []byte
	}
	for _, tc := range []struct {
		name     string
		inFlight int
		sent     []int32 // partitions of the requests in flight
		queue    []queued
		want     []int32 // partitions of the request sent, none when it waits
	}{
		{"nothing in flight: a small batch goes at once", 0, nil, []queued{{0, small}}, []int32{0}},
		{"one in flight: small batches wait for its answer", 1, []int32{3}, []queued{{0, small}, {1, small}, {2, small}}, nil},
		{"one in flight: a big batch goes, and the small ones queued before it with it", 1, []int32{3}, []queued{{0, small}, {1, small}, {2, big}}, []int32{0, 1, 2}},
		{"one in flight: small batches that add up go", 1, []int32{3}, []queued{{0, big[:pipelineMinBytes/2]}, {1, big[:pipelineMinBytes/2]}}, []int32{0, 1}},
		{"one in flight: a partition's second batch does not count", 1, []int32{3}, []queued{{0, big[:pipelineMinBytes/2]}, {0, big[:pipelineMinBytes/2]}}, nil},
		{"one in flight: a streaming partition's small batch goes, with the others", 1, []int32{1}, []queued{{0, small}, {1, small}, {1, small}}, []int32{0, 1}},
		{"the most in flight (two by default): even a big batch waits", 2, []int32{0, 1}, []queued{{0, big}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg PartitionConfig
			cfg.defaults()
			bp := newBrokerProducer(brokerKey{}, kafkareq.Cluster{}, &cfg)
			bp.inFlight = tc.inFlight
			for _, p := range tc.sent {
				bp.partsInFlight[kafkareq.PartKey{Topic: "t", ID: [16]byte{1}, Partition: p}]++
			}
			for _, q := range tc.queue {
				bp.enqueue(context.Background(), "t", [16]byte{1}, q.partition, q.batch, make(chan produced, 1))
			}
			_, items := bp.request()
			var got []int32
			for _, it := range items {
				got = append(got, it.partition)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("the request sent carried partitions %v, want %v", got, tc.want)
			}
			left := 0
			bp.queue.each(func(*produceItem) { left++ })
			if left != len(tc.queue)-len(got) {
				t.Fatalf("%d batches left queued, want %d", left, len(tc.queue)-len(got))
			}
		})
	}
}
