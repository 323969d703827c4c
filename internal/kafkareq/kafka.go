// Package kafkareq is the I/O edge of the data path: raw Kafka requests over franz-go. Fetch
// and Produce are sent straight to the partition leader (kgo does not route raw requests by
// partition); transaction requests go through kgo's coordinator routing.
package kafkareq

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
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// Cluster is one side of a mirror: a client and the role it plays, for error messages.
type Cluster struct {
	Name   string // "source" or "destination"
	Client *kgo.Client
	Admin  *kadm.Client
}

func NewCluster(name string, cl *kgo.Client) Cluster {
	return Cluster{Name: name, Client: cl, Admin: kadm.NewClient(cl)}
}

// TopicMeta is what a partition runner needs to address a topic partition.
type TopicMeta struct {
	ID         [16]byte
	Partitions int
	Leader     int32 // leader of the mirrored partition, -1 if none
	Epoch      int32 // its leader epoch, sent with fetches so a stale leader is refused (KIP-320)
}

// Metadata asks the cluster (never a cache: leaders move) for a topic's id, partition count
// and the leader of one partition.
func (c Cluster) Metadata(ctx context.Context, topic string, partition int32) (TopicMeta, error) {
	t, err := c.TopicMetadata(ctx, topic)
	if err != nil {
		return TopicMeta{}, err
	}
	return t.Of(partition), nil
}

// Topic is what the cluster said of a topic: its id and every partition's leader.
type Topic struct {
	ID         [16]byte
	Partitions []kmsg.MetadataResponseTopicPartition
}

// Of is what a partition runner needs of the topic's partition.
func (t Topic) Of(partition int32) TopicMeta {
	meta := TopicMeta{ID: t.ID, Partitions: len(t.Partitions), Leader: -1}
	for _, p := range t.Partitions {
		if p.Partition == partition {
			meta.Leader, meta.Epoch = p.Leader, p.LeaderEpoch
		}
	}
	return meta
}

// TopicMetadata asks the cluster (never a cache: leaders move) for a topic's id and
// partitions.
func (c Cluster) TopicMetadata(ctx context.Context, topic string) (Topic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.Client)
	if err != nil {
		return Topic{}, mirrorerr.WrapAuth(c.Name, "describe topic "+topic, err)
	}
	if len(resp.Topics) != 1 {
		return Topic{}, fmt.Errorf("%s metadata for %q: %d topics in response", c.Name, topic, len(resp.Topics))
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		if err == kerr.UnknownTopicOrPartition {
			return Topic{}, &mirrorerr.UnknownTopicError{Cluster: c.Name, Topic: topic}
		}
		return Topic{}, mirrorerr.WrapAuth(c.Name, "describe topic "+topic, err)
	}
	return Topic{ID: t.TopicID, Partitions: t.Partitions}, nil
}

// Fetched is one partition's part of a fetch response.
type Fetched struct {
	Batches          []recordbatch.Batch
	HighWatermark    int64
	LastStableOffset int64
	LogStartOffset   int64
}

// Fetch reads raw batches from the partition leader, read_uncommitted (the mirror needs
// open-transaction data and markers, up to the high watermark). The data path fetches
// through a brokerFetcher instead; this one-partition fetch serves the checks at session
// start.
func (c Cluster) Fetch(ctx context.Context, meta TopicMeta, topic string, partition int32, offset int64, maxBytes int32) (Fetched, error) {
	req := NewFetchRequest(maxBytes)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, meta.ID
	rt.Partitions = append(rt.Partitions, FetchPartition(meta, partition, offset, maxBytes))
	req.Topics = append(req.Topics, rt)

	var resp *kmsg.FetchResponse
	for {
		kresp, err := c.Client.Broker(int(meta.Leader)).Request(ctx, req)
		if err != nil {
			return Fetched{}, err
		}
		resp = kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return Fetched{}, mirrorerr.WrapAuth(c.Name, "fetch from "+topic, err)
		}
		if !Throttled(resp) {
			break
		}
		if err := Sleep(ctx, time.Duration(resp.ThrottleMillis)*time.Millisecond); err != nil {
			return Fetched{}, err
		}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return Fetched{}, fmt.Errorf("%s fetch of %s[%d]: unexpected response shape", c.Name, topic, partition)
	}
	return c.FetchedPartition(topic, offset, &resp.Topics[0].Partitions[0])
}

