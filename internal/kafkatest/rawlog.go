package kafkatest

import (
	"context"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The comparator reads logs raw, batch by batch, with kmsg requests sent to
// the partition leader: kgo's consumer hides batch boundaries, control
// batches and gaps, which are exactly what "identical offset for offset"
// is about.

type entryKind int

const (
	kindData entryKind = iota + 1
	kindCommit
	kindAbort
	kindControl // a control record of another type
)

// logEntry is one offset that holds a record. Offsets without an entry are
// gaps.
type logEntry struct {
	offset    int64
	kind      entryKind
	ctrlType  int16
	batch     int // index into partLog.batches
	key       []byte
	value     []byte
	headers   []kmsg.Header
	timestamp int64
	txn       bool
	pid       int64
	lone      bool // abort marker closing no transaction data of its producer
	aborted   bool // transactional data whose transaction ended in an abort
}

// batchSpan is a stored batch's offset range, record count and codec. A
// compacted batch keeps its range but loses records.
type batchSpan struct {
	base, last int64
	records    int32
	codec      int16
}

func (b batchSpan) contiguous() bool { return b.last-b.base+1 == int64(b.records) }

func (b batchSpan) String() string {
	s := "s"
	if b.records == 1 {
		s = ""
	}
	return fmt.Sprintf("batch of offsets %d-%d holding %d record%s", b.base, b.last, b.records, s)
}

type partLog struct {
	logStart, hw, lso int64
	entries           []logEntry // ascending offsets in [logStart, hw)
	batches           []batchSpan
	controls          map[int64][]byte // control batches as stored, by base offset
}

type topicMeta struct {
	exists  bool
	id      [16]byte
	leaders map[int32]int32
}

// describeTopic reads the topic id and partition leaders with a raw Metadata
// request: kadm's metadata is cached and goes stale after elections.
func describeTopic(ctx context.Context, cl *kgo.Client, topic string) (topicMeta, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return topicMeta{}, fmt.Errorf("metadata for %q: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			return topicMeta{}, nil
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return topicMeta{}, fmt.Errorf("metadata for %q: %w", topic, err)
		}
		m := topicMeta{exists: true, id: t.TopicID, leaders: make(map[int32]int32)}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return topicMeta{}, fmt.Errorf("metadata for %q: partition %d has no leader", topic, p.Partition)
			}
			m.leaders[p.Partition] = p.Leader
		}
		return m, nil
	}
	return topicMeta{}, nil
}

// reader is who reads a log raw: a client, as the comparator and tests do, or the Cleaner,
// which reads kfake's own log while it cleans.
type reader struct {
	rack    string // of its fetches: the Cleaner's controls know their own by it
	replica int32  // of its ListOffsets: -1 a client, -2 (kfake's debugging id) the Cleaner
}

var asClient = reader{rack: readerRack, replica: -1}

func listOffset(ctx context.Context, br *kgo.Broker, topic string, partition int32, ts int64, isolation int8) (int64, error) {
	return asClient.listOffset(ctx, br, topic, partition, ts, isolation)
}

func (r reader) listOffset(ctx context.Context, br *kgo.Broker, topic string, partition int32, ts int64, isolation int8) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = r.replica
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = partition
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return 0, err
			}
			return p.Offset, nil
		}
	}
	return 0, fmt.Errorf("ListOffsets answered without partition %d", partition)
}

func (r reader) fetchRaw(ctx context.Context, br *kgo.Broker, topic string, id [16]byte, partition int32, offset int64) ([]byte, error) {
	const maxBytes = 32 << 20
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.IsolationLevel = 0 // read_uncommitted: everything up to the high watermark
	req.SessionEpoch = -1
	req.Rack = r.rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = maxBytes
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, br)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, err
			}
			return p.RecordBatches, nil
		}
	}
	return nil, fmt.Errorf("Fetch answered without partition %d", partition)
}

// readPartition reads one partition from its log start to its high
// watermark, raw.
func readPartition(ctx context.Context, cl *kgo.Client, topic string, meta topicMeta, partition int32) (*partLog, error) {
	return asClient.readPartition(ctx, cl, topic, meta, partition)
}

