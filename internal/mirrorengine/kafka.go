package mirrorengine

// The I/O edge of the data path: raw Kafka requests over franz-go. Fetch and Produce are
// sent straight to the partition leader (kgo does not route raw requests by partition);
// transaction requests go through kgo's coordinator routing.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
)

// cluster is one side of a mirror: a client and the role it plays, for error messages.
type cluster struct {
	name string // "source" or "destination"
	cl   *kgo.Client
	adm  *kadm.Client
}

func newCluster(name string, cl *kgo.Client) cluster {
	return cluster{name: name, cl: cl, adm: kadm.NewClient(cl)}
}

// topicMeta is what a partition runner needs to address a topic partition.
type topicMeta struct {
	id         [16]byte
	partitions int
	leader     int32 // leader of the mirrored partition, -1 if none
	epoch      int32 // its leader epoch, sent with fetches so a stale leader is refused (KIP-320)
}

// metadata asks the cluster (never a cache: leaders move) for a topic's id, partition count
// and the leader of one partition.
func (c cluster) metadata(ctx context.Context, topic string, partition int32) (topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return topicMeta{}, authErr(c.name, "describe topic "+topic, err)
	}
	if len(resp.Topics) != 1 {
		return topicMeta{}, fmt.Errorf("%s metadata for %q: %d topics in response", c.name, topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		if err == kerr.UnknownTopicOrPartition {
			return topicMeta{}, &UnknownTopicError{Cluster: c.name, Topic: topic}
		}
		return topicMeta{}, authErr(c.name, "describe topic "+topic, err)
	}
	meta := topicMeta{id: t.TopicID, partitions: len(t.Partitions), leader: -1}
	for _, p := range t.Partitions {
		if p.Partition == partition {
			meta.leader, meta.epoch = p.Leader, p.LeaderEpoch
		}
	}
	return meta, nil
}

// fetched is one partition's part of a fetch response.
type fetched struct {
	batches          []rawBatch
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
}

// fetch reads raw batches from the partition leader, read_uncommitted (the mirror needs
// open-transaction data and markers, up to the high watermark). The data path fetches
// through a brokerFetcher instead; this one-partition fetch serves the checks at session
// start.
func (c cluster) fetch(ctx context.Context, meta topicMeta, topic string, partition int32, offset int64, maxBytes int32) (fetched, error) {
	req := newFetchRequest(maxBytes)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, meta.id
	rt.Partitions = append(rt.Partitions, fetchPartition(meta, partition, offset, maxBytes))
	req.Topics = append(req.Topics, rt)

	var resp *kmsg.FetchResponse
	for {
		kresp, err := c.cl.Broker(int(meta.leader)).Request(ctx, req)
		if err != nil {
			return fetched{}, err
		}
		resp = kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fetched{}, authErr(c.name, "fetch from "+topic, err)
		}
		if !throttled(resp) {
			break
		}
		if err := sleep(ctx, time.Duration(resp.ThrottleMillis)*time.Millisecond); err != nil {
			return fetched{}, err
		}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fetched{}, fmt.Errorf("%s fetch of %s[%d]: unexpected response shape", c.name, topic, partition)
	}
	return c.fetchedPartition(topic, offset, &resp.Topics[0].Partitions[0])
}

// fetchMaxWaitMillis is how long a fetch waits for data.
const fetchMaxWaitMillis = 250

// newFetchRequest is a sessionless, read_uncommitted fetch that waits up to
// fetchMaxWaitMillis for data and returns at most maxBytes.
func newFetchRequest(maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = fetchMaxWaitMillis
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.IsolationLevel = 0
	req.SessionEpoch = -1
	return req
}

// fetchPartition asks for one partition from offset.
func fetchPartition(meta topicMeta, partition int32, offset int64, maxBytes int32) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = maxBytes
	// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH are retriable: the session restarts with
	// fresh metadata.
	rp.CurrentLeaderEpoch = meta.epoch
	rp.LogStartOffset = -1
	return rp
}

// throttled tells a broker's answer over its quota: at once, with no partitions at all and
// the time to wait (KafkaApis, FetchSession.getThrottledResponse). Not an answer: ask again.
func throttled(resp *kmsg.FetchResponse) bool {
	return len(resp.Topics) == 0 && resp.ThrottleMillis > 0
}

