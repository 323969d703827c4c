package datapath

// The produce side of the data path: one pipeline per destination broker (per destination
// client and leader), as Kafka's own producer has. One ProduceRequest per source batch cost a
// round of the broker's request handling per batch; a request carrying one batch for each of
// many partitions (Kafka's rule: at most one batch per partition per request) costs one.
//
// Per-partition order on the wire: a partition's batches join requests in the order the
// session hands them over, a later batch always a later request, and a request is issued only
// once its predecessor is serialized onto the connection (WireOrdered): the broker handles one
// connection's requests in order, so the sequences of each partition arrive in order.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
)

// produceRequestMaxBytes bounds the batches of one request (a single larger batch goes
// alone); far below a broker's socket.request.max.bytes (100 MiB).
const produceRequestMaxBytes = 16 << 20

// brokerProducers are the running pipelines. A pipeline starts with the first partition
// that writes to its broker and ends with the last.
var brokerProducers = brokerRegistry[*brokerProducer]{m: map[brokerKey]*brokerProducer{}}

// brokerProducer sends the non-transactional batches of every partition one destination
// broker leads.
type brokerProducer struct {
	key         brokerKey
	dst         kafkareq.Cluster
	obs         Observer
	maxInFlight int
	users       int // guarded by brokerProducers.mu
	cancel      context.CancelFunc

	mu       sync.Mutex
	queue    []*produceItem // waiting to join a request, in the order they were handed over
	inFlight int            // requests sent and not answered
	wake     chan struct{}  // capacity 1: the queue grew or a request was answered
}

// produceItem is one partition's batch handed to a pipeline.
type produceItem struct {
	ctx       context.Context
	topic     string
	id        [16]byte
	partition int32
	batch     []byte
	done      chan<- produced // capacity 1
	stop      func() bool     // ends the watch on ctx
	queued    bool            // guarded by bp.mu: not yet in a request
}

// produced is the answer for one batch: the base offset the destination assigned, or why not.
type produced struct {
	base int64
	err  error
}

// acquireProducer returns the pipeline to a destination broker, starting it for its first
// user; every acquire is paired with a release.
func acquireProducer(dst kafkareq.Cluster, broker int32, cfg *PartitionConfig) *brokerProducer {
	key := brokerKey{dst.Client, broker}
	brokerProducers.mu.Lock()
	defer brokerProducers.mu.Unlock()
	bp := brokerProducers.m[key]
	if bp == nil {
		ctx, cancel := context.WithCancel(context.Background())
		bp = &brokerProducer{key: key, dst: dst, obs: cfg.Observer, maxInFlight: cfg.ProduceRequestsInFlight, cancel: cancel, wake: make(chan struct{}, 1)}
		brokerProducers.m[key] = bp
		go bp.run(ctx)
	}
	bp.users++
	return bp
}

// release ends a user's share; the last one stops the pipeline. Its users have their answers
// by then: nothing is queued or in flight for them.
func (bp *brokerProducer) release() {
	brokerProducers.mu.Lock()
	defer brokerProducers.mu.Unlock()
	if bp.users--; bp.users == 0 {
		delete(brokerProducers.m, bp.key)
		bp.cancel()
	}
}

func (bp *brokerProducer) poke() {
	select {
	case bp.wake <- struct{}{}:
	default:
	}
}

// enqueue hands a batch to the pipeline; its answer arrives on done. Until the batch joins
// a request, the end of ctx withdraws it (answered with ctx's error, never sent); once it
// joined one, the answer is awaited whatever ctx does.
func (bp *brokerProducer) enqueue(ctx context.Context, topic string, id [16]byte, partition int32, batch []byte, done chan<- produced) {
	it := &produceItem{ctx: ctx, topic: topic, id: id, partition: partition, batch: batch, done: done, queued: true}
	bp.mu.Lock()
	bp.queue = append(bp.queue, it)
	it.stop = context.AfterFunc(ctx, func() {
		bp.mu.Lock()
		defer bp.mu.Unlock()
		if it.queued {
			it.queued = false
			bp.queue = slices.DeleteFunc(bp.queue, func(x *produceItem) bool { return x == it })
			it.done <- produced{err: ctx.Err()}
		}
	})
	bp.mu.Unlock()
	bp.poke()
}