// FetchMaxWaitMillis is how long a fetch waits for data.
const FetchMaxWaitMillis = 250

// NewFetchRequest is a sessionless, read_uncommitted fetch that waits up to
// FetchMaxWaitMillis for data and returns at most maxBytes.
func NewFetchRequest(maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = FetchMaxWaitMillis
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.IsolationLevel = 0
	req.SessionEpoch = -1
	return req
}

// FetchPartition asks for one partition from offset.
func FetchPartition(meta TopicMeta, partition int32, offset int64, maxBytes int32) kmsg.FetchRequestTopicPartition {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = maxBytes
	// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH are retriable: the session restarts with
	// fresh metadata.
	rp.CurrentLeaderEpoch = meta.Epoch
	rp.LogStartOffset = -1
	return rp
}

// Throttled tells a broker's answer over its quota: at once, with no partitions at all and
// the time to wait (KafkaApis, FetchSession.getThrottledResponse). Not an answer: ask again.
func Throttled(resp *kmsg.FetchResponse) bool {
	return len(resp.Topics) == 0 && resp.ThrottleMillis > 0
}

// FetchedPartition is one partition's answer, fetched from offset.
func (c Cluster) FetchedPartition(topic string, offset int64, p *kmsg.FetchResponseTopicPartition) (Fetched, error) {
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return Fetched{}, mirrorerr.WrapAuth(c.Name, "fetch from "+topic, err)
	}
	batches, err := recordbatch.Split(p.RecordBatches)
	if err != nil {
		return Fetched{}, fmt.Errorf("%s %s[%d] at offset %d: %w", c.Name, topic, p.Partition, offset, err)
	}
	return Fetched{Batches: batches, HighWatermark: p.HighWatermark, LastStableOffset: p.LastStableOffset, LogStartOffset: p.LogStartOffset}, nil
}

// Produce sends one batch of a replayed transaction (its transactional id is the request's)
// with acks=all to the partition leader and returns the base offset the broker assigned.
// Non-transactional batches go through the leader's brokerProducer, grouped with other
// partitions'.
func (c Cluster) Produce(ctx context.Context, leader int32, topic string, id [16]byte, partition int32, batch []byte, txnID *string) (int64, error) {
	req := NewProduceRequest(txnID)
	AddProduce(req, 0, topic, id, partition, batch)

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
	kreq := WireOrdered{req, func() { once.Do(func() { close(sent) }) }}
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-sent:
		default:
			cancel()
		}
	})
	defer stop()
	kresp, err := c.Client.Broker(int(leader)).Request(reqCtx, kreq)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return 0, err
	}
	return c.ProducedPartition(ProduceAnswers(kresp.(*kmsg.ProduceResponse)), topic, id, partition)
}

// WireOrdered is a produce request that reports when kgo serializes it. kgo queues a broker's
// requests in the order Request is called and one goroutine drains the queue, serializing and
// writing each request before the next; the broker handles one connection's requests in order.
// (kgo applies its own acks only to a *kmsg.ProduceRequest; this request keeps acks=all.)
type WireOrdered struct {
	*kmsg.ProduceRequest
	OnWire func()
}

func (r WireOrdered) AppendTo(dst []byte) []byte {
	r.OnWire()
	return r.ProduceRequest.AppendTo(dst)
}

// EpochEnd asks the partition leader where the log of leader epoch `epoch` ends
// (OffsetForLeaderEpoch): the start of the next epoch, or the log end for the current one.
func (c Cluster) EpochEnd(ctx context.Context, meta TopicMeta, topic string, partition, epoch int32) (int64, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, meta.Epoch, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := c.Client.Broker(int(meta.Leader)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("%s offsets for leader epoch of %s[%d]: unexpected response shape", c.Name, topic, partition)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, mirrorerr.WrapAuth(c.Name, "describe leader epochs of "+topic, err)
	}
	return p.EndOffset, nil
}