// fetchedPartition is one partition's answer, fetched from offset.
func (c cluster) fetchedPartition(topic string, offset int64, p *kmsg.FetchResponseTopicPartition) (fetched, error) {
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return fetched{}, authErr(c.name, "fetch from "+topic, err)
	}
	batches, err := splitBatches(p.RecordBatches)
	if err != nil {
		return fetched{}, fmt.Errorf("%s %s[%d] at offset %d: %w", c.name, topic, p.Partition, offset, err)
	}
	return fetched{batches: batches, highWatermark: p.HighWatermark, lastStableOffset: p.LastStableOffset, logStartOffset: p.LogStartOffset}, nil
}

// produce sends one batch of a replayed transaction (its transactional id is the request's)
// with acks=all to the partition leader and returns the base offset the broker assigned.
// Non-transactional batches go through the leader's brokerProducer, grouped with other
// partitions'.
func (c cluster) produce(ctx context.Context, leader int32, topic string, id [16]byte, partition int32, batch []byte, txnID *string) (int64, error) {
	req := newProduceRequest(txnID)
	addProduce(req, 0, topic, id, partition, batch)

	if err := lease.Err(ctx); err != nil {
		return 0, err
	}
	// Once the request is on its way, its answer is awaited even when ctx ends (bounded by
	// the request's own timeout): whoever stops this writer relies on its return meaning
	// that nothing it sent can still land (the next owner of the partition starts then).
	reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(req.TimeoutMillis)*time.Millisecond+10*time.Second)
	defer cancel()
	sent := make(chan struct{})
	var once sync.Once
	kreq := wireOrdered{req, func() { once.Do(func() { close(sent) }) }}
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-sent:
		default:
			cancel()
		}
	})
	defer stop()
	kresp, err := c.cl.Broker(int(leader)).Request(reqCtx, kreq)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return 0, err
	}
	return c.producedPartition(produceAnswers(kresp.(*kmsg.ProduceResponse)), topic, id, partition)
}

// wireOrdered is a produce request that reports when kgo serializes it. kgo queues a broker's
// requests in the order Request is called and one goroutine drains the queue, serializing and
// writing each request before the next; the broker handles one connection's requests in order.
// (kgo applies its own acks only to a *kmsg.ProduceRequest; this request keeps acks=all.)
type wireOrdered struct {
	*kmsg.ProduceRequest
	onWire func()
}

func (r wireOrdered) AppendTo(dst []byte) []byte {
	r.onWire()
	return r.ProduceRequest.AppendTo(dst)
}