func (bp *brokerProducer) run(ctx context.Context) {
	for {
		req, items := bp.request()
		if req == nil {
			select {
			case <-bp.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		onWire := make(chan struct{})
		go bp.issue(req, items, onWire)
		// The next request goes after this one on the connection.
		<-onWire
	}
}

// request builds a request of the queued batches, the oldest of each partition, and takes
// them off the queue; nil when nothing is queued or enough requests are in flight.
func (bp *brokerProducer) request() (*kmsg.ProduceRequest, []*produceItem) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if len(bp.queue) == 0 || bp.inFlight >= bp.maxInFlight {
		return nil, nil
	}
	req := kafkareq.NewProduceRequest(nil)
	var items []*produceItem
	taken := map[kafkareq.PartKey]bool{} // a partition with a batch in this request, or one left queued
	topics := map[kafkareq.PartKey]int{} // index in req.Topics
	size := 0
	rest := bp.queue[:0]
	for _, it := range bp.queue {
		k := kafkareq.PartKey{Topic: it.topic, ID: it.id, Partition: it.partition}
		if taken[k] || len(items) > 0 && size+len(it.batch) > produceRequestMaxBytes {
			taken[k] = true // the partition's later batches stay behind this one
			rest = append(rest, it)
			continue
		}
		it.queued = false
		it.stop()
		// The lease is checked right before a batch joins: a derived ctx may not know yet.
		if err := lease.Err(it.ctx); err != nil {
			it.done <- produced{err: err}
			continue
		}
		if err := it.ctx.Err(); err != nil {
			it.done <- produced{err: err}
			continue
		}
		taken[k] = true
		size += len(it.batch)
		items = append(items, it)
		tk := kafkareq.PartKey{Topic: it.topic, ID: it.id}
		ti, ok := topics[tk]
		if !ok {
			ti = len(req.Topics)
			topics[tk] = ti
		}
		kafkareq.AddProduce(req, ti, it.topic, it.id, it.partition, it.batch)
	}
	clear(bp.queue[len(rest):])
	bp.queue = rest
	if len(items) == 0 {
		return nil, nil
	}
	bp.inFlight++
	return req, items
}

// send issues req, closes onWire once it is serialized onto the connection (or failed), and
// hands every batch its answer.
func (bp *brokerProducer) issue(req *kmsg.ProduceRequest, items []*produceItem, onWire chan struct{}) {
	defer func() {
		bp.mu.Lock()
		bp.inFlight--
		bp.mu.Unlock()
		bp.poke()
	}()
	// Every batch in req is on its way: its answer is awaited even when its partition's
	// ctx ends, since whoever stops a partition writer relies on its return meaning that
	// nothing it sent can still land. Bounded by the request's own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), kafkareq.ProduceTimeoutMillis*time.Millisecond+10*time.Second)
	defer cancel()
	var once sync.Once
	wired := func() { once.Do(func() { close(onWire) }) }
	began := time.Now()
	kresp, err := bp.dst.Client.Broker(int(bp.key.broker)).Request(ctx, kafkareq.WireOrdered{ProduceRequest: req, OnWire: wired})
	wired()
	bp.obs.ProduceLatency(time.Since(began))
	var resp *kmsg.ProduceResponse
	if err == nil {
		resp = kresp.(*kmsg.ProduceResponse)
		bytes := 0
		for _, it := range items {
			bytes += len(it.batch)
		}
		bp.obs.DestinationProduce(bp.key.broker, len(items), int64(bytes))
	}
	answers := kafkareq.ProduceAnswers(resp)
	for _, it := range items {
		r := produced{err: err}
		if err != nil && it.ctx.Err() != nil {
			r.err = it.ctx.Err()
		} else if err == nil {
			r.base, r.err = bp.dst.ProducedPartition(answers, it.topic, it.id, it.partition)
		}
		it.done <- r
	}
}