// HighWatermarkBehind returns a SourceBehindError when the partition's high watermark hw lies
// below end while its leader's log (OffsetForLeaderEpoch of the current epoch answers its log
// end) holds the offsets up to end: a leader elected a moment ago learns the high watermark
// its predecessor advertised only from its followers' next fetches, so for a while it answers
// one below offsets its log holds and readers of the old leader read. Nil when its log ends
// below end too, or the broker keeps no leader epochs (meta.Epoch < 0).
func (c Cluster) HighWatermarkBehind(ctx context.Context, meta TopicMeta, topic string, partition int32, end, hw int64) (*mirrorerr.SourceBehindError, error) {
	if meta.Epoch < 0 {
		return nil, nil
	}
	logEnd, err := c.EpochEnd(ctx, meta, topic, partition, meta.Epoch)
	if err != nil || logEnd < end {
		return nil, err
	}
	return &mirrorerr.SourceBehindError{Topic: topic, Partition: partition, DestinationEnd: end, SourceHighWatermark: hw, SourceLogEnd: logEnd}, nil
}

// Offsets returns a partition's log start and high watermark (read_uncommitted end).
func (c Cluster) Offsets(ctx context.Context, topic string, partition int32) (start, end int64, err error) {
	if start, err = c.ListOffset(ctx, topic, partition, -2); err != nil {
		return 0, 0, err
	}
	if end, err = c.ListOffset(ctx, topic, partition, -1); err != nil {
		return 0, 0, err
	}
	return start, end, nil
}