// epochEnd asks the partition leader where the log of leader epoch `epoch` ends
// (OffsetForLeaderEpoch): the start of the next epoch, or the log end for the current one.
func (c cluster) epochEnd(ctx context.Context, meta topicMeta, topic string, partition, epoch int32) (int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, meta.epoch, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.cl.Broker(int(meta.leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("%s offsets for leader epoch of %s[%d]: unexpected response shape", c.name, topic, partition)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, authErr(c.name, "describe leader epochs of "+topic, err)
	}
	return p.EndOffset, nil
}

// offsets returns a partition's log start and high watermark (read_uncommitted end).
func (c cluster) offsets(ctx context.Context, topic string, partition int32) (start, end int64, err error) {
	if start, err = c.listOffset(ctx, topic, partition, -2); err != nil {
		return 0, 0, err
	}
	if end, err = c.listOffset(ctx, topic, partition, -1); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

// listOffset asks the partition's leader for one offset of one partition: -2 its log
// start, -1 its end. It lists no other partition of the topic: a hole's marker is awaited
// with one small request, however many partitions the topic has.
func (c cluster) listOffset(ctx context.Context, topic string, partition int32, timestamp int64) (int64, error) {
	tp := topicPartition{topic, partition}
	got := c.listOffsets(ctx, []topicPartition{tp}, timestamp)[tp]
	return got.offset, got.err
}

type topicPartition struct {
	topic     string
	partition int32
}

// listedOffset is one partition's answer to listOffsets.
type listedOffset struct {
	offset int64
	err    error
}

// partitionOffsets is a partition's log start and end, or why they could not be listed.
type partitionOffsets struct {
	start, end listedOffset
}

// logOffsets lists the log start and end of partitions tps.
func (c cluster) logOffsets(ctx context.Context, tps []topicPartition) map[topicPartition]partitionOffsets {
	starts, ends := c.listOffsets(ctx, tps, -2), c.listOffsets(ctx, tps, -1)
	out := make(map[topicPartition]partitionOffsets, len(tps))
	for _, tp := range tps {
		out[tp] = partitionOffsets{starts[tp], ends[tp]}
	}
	return out
}

// listOffsets asks for one offset (-2 log start, -1 end) of each of partitions tps, in one
// request per partition leader (kgo splits ListOffsets by leader). Every partition of tps
// gets an answer or an error of its own.
func (c cluster) listOffsets(ctx context.Context, tps []topicPartition, timestamp int64) map[topicPartition]listedOffset {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.partition, timestamp, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	out := make(map[topicPartition]listedOffset, len(tps))
	for _, shard := range c.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			for _, t := range shard.Req.(*kmsg.ListOffsetsRequest).Topics {
				for _, p := range t.Partitions {
					out[topicPartition{t.Topic, p.Partition}] = listedOffset{err: authErr(c.name, "list offsets of "+t.Topic, shard.Err)}
				}
			}
			continue
		}
		for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				o := listedOffset{offset: p.Offset}
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					o = listedOffset{err: authErr(c.name, "list offsets of "+t.Topic, err)}
				}
				out[topicPartition{t.Topic, p.Partition}] = o
			}
		}
	}
	for _, tp := range tps {
		if _, ok := out[tp]; !ok {
			out[tp] = listedOffset{err: fmt.Errorf("%s %s[%d]: no offsets returned", c.name, tp.topic, tp.partition)}
		}
	}
	return out
}

// deleteRecords moves the partition's log start to offset.
func (c cluster) deleteRecords(ctx context.Context, topic string, partition int32, offset int64) error {
	resps, err := c.adm.DeleteRecords(ctx, kadm.Offsets{topic: {partition: {Topic: topic, Partition: partition, At: offset, LeaderEpoch: -1}}})
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return authErr(c.name, fmt.Sprintf("delete records of %s[%d] below offset %d", topic, partition, offset), err)
	}
	return nil
}

// destTopic is what the data path needs of a destination topic's effective configs.
type destTopic struct {
	compacted       bool
	maxMessageBytes int    // the largest batch the topic accepts, before and after recompression; 0 if not reported
	compression     string // compression.type: "producer" keeps a batch's codec, any other value recompresses to it
}

// codecs are compression.type's values by a batch's codec attribute.
var codecs = map[string]int16{"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// keeps reports whether the broker appends a batch of codec as it is: otherwise it
// recompresses it to the topic's compression.type and checks max.message.bytes again
// (LogValidator).
func (d destTopic) keeps(codec int16) bool {
	c, ok := codecs[d.compression]
	return !ok || c == codec
}

// fillerCodec is the codec filler is written in: the one the topic keeps, zstd if any.
func (d destTopic) fillerCodec() int16 {
	if c, ok := codecs[d.compression]; ok {
		return c
	}
	return codecs["zstd"]
}

// topicConfig reads a topic's effective cleanup.policy, max.message.bytes and compression.type.
func (c cluster) topicConfig(ctx context.Context, topic string) (destTopic, error) {
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return destTopic{}, authErr(c.name, "describe configs of "+topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return destTopic{}, authErr(c.name, "describe configs of "+topic, err)
	}
	d := destTopic{compression: "producer"}
	for _, cfg := range rc.Configs {
		if cfg.Value == nil {
			continue
		}
		switch cfg.Key {
		case "cleanup.policy":
			d.compacted = slices.Contains(strings.Split(*cfg.Value, ","), "compact")
		case "max.message.bytes":
			if n, err := strconv.Atoi(*cfg.Value); err == nil && n > 0 {
				d.maxMessageBytes = n
			}
		case "compression.type":
			d.compression = *cfg.Value
		}
	}
	return d, nil
}

// initProducerID asks for a producer id: idempotent when txnID is nil, otherwise the
// transactional id's (fencing any earlier instance of it).
func (c cluster) initProducerID(ctx context.Context, txnID *string, timeoutMillis int32) (producerIdentity, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = txnID
	req.TransactionTimeoutMillis = timeoutMillis
	req.ProducerID = -1
	req.ProducerEpoch = -1
	var resp *kmsg.InitProducerIDResponse
	err := retryConcurrentTxn(ctx, func() (err error) {
		if resp, err = req.RequestWith(ctx, c.cl); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return err
	})
	if err != nil {
		return producerIdentity{}, authErr(c.name, "initialize a producer id", err)
	}
	return producerIdentity{id: resp.ProducerID, epoch: resp.ProducerEpoch}, nil
}

func (c cluster) addPartitionToTxn(ctx context.Context, txnID string, p producerIdentity, topic string, partition int32) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID = p.id
	req.ProducerEpoch = p.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	err := retryConcurrentTxn(ctx, func() error {
		resp, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			return err
		}
		err = kerr.ErrorForCode(resp.ErrorCode)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err == nil {
					err = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		}
		return err
	})
	if err != nil {
		return authErr(c.name, "add "+topic+" to transaction "+txnID, err)
	}
	return nil
}

