package mirrorengine

// The produce side of the data path: one pipeline per destination broker (per destination
// client and leader), as Kafka's own producer has. One ProduceRequest per source batch cost a
// round of the broker's request handling per batch; a request carrying one batch for each of
// many partitions (Kafka's rule: at most one batch per partition per request) costs one.
//
// Per-partition order on the wire: a partition's batches join requests in the order the
// session hands them over, a later batch always a later request, and a request is issued only
// once its predecessor is serialized onto the connection (wireOrdered): the broker handles one
// connection's requests in order, so the sequences of each partition arrive in order.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

const (
	// produceRequestMaxBytes bounds the batches of one request (a single larger batch goes
	// alone); far below a broker's socket.request.max.bytes (100 MiB).
	produceRequestMaxBytes = 16 << 20
	// produceTimeoutMillis is a produce request's timeout on the broker; its answer is awaited
	// up to 10 s longer.
	produceTimeoutMillis = 30000
)

// brokerProducers are the running pipelines. A pipeline starts with the first partition
// that writes to its broker and ends with the last.
var brokerProducers = brokerRegistry[*brokerProducer]{m: map[brokerKey]*brokerProducer{}}

// brokerProducer sends the non-transactional batches of every partition one destination
// broker leads.
type brokerProducer struct {
	key         brokerKey
	dst         cluster
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
func acquireProducer(dst cluster, broker int32, cfg *PartitionConfig) *brokerProducer {
	key := brokerKey{dst.cl, broker}
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
		go bp.send(req, items, onWire)
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
	req := newProduceRequest(nil)
	var items []*produceItem
	taken := map[partKey]bool{} // a partition with a batch in this request, or one left queued
	topics := map[partKey]int{} // index in req.Topics
	size := 0
	rest := bp.queue[:0]
	for _, it := range bp.queue {
		k := partKey{it.topic, it.id, it.partition}
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
		tk := partKey{topic: it.topic, id: it.id}
		ti, ok := topics[tk]
		if !ok {
			ti = len(req.Topics)
			topics[tk] = ti
		}
		addProduce(req, ti, it.topic, it.id, it.partition, it.batch)
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
func (bp *brokerProducer) send(req *kmsg.ProduceRequest, items []*produceItem, onWire chan struct{}) {
	defer func() {
		bp.mu.Lock()
		bp.inFlight--
		bp.mu.Unlock()
		bp.poke()
	}()
	// Every batch in req is on its way: its answer is awaited even when its partition's
	// ctx ends, since whoever stops a partition writer relies on its return meaning that
	// nothing it sent can still land. Bounded by the request's own timeout.
	ctx, cancel := context.WithTimeout(context.Background(), produceTimeoutMillis*time.Millisecond+10*time.Second)
	defer cancel()
	var once sync.Once
	wired := func() { once.Do(func() { close(onWire) }) }
	began := time.Now()
	kresp, err := bp.dst.cl.Broker(int(bp.key.broker)).Request(ctx, wireOrdered{req, wired})
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
	answers := produceAnswers(resp)
	for _, it := range items {
		r := produced{err: err}
		if err != nil && it.ctx.Err() != nil {
			r.err = it.ctx.Err()
		} else if err == nil {
			r.base, r.err = bp.dst.producedPartition(answers, it.topic, it.id, it.partition)
		}
		it.done <- r
	}
}

// newProduceRequest is an acks=all produce request, of a replayed transaction when txnID is
// set.
func newProduceRequest(txnID *string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = produceTimeoutMillis
	req.TransactionID = txnID
	return req
}

// addProduce adds a partition's batch to req's topic at index ti (appended when ti is past
// the end).
func addProduce(req *kmsg.ProduceRequest, ti int, topic string, id [16]byte, partition int32, batch []byte) {
	if ti == len(req.Topics) {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		req.Topics = append(req.Topics, rt)
	}
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
}

// produceAnswers indexes a produce response's partitions. Answers name topics by id (v13+)
// or by name, never both.
func produceAnswers(resp *kmsg.ProduceResponse) map[partKey]*kmsg.ProduceResponseTopicPartition {
	answers := map[partKey]*kmsg.ProduceResponseTopicPartition{}
	if resp == nil {
		return answers
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			answers[partKey{t.Topic, t.TopicID, p.Partition}] = p
		}
	}
	return answers
}

// producedPartition is the base offset the destination assigned to a partition's batch, or
// its error.
func (c cluster) producedPartition(answers map[partKey]*kmsg.ProduceResponseTopicPartition, topic string, id [16]byte, partition int32) (int64, error) {
	p := answers[partKey{topic: topic, partition: partition}]
	if p == nil {
		p = answers[partKey{id: id, partition: partition}]
	}
	if p == nil {
		return 0, fmt.Errorf("%s produce to %s[%d]: %w", c.name, topic, partition, errNoAnswer)
	}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		if p.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
		}
		return 0, mirrorerr.WrapAuth(c.name, "write to "+topic, err)
	}
	return p.BaseOffset, nil
}