// ListOffset asks the partition's leader for one offset of one partition: -2 its log
// start, -1 its end. It lists no other partition of the topic: a hole's marker is awaited
// with one small request, however many partitions the topic has.
func (c Cluster) ListOffset(ctx context.Context, topic string, partition int32, timestamp int64) (int64, error) {
	tp := TopicPartition{Topic: topic, Partition: partition}
	got := c.ListOffsets(ctx, []TopicPartition{tp}, timestamp)[tp]
	return got.Offset, got.Err
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ListedOffset is one partition's answer to ListOffsets.
type ListedOffset struct {
	Offset int64
	Err    error
}

// PartitionOffsets is a partition's log start and end, or why they could not be listed.
type PartitionOffsets struct {
	Start, End ListedOffset
}

// LogOffsets lists the log start and end of partitions tps.
func (c Cluster) LogOffsets(ctx context.Context, tps []TopicPartition) map[TopicPartition]PartitionOffsets {
	starts, ends := c.ListOffsets(ctx, tps, -2), c.ListOffsets(ctx, tps, -1)
	out := make(map[TopicPartition]PartitionOffsets, len(tps))
	for _, tp := range tps {
		out[tp] = PartitionOffsets{Start: starts[tp], End: ends[tp]}
	}
	return out
}

// ListOffsets asks for one offset (-2 log start, -1 end) of each of partitions tps, in one
// request per partition leader (kgo splits ListOffsets by leader). Every partition of tps
// gets an answer or an error of its own.
func (c Cluster) ListOffsets(ctx context.Context, tps []TopicPartition, timestamp int64) map[TopicPartition]ListedOffset {
	out := make(map[TopicPartition]ListedOffset, len(tps))
	for _, shard := range c.Client.RequestSharded(ctx, listOffsetsRequest(tps, timestamp)) {
		resp, _ := shard.Resp.(*kmsg.ListOffsetsResponse)
		c.readListedOffsets(out, shard.Req.(*kmsg.ListOffsetsRequest), resp, shard.Err)
	}
	for _, tp := range tps {
		if _, ok := out[tp]; !ok {
			out[tp] = ListedOffset{Err: fmt.Errorf("%s %s[%d]: no offsets returned", c.Name, tp.Topic, tp.Partition)}
		}
	}
	return out
}

// EndOffsetsOnce lists the end offset (high watermark) of every partition of topics with one
// ListOffsets request to each leader, sent once. A partition its leader answers with an error
// gets that error (a *kerr.Error) while the others get their offsets: kgo's sharded
// ListOffsets sends a leader's whole request again until every partition in it answers, for
// seconds while a broker creates a new topic's partition logs one after another. A partition
// whose leader did not answer gets that failure, not a *kerr.Error; a topic the cluster does
// not know has no entries. err is a metadata request that failed.
func (c Cluster) EndOffsetsOnce(ctx context.Context, topics []string) (map[TopicPartition]ListedOffset, error) {
	meta, err := c.Admin.Metadata(ctx, topics...)
	if err != nil {
		return nil, mirrorerr.WrapAuth(c.Name, "read the metadata of "+strings.Join(topics, ", "), err)
	}
	out := map[TopicPartition]ListedOffset{}
	byLeader := map[int32][]TopicPartition{}
	for _, td := range meta.Topics {
		if td.Err != nil {
			continue
		}
		for _, pd := range td.Partitions {
			tp := TopicPartition{Topic: td.Topic, Partition: pd.Partition}
			switch {
			case pd.Err != nil:
				out[tp] = ListedOffset{Err: pd.Err}
			case pd.Leader < 0:
				out[tp] = ListedOffset{Err: kerr.LeaderNotAvailable}
			default:
				byLeader[pd.Leader] = append(byLeader[pd.Leader], tp)
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for leader, tps := range byLeader {
		wg.Go(func() {
			req := listOffsetsRequest(tps, -1)
			kresp, err := c.Client.Broker(int(leader)).Request(ctx, req)
			resp, _ := kresp.(*kmsg.ListOffsetsResponse)
			mu.Lock()
			defer mu.Unlock()
			c.readListedOffsets(out, req, resp, err)
		})
	}
	wg.Wait()
	return out, nil
}

// listOffsetsRequest asks for one offset (-2 log start, -1 end) of each of tps.
func listOffsetsRequest(tps []TopicPartition, timestamp int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, tp := range tps {
		i, ok := byTopic[tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.Topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.Topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.Partition, timestamp, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// readListedOffsets puts into out the answer to req: each partition's offset or error, or
// err for every partition req asked for.
func (c Cluster) readListedOffsets(out map[TopicPartition]ListedOffset, req *kmsg.ListOffsetsRequest, resp *kmsg.ListOffsetsResponse, err error) {
	if err != nil || resp == nil {
		if err == nil {
			err = fmt.Errorf("%s: no ListOffsets response", c.Name)
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{Topic: t.Topic, Partition: p.Partition}] = ListedOffset{Err: mirrorerr.WrapAuth(c.Name, "list offsets of "+t.Topic, err)}
			}
		}
		return
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			o := ListedOffset{Offset: p.Offset}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				o = ListedOffset{Err: mirrorerr.WrapAuth(c.Name, "list offsets of "+t.Topic, err)}
			}
			out[TopicPartition{Topic: t.Topic, Partition: p.Partition}] = o
		}
	}
}

// DeleteRecords moves the partition's log start to offset. Apache Kafka's leader moves its
// log start at once, then answers only when every replica on a live broker took it, or
// REQUEST_TIMED_OUT: a follower that missed the new log start takes it with the partition's
// next change (seen on 4.4: the previous leader, after two leader moves in a second, did not
// for minutes on an idle partition). The log start is what readers see, so a leader already
// there is done; followers that lag it hold no reader back.
func (c Cluster) DeleteRecords(ctx context.Context, topic string, partition int32, offset int64) error {
	resps, err := c.Admin.DeleteRecords(ctx, kadm.Offsets{topic: {partition: {Topic: topic, Partition: partition, At: offset, LeaderEpoch: -1}}})
	if err == nil {
		err = resps.Error()
	}
	if errors.Is(err, kerr.RequestTimedOut) {
		if start, lerr := c.ListOffset(ctx, topic, partition, -2); lerr == nil && start >= offset {
			return nil
		}
	}
	if err != nil {
		return mirrorerr.WrapAuth(c.Name, fmt.Sprintf("delete records of %s[%d] below offset %d", topic, partition, offset), err)
	}
	return nil
}

// DestinationTopic is what the data path needs of a destination topic's effective configs.
type DestinationTopic struct {
	Compacted       bool
	MaxMessageBytes int    // the largest batch the topic accepts, before and after recompression; 0 if not reported
	Compression     string // compression.type: "producer" keeps a batch's codec, any other value recompresses to it
}

// codecs are compression.type's values by a batch's codec attribute.
var codecs = map[string]int16{"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// Keeps reports whether the broker appends a batch of codec as it is: otherwise it
// recompresses it to the topic's compression.type and checks max.message.bytes again
// (LogValidator).
func (d DestinationTopic) Keeps(codec int16) bool {
	c, ok := codecs[d.Compression]
	return !ok || c == codec
}

// FillerCodec is the codec filler is written in: the one the topic keeps, zstd if any.
func (d DestinationTopic) FillerCodec() int16 {
	if c, ok := codecs[d.Compression]; ok {
		return c
	}
	return codecs["zstd"]
}

// TopicConfig reads a topic's effective cleanup.policy, max.message.bytes and compression.type.
func (c Cluster) TopicConfig(ctx context.Context, topic string) (DestinationTopic, error) {
	rcs, err := c.Admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return DestinationTopic{}, mirrorerr.WrapAuth(c.Name, "describe configs of "+topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return DestinationTopic{}, mirrorerr.WrapAuth(c.Name, "describe configs of "+topic, err)
	}
	d := DestinationTopic{Compression: "producer"}
	for _, cfg := range rc.Configs {
		if cfg.Value == nil {
			continue
		}
		switch cfg.Key {
		case "cleanup.policy":
			d.Compacted = slices.Contains(strings.Split(*cfg.Value, ","), "compact")
		case "max.message.bytes":
			if n, err := strconv.Atoi(*cfg.Value); err == nil && n > 0 {
				d.MaxMessageBytes = n
			}
		case "compression.type":
			d.Compression = *cfg.Value
		}
	}
	return d, nil
}

// InitProducerID asks for a producer id: idempotent when txnID is nil, otherwise the
// transactional id's (fencing any earlier instance of it).
func (c Cluster) InitProducerID(ctx context.Context, txnID *string, timeoutMillis int32) (recordbatch.Producer, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = txnID
	req.TransactionTimeoutMillis = timeoutMillis
	req.ProducerID = -1
	req.ProducerEpoch = -1
	var resp *kmsg.InitProducerIDResponse
	err := retryConcurrentTxn(ctx, func() (err error) {
		if resp, err = req.RequestWith(ctx, c.Client); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return err
	})
	if err != nil {
		return recordbatch.Producer{}, mirrorerr.WrapAuth(c.Name, "initialize a producer id", err)
	}
	return recordbatch.Producer{ID: resp.ProducerID, Epoch: resp.ProducerEpoch}, nil
}

func (c Cluster) AddPartitionToTxn(ctx context.Context, txnID string, p recordbatch.Producer, topic string, partition int32) error {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID = p.ID
	req.ProducerEpoch = p.Epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	err := retryConcurrentTxn(ctx, func() error {
		resp, err := req.RequestWith(ctx, c.Client)
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
		return mirrorerr.WrapAuth(c.Name, "add "+topic+" to transaction "+txnID, err)
	}
	return nil
}

// EndTxn commits or aborts; EndTxn v5+ (KIP-890) bumps the epoch, which is returned.
func (c Cluster) EndTxn(ctx context.Context, txnID string, p recordbatch.Producer, commit bool) (recordbatch.Producer, error) {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID = p.ID
	req.ProducerEpoch = p.Epoch
	req.Commit = commit
	var resp *kmsg.EndTxnResponse
	err := retryConcurrentTxn(ctx, func() (err error) {
		if resp, err = req.RequestWith(ctx, c.Client); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return err
	})
	if err != nil {
		return p, mirrorerr.WrapAuth(c.Name, "end transaction "+txnID, err)
	}
	if resp.Version >= 5 && resp.ProducerID >= 0 {
		return recordbatch.Producer{ID: resp.ProducerID, Epoch: resp.ProducerEpoch}, nil
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
		if err := Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

const concurrentTxnPatience = 30 * time.Second

// BumpsEpochPerTxn reports whether the cluster's EndTxn bumps the producer epoch (v5+,
// KIP-890), which restarts sequences at 0 for every transaction.
func (c Cluster) BumpsEpochPerTxn(ctx context.Context) (bool, error) {
	versions, err := c.Admin.ApiVersions(ctx)
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

// MaxTransactionTimeout is the broker's transaction.max.timeout.ms (0 when it does not say):
// the longest transaction timeout its coordinator accepts, and so the longest a replayed
// transaction can stay open before the coordinator aborts it.
func (c Cluster) MaxTransactionTimeout(ctx context.Context, broker int32) (time.Duration, error) {
	rcs, err := c.Admin.DescribeBrokerConfigs(ctx, broker)
	if err != nil {
		return 0, mirrorerr.WrapAuth(c.Name, "describe broker configs", err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return 0, mirrorerr.WrapAuth(c.Name, "describe broker configs", rc.Err)
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

// ProduceTimeoutMillis is a produce request's timeout on the broker; its answer is awaited
// up to 10 s longer.
const ProduceTimeoutMillis = 30000

// PartKey names a partition in requests and answers: by topic name (fetch and produce
// versions before 13) or by topic id.
type PartKey struct {
	Topic     string // for fetch versions before 13, which name topics
	ID        [16]byte
	Partition int32
}

// ErrNoAnswer: a full fetch answers every partition it asked for.
var ErrNoAnswer = errors.New("partition missing from the answer")

// NewProduceRequest is an acks=all produce request, of a replayed transaction when txnID is
// set.
func NewProduceRequest(txnID *string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = ProduceTimeoutMillis
	req.TransactionID = txnID
	return req
}

// AddProduce adds a partition's batch to req's topic at index ti (appended when ti is past
// the end).
func AddProduce(req *kmsg.ProduceRequest, ti int, topic string, id [16]byte, partition int32, batch []byte) {
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

// ProduceAnswers indexes a produce response's partitions. Answers name topics by id (v13+)
// or by name, never both.
func ProduceAnswers(resp *kmsg.ProduceResponse) map[PartKey]*kmsg.ProduceResponseTopicPartition {
	answers := map[PartKey]*kmsg.ProduceResponseTopicPartition{}
	if resp == nil {
		return answers
	}
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			answers[PartKey{t.Topic, t.TopicID, p.Partition}] = p
		}
	}
	return answers
}

// ProducedPartition is the base offset the destination assigned to a partition's batch, or
// its error.
func (c Cluster) ProducedPartition(answers map[PartKey]*kmsg.ProduceResponseTopicPartition, topic string, id [16]byte, partition int32) (int64, error) {
	p := answers[PartKey{Topic: topic, Partition: partition}]
	if p == nil {
		p = answers[PartKey{ID: id, Partition: partition}]
	}
	if p == nil {
		return 0, fmt.Errorf("%s produce to %s[%d]: %w", c.Name, topic, partition, ErrNoAnswer)
	}
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		if p.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
		}
		return 0, mirrorerr.WrapAuth(c.Name, "write to "+topic, err)
	}
	return p.BaseOffset, nil
}

// Sleep waits for d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ClusterID asks a cluster for its id (never a cached value: a changed source cluster id
// must be noticed).
func ClusterID(ctx context.Context, cl *kgo.Client) (string, error) {
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err == nil && resp.ErrorCode != 0 {
		err = fmt.Errorf("describe cluster: error code %d", resp.ErrorCode)
	}
	if err != nil {
		// Brokers before 2.8 have no DescribeCluster; Metadata carries the id too.
		meta, merr := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if merr != nil {
			return "", err
		}
		if meta.ClusterID == nil {
			return "", errors.New("the cluster reports no cluster id")
		}
		return *meta.ClusterID, nil
	}
	return resp.ClusterID, nil
}

// markerCoordinatorEpoch is the coordinator epoch of every marker the worker writes. The
// partition rejects a marker with a lower one than it recorded for the producer id
// (TRANSACTION_COORDINATOR_FENCED); the producer id must be one whose coordinator never
// writes a marker for it.
const markerCoordinatorEpoch = 0

// markerRequestTimeout bounds the wait for a WriteTxnMarkers answer.
const markerRequestTimeout = 40 * time.Second

// MarkerRun is N lone markers of one producer in one partition.
type MarkerRun struct {
	Topic     string
	Partition int32
	Producer  recordbatch.Producer
	Commit    bool
	N         int
}

// MarkerRunBytes is what a run's markers take in a request: each repeats the producer id and
// epoch, the result, the topic name, the partition and the coordinator epoch.
func MarkerRunBytes(topic string, n int) int { return n * (24 + len(topic)) }

// WriteMarkers appends the runs' markers at leader, which leads each run's partition, in
// one request; the broker appends them one after the other in request order. It answers each
// run: nil once its markers are in the log. A partition must not have two runs in a request.
// Once sent, the answer is awaited even when ctx ends, as for a produce: a writer that
// returned must have nothing left that can still land.
func (c Cluster) WriteMarkers(ctx context.Context, leader int32, runs []MarkerRun) []error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	type part struct {
		topic     string
		partition int32
	}
	index := map[part]int{}
	for i, r := range runs {
		index[part{r.Topic, r.Partition}] = i
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = r.Topic, []int32{r.Partition}
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = r.Producer.ID, r.Producer.Epoch, r.Commit
		m.CoordinatorEpoch = markerCoordinatorEpoch
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
		for range r.N {
			req.Markers = append(req.Markers, m)
		}
	}
	errs := make([]error, len(runs))
	reqCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markerRequestTimeout)
	defer cancel()
	kresp, err := c.Client.Broker(int(leader)).Request(reqCtx, req)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for _, rm := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				i, ok := index[part{rt.Topic, rp.Partition}]
				if err := kerr.ErrorForCode(rp.ErrorCode); ok && err != nil && errs[i] == nil {
					errs[i] = fmt.Errorf("%s write transaction markers to %s[%d]: %w", c.Name, rt.Topic, rp.Partition, err)
				}
			}
		}
	}
	return errs
}

// Supports asks the cluster whether broker answers requests of key at all (kgo picks the
// version; WriteTxnMarkers v0 was removed in Kafka 4.0, DescribeProducers came in 2.8).
func (c Cluster) Supports(ctx context.Context, broker int32, key kmsg.Key) (bool, error) {
	versions, err := c.Admin.ApiVersions(ctx)
	if err != nil {
		return false, err
	}
	v, ok := versions[broker]
	if !ok {
		return false, fmt.Errorf("%s broker %d did not answer ApiVersions", c.Name, broker)
	}
	if v.Err != nil {
		return false, v.Err
	}
	_, ok = v.KeyMaxVersion(int16(key))
	return ok, nil
}

// OpenTransactions returns the producers with a transaction open on a partition, with the
// offset where each began (DescribeProducers, asked of the partition leader).
func (c Cluster) OpenTransactions(ctx context.Context, topic string, partition int32) (map[int64]int64, error) {
	described, err := c.Admin.DescribeProducers(ctx, kadm.TopicsSet{topic: {partition: {}}})
	if err != nil {
		return nil, mirrorerr.WrapAuth(c.Name, "describe producers of "+topic, err)
	}
	p, ok := described[topic].Partitions[partition]
	if !ok {
		return nil, fmt.Errorf("%s describe producers of %s[%d]: no answer", c.Name, topic, partition)
	}
	if p.Err != nil {
		return nil, fmt.Errorf("%s describe producers of %s[%d]: %w", c.Name, topic, partition, p.Err)
	}
	open := map[int64]int64{}
	for _, ap := range p.ActiveProducers {
		if ap.CurrentTxnStartOffset >= 0 {
			open[ap.ProducerID] = ap.CurrentTxnStartOffset
		}
	}
	return open, nil
}