// endTxn commits or aborts; EndTxn v5+ (KIP-890) bumps the epoch, which is returned.
func (c cluster) endTxn(ctx context.Context, txnID string, p producerIdentity, commit bool) (producerIdentity, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID = p.id
	req.ProducerEpoch = p.epoch
	req.Commit = commit
	var resp *kmsg.EndTxnResponse
	err := retryConcurrentTxn(ctx, func() (err error) {
		if resp, err = req.RequestWith(ctx, c.cl); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return err
	})
	if err != nil {
		return p, authErr(c.name, "end transaction "+txnID, err)
	}
	if resp.Version >= 5 && resp.ProducerID >= 0 {
		return producerIdentity{id: resp.ProducerID, epoch: resp.ProducerEpoch}, nil
	}
	return p, nil
}

// retryConcurrentTxn retries a transaction request in place while the coordinator answers
// CONCURRENT_TRANSACTIONS: a real one answers EndTxn before the markers are written and keeps
// the id in PrepareCommit/PrepareAbort until they are (TransactionCoordinator.scala), so the
// next request right after a marker often gets it. Java's producer backs off 20 ms. Past
// concurrentTxnPatience the error goes to the session, which starts over.
func retryConcurrentTxn(ctx context.Context, fn func() error) error {
	wait := 5 * time.Millisecond
	deadline := time.Now().Add(concurrentTxnPatience)
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) || time.Now().After(deadline) {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

const concurrentTxnPatience = 30 * time.Second

// bumpsEpochPerTxn reports whether the cluster's EndTxn bumps the producer epoch (v5+,
// KIP-890), which restarts sequences at 0 for every transaction.
func (c cluster) bumpsEpochPerTxn(ctx context.Context) (bool, error) {
	versions, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return false, err
	}
	bumps := false
	versions.Each(func(v kadm.BrokerApiVersions) {
		if maxV, ok := v.KeyMaxVersion(int16(kmsg.EndTxn)); ok && maxV >= 5 && v.Err == nil {
			bumps = true
		}
	})
	return bumps, nil
}

// maxTransactionTimeout is the broker's transaction.max.timeout.ms (0 when it does not say):
// the longest transaction timeout its coordinator accepts, and so the longest a replayed
// transaction can stay open before the coordinator aborts it.
func (c cluster) maxTransactionTimeout(ctx context.Context, broker int32) (time.Duration, error) {
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return 0, authErr(c.name, "describe broker configs", err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return 0, authErr(c.name, "describe broker configs", rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Key == "transaction.max.timeout.ms" && cfg.Value != nil {
				ms, err := strconv.ParseInt(*cfg.Value, 10, 64)
				if err != nil || ms <= 0 {
					return 0, nil
				}
				return time.Duration(ms) * time.Millisecond, nil
			}
		}
	}
	return 0, nil
}