func (r reader) readPartition(ctx context.Context, cl *kgo.Client, topic string, meta topicMeta, partition int32) (*partLog, error) {
	leader, ok := meta.leaders[partition]
	if !ok {
		return nil, fmt.Errorf("no partition %d", partition)
	}
	br := cl.Broker(int(leader))
	var (
		l   partLog
		err error
	)
	if l.logStart, err = r.listOffset(ctx, br, topic, partition, -2, 0); err != nil {
		return nil, fmt.Errorf("log start offset: %w", err)
	}
	if l.hw, err = r.listOffset(ctx, br, topic, partition, -1, 0); err != nil {
		return nil, fmt.Errorf("high watermark: %w", err)
	}
	if l.lso, err = r.listOffset(ctx, br, topic, partition, -1, 1); err != nil {
		return nil, fmt.Errorf("last stable offset: %w", err)
	}

	next := l.logStart
	for next < l.hw {
		raw, err := r.fetchRaw(ctx, br, topic, meta.id, partition, next)
		if err != nil {
			return nil, fmt.Errorf("fetch at offset %d: %w", next, err)
		}
		progressed := false
		for _, rb := range splitBatches(raw) {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(rb); err != nil {
				return nil, fmt.Errorf("unreadable batch after offset %d: %w", next, err)
			}
			last := b.FirstOffset + int64(b.LastOffsetDelta)
			if last < next {
				continue // already read (a fetch may start at the batch holding next)
			}
			if b.Magic != 2 {
				return nil, fmt.Errorf("batch at offset %d has magic %d", b.FirstOffset, b.Magic)
			}
			if b.CRC != int32(crc32.Checksum(rb[21:], crc32c)) {
				return nil, fmt.Errorf("batch at offset %d is stored with a wrong CRC (consumers reject it)", b.FirstOffset)
			}
			recs, err := batchRecords(&b)
			if err != nil {
				return nil, fmt.Errorf("batch at offset %d: %w", b.FirstOffset, err)
			}
			idx := len(l.batches)
			l.batches = append(l.batches, batchSpan{base: b.FirstOffset, last: last, records: b.NumRecords, codec: b.Attributes & attrCodec})
			if b.Attributes&attrControl != 0 {
				if l.controls == nil {
					l.controls = map[int64][]byte{}
				}
				l.controls[b.FirstOffset] = append([]byte(nil), rb...)
			}
			for i := range recs {
				r := &recs[i]
				off := b.FirstOffset + int64(r.OffsetDelta)
				// Records below the log start that the first
				// batch still carries are not part of the log.
				if off < next || off < l.logStart || off >= l.hw {
					continue
				}
				if n := len(l.entries); n > 0 && l.entries[n-1].offset >= off {
					return nil, fmt.Errorf("offset %d appears twice or out of order", off)
				}
				e := logEntry{
					offset: off,
					batch:  idx,
					txn:    b.Attributes&attrTransactional != 0,
					pid:    b.ProducerID,
				}
				if b.Attributes&attrControl != 0 {
					var k kmsg.ControlRecordKey
					if err := k.ReadFrom(r.Key); err != nil {
						return nil, fmt.Errorf("control record at offset %d: %w", off, err)
					}
					e.ctrlType = int16(k.Type)
					switch k.Type {
					case kmsg.ControlRecordKeyTypeAbort:
						e.kind = kindAbort
					case kmsg.ControlRecordKeyTypeCommit:
						e.kind = kindCommit
					default:
						e.kind = kindControl
					}
				} else {
					e.kind = kindData
					e.key, e.value, e.headers = r.Key, r.Value, r.Headers
					e.timestamp = b.FirstTimestamp + r.TimestampDelta64
					if b.Attributes&0x08 != 0 { // LogAppendTime: consumers see the batch time
						e.timestamp = b.MaxTimestamp
					}
				}
				l.entries = append(l.entries, e)
			}
			next = last + 1
			progressed = true
		}
		if !progressed {
			break // nothing readable up to the high watermark: the rest are gaps
		}
	}
	l.classifyTransactions()
	return &l, nil
}

// classifyTransactions marks lone abort markers and aborted data.
func (l *partLog) classifyTransactions() {
	open := make(map[int64]bool) // producer id -> has transaction data since its last marker
	for i := range l.entries {
		e := &l.entries[i]
		switch e.kind {
		case kindData:
			if e.txn {
				open[e.pid] = true
			}
		default:
			e.lone = e.kind == kindAbort && !open[e.pid]
			delete(open, e.pid)
		}
	}
	next := make(map[int64]entryKind) // producer id -> kind of its next marker
	for i := len(l.entries) - 1; i >= 0; i-- {
		e := &l.entries[i]
		if e.kind == kindData {
			e.aborted = e.txn && next[e.pid] == kindAbort
		} else {
			next[e.pid] = e.kind
		}
	}
}
