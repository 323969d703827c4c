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
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
)

// produceRequestMaxBytes bounds the batches of one request (a single larger batch goes
// alone); far below a broker's socket.request.max.bytes (100 MiB).
const produceRequestMaxBytes = 16 << 20

// pipelineMinBytes is the least a request sent while another is in flight carries, unless
// one of its partitions has a batch in flight. A broker reads a connection's next request only
// once it has answered the one before (Kafka mutes the connection meanwhile), so a request
// pipelined behind another saves just the round trip back to the client, and costs the broker a
// round of request handling of its own. Partitions that write in turn (a compacted partition's
// record, its markers, its next record) therefore wait with small batches for the answer and
// share the next request: 2.5 partitions per request instead of 1.3 in the bench's compacted
// topic. A partition with a batch in flight is streaming (its batches can never share a
// request), so its next one is pipelined at once, as are big requests.
const pipelineMinBytes = 64 << 10

// brokerProducers are the running pipelines.
var brokerProducers = newPipelines[*brokerProducer]()

// brokerProducer sends the non-transactional batches of every partition one destination
// broker leads.
type brokerProducer struct {
	key         brokerKey
	dst         kafkareq.Cluster
	obs         Observer
	maxInFlight int
	queue       writeQueue[*produceItem]

	mu            sync.Mutex
	inFlight      int                      // requests sent and not answered
	partsInFlight map[kafkareq.PartKey]int // batches sent and not answered, by partition
}

// produceItem is one partition's batch handed to a pipeline.
type produceItem struct {
	ctx       context.Context
	topic     string
	id        [16]byte
	partition int32
	batch     []byte
	done      chan<- produced // capacity 1
}

func (it *produceItem) partKey() kafkareq.PartKey {
	return kafkareq.PartKey{Topic: it.topic, ID: it.id, Partition: it.partition}
}

// produced is the answer for one batch: the base offset the destination assigned, or why not.
type produced struct {
	base int64
	err  error
}

// acquireProducer returns the pipeline to a destination broker; every acquire is paired
// with a release.
func acquireProducer(dst kafkareq.Cluster, broker int32, cfg *PartitionConfig) *brokerProducer {
	key := brokerKey{dst.Client, broker}
	return brokerProducers.acquire(key, func() *brokerProducer {
		return newBrokerProducer(key, dst, cfg)
	}, (*brokerProducer).run)
}

func newBrokerProducer(key brokerKey, dst kafkareq.Cluster, cfg *PartitionConfig) *brokerProducer {
	return &brokerProducer{key: key, dst: dst, obs: cfg.Observer, maxInFlight: cfg.ProduceRequestsInFlight,
		queue: newWriteQueue[*produceItem](), partsInFlight: map[kafkareq.PartKey]int{}}
}

func (bp *brokerProducer) release() { brokerProducers.release(bp.key) }

// enqueue hands a batch to the pipeline; its answer arrives on done.
func (bp *brokerProducer) enqueue(ctx context.Context, topic string, id [16]byte, partition int32, batch []byte, done chan<- produced) {
	it := &produceItem{ctx: ctx, topic: topic, id: id, partition: partition, batch: batch, done: done}
	bp.queue.add(ctx, it, func(err error) { done <- produced{err: err} })
}

func (bp *brokerProducer) run(ctx context.Context) {
	for {
		req, items := bp.request()
		if req == nil {
			select {
			case <-bp.queue.wake:
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
// them off the queue; nil when nothing is queued, enough requests are in flight, or one is
// in flight and the next would wait for it (pipelineMinBytes).
func (bp *brokerProducer) request() (*kmsg.ProduceRequest, []*produceItem) {
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.inFlight >= bp.maxInFlight {
		return nil, nil
	}
	if bp.inFlight > 0 {
		join, size := joinRequest()
		streaming := false
		bp.queue.each(func(it *produceItem) {
			if join(it) && bp.partsInFlight[it.partKey()] > 0 {
				streaming = true
			}
		})
		if !streaming && *size < pipelineMinBytes {
			return nil, nil
		}
	}
	join, _ := joinRequest()
	items := bp.queue.take(join)
	if len(items) == 0 {
		return nil, nil
	}
	for _, it := range items {
		bp.partsInFlight[it.partKey()]++
	}
	req := kafkareq.NewProduceRequest(nil)
	topics := map[kafkareq.PartKey]int{} // index in req.Topics
	for _, it := range items {
		tk := kafkareq.PartKey{Topic: it.topic, ID: it.id}
		ti, ok := topics[tk]
		if !ok {
			ti = len(req.Topics)
			topics[tk] = ti
		}
		kafkareq.AddProduce(req, ti, it.topic, it.id, it.partition, it.batch)
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
		for _, it := range items {
			k := it.partKey()
			if bp.partsInFlight[k]--; bp.partsInFlight[k] == 0 {
				delete(bp.partsInFlight, k)
			}
		}
		bp.mu.Unlock()
		bp.queue.poke()
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

// joinRequest returns a join for writeQueue.take that admits the oldest batch of each
// partition up to produceRequestMaxBytes, and the size of the batches it admitted.
func joinRequest() (func(*produceItem) bool, *int) {
	taken := map[kafkareq.PartKey]bool{} // a partition with a batch in this request, or one left queued
	size := 0
	return func(it *produceItem) bool {
		k := it.partKey()
		if taken[k] || size > 0 && size+len(it.batch) > produceRequestMaxBytes {
			taken[k] = true // the partition's later batches stay behind this one
			return false
		}
		taken[k] = true
		size += len(it.batch)
		return true
	}, &size
}
