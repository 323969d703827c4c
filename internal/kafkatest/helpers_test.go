package kafkatest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// markerGate holds strict mode's deferred markers until ch is closed, so a
// test can look at the window between EndTxn and the markers without racing
// a timer.
func markerGate(ch <-chan struct{}) Option { return func(c *config) { c.markerGate = ch } }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clusterWithT starts a cluster with opts holding topic "t" and returns a client to it.
func clusterWithT(t *testing.T, partitions int32, opts ...Option) *kgo.Client {
	t.Helper()
	c := New(t, opts...)
	c.CreateTopic(t, "t", partitions, nil)
	return c.Client(t)
}

// transaction produces recs in one transaction of txp and ends it with end.
func transaction(ctx context.Context, t *testing.T, txp *kgo.Client, end kgo.TransactionEndTry, recs ...*kgo.Record) {
	t.Helper()
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txp.EndTransaction(ctx, end); err != nil {
		t.Fatalf("ending the transaction (commit %v): %v", end, err)
	}
}

// rec is one record of a hand-built batch.
type rec struct {
	key, value []byte
	headers    []kmsg.Header
	ts         int64
}

func kv(k, v string, ts int64) rec {
	r := rec{value: []byte(v), ts: ts}
	if k != "" {
		r.key = []byte(k)
	}
	return r
}

// batchSpec is a RecordBatch header; zero values give a plain
// non-idempotent batch whose counts match its records.
type batchSpec struct {
	pid      int64
	epoch    int16
	seq      int32
	txn      bool
	gzip     bool
	lod      *int32 // overrides lastOffsetDelta
	count    *int32 // overrides recordCount
	explicit bool   // pid/epoch/seq as given (else -1/-1/-1 unless pid set)
	cut      int    // bytes cut off the end of the records before compressing and sealing
	damage   bool   // a byte of the compressed records flipped before sealing
	badCRC   bool   // the CRC field off by one
}

func i32(v int32) *int32 { return &v }

// buildBatch encodes recs as a RecordBatch v2 ready to produce.
func buildBatch(recs []rec, spec batchSpec) []byte {
	var first, maxTS int64
	if len(recs) > 0 {
		first, maxTS = recs[0].ts, recs[0].ts
	}
	var payload []byte
	for i, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.ts - first,
			OffsetDelta:      int32(i),
			Key:              r.key,
			Value:            r.value,
			Headers:          r.headers,
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // the Length varint 0 is one byte
		payload = kr.AppendTo(payload)
		maxTS = max(maxTS, r.ts)
	}
	payload = payload[:len(payload)-spec.cut]
	var attrs int16
	if spec.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(payload)
		_ = zw.Close()
		payload = buf.Bytes()
		attrs |= 1
	}
	if spec.damage {
		payload[len(payload)/2] ^= 0xff
	}
	if spec.txn {
		attrs |= attrTransactional
	}
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(recs)) - 1,
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              payload,
	}
	if spec.explicit || spec.pid != 0 {
		b.ProducerID, b.ProducerEpoch, b.FirstSequence = spec.pid, spec.epoch, spec.seq
	}
	if spec.lod != nil {
		b.LastOffsetDelta = *spec.lod
	}
	if spec.count != nil {
		b.NumRecords = *spec.count
	}
	enc := b.AppendTo(nil)
	b.Length = int32(len(enc) - 12)
	enc = b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(enc[21:], crc32c))
	if spec.badCRC {
		b.CRC++
	}
	return b.AppendTo(nil)
}

type target struct {
	topic     string
	partition int32
	batch     []byte
}

// produceRawTo sends one Produce request (one batch per partition) to the
// leader of the first target and returns the per-partition answers in
// request order.
func produceRawTo(t *testing.T, cl *kgo.Client, txid *string, targets ...target) []kmsg.ProduceResponseTopicPartition {
	t.Helper()
	ctx := testCtx(t)
	meta, err := describeTopic(ctx, cl, targets[0].topic)
	if err != nil || !meta.exists {
		t.Fatalf("metadata: %v (exists %v)", err, meta.exists)
	}
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	req.TransactionID = txid
	for _, tg := range targets {
		m, err := describeTopic(ctx, cl, tg.topic)
		if err != nil {
			t.Fatal(err)
		}
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = tg.topic, m.id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = tg.partition, tg.batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl.Broker(int(meta.leaders[targets[0].partition])))
	if err != nil {
		t.Fatalf("produce: %v", err)
	}
	var out []kmsg.ProduceResponseTopicPartition
	for i, tg := range targets {
		found := false
		for _, rt := range resp.Topics {
			if req.Version >= 13 && rt.TopicID != req.Topics[i].TopicID || req.Version < 13 && rt.Topic != tg.topic {
				continue
			}
			for _, rp := range rt.Partitions {
				if rp.Partition == tg.partition {
					out = append(out, rp)
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("produce v%d: no answer for %s/%d in %+v", req.Version, tg.topic, tg.partition, resp.Topics)
		}
	}
	return out
}

func produceRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceRawTo(t, cl, nil, target{topic, partition, batch})[0]
}

// mustProduce produces recs as one batch and returns its base offset.
func mustProduce(t *testing.T, cl *kgo.Client, topic string, partition int32, recs ...rec) int64 {
	t.Helper()
	rp := produceRaw(t, cl, topic, partition, buildBatch(recs, batchSpec{}))
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, partition, err)
	}
	return rp.BaseOffset
}

type offsets struct{ start, hw, lso int64 }

func partitionOffsets(t *testing.T, cl *kgo.Client, topic string, partition int32) offsets {
	t.Helper()
	ctx := testCtx(t)
	meta, err := describeTopic(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	br := cl.Broker(int(meta.leaders[partition]))
	var o offsets
	var errs [3]error
	o.start, errs[0] = listOffset(ctx, br, topic, partition, -2, 0)
	o.hw, errs[1] = listOffset(ctx, br, topic, partition, -1, 0)
	o.lso, errs[2] = listOffset(ctx, br, topic, partition, -1, 1)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// waitOffsets polls until the partition's offsets are want.
func waitOffsets(t *testing.T, cl *kgo.Client, topic string, partition int32, want offsets) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := partitionOffsets(t, cl, topic, partition)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%d: offsets %+v, want %+v", topic, partition, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readLog(t *testing.T, cl *kgo.Client, topic string, partition int32) *partLog {
	t.Helper()
	ctx := testCtx(t)
	meta, err := describeTopic(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	l, err := readPartition(ctx, cl, topic, meta, partition)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// layout renders a log as one letter per offset: d data, t transactional
// data, C commit, A abort, L lone abort, . gap.
func layout(l *partLog) string {
	var b []byte
	next := l.logStart
	for _, e := range l.entries {
		for ; next < e.offset; next++ {
			b = append(b, '.')
		}
		switch {
		case e.kind == kindData && e.txn:
			b = append(b, 't')
		case e.kind == kindData:
			b = append(b, 'd')
		case e.kind == kindCommit:
			b = append(b, 'C')
		case e.kind == kindAbort && e.lone:
			b = append(b, 'L')
		case e.kind == kindAbort:
			b = append(b, 'A')
		default:
			b = append(b, '?')
		}
		next = e.offset + 1
	}
	for ; next < l.hw; next++ {
		b = append(b, '.')
	}
	return string(b)
}

// rawTxn drives a transactional id with raw requests, as the mirror's
// transaction replay does.
type rawTxn struct {
	t     *testing.T
	cl    *kgo.Client
	id    string
	pid   int64
	epoch int16
	seq   map[int32]int32
}

func newRawTxn(t *testing.T, cl *kgo.Client, id string) *rawTxn {
	t.Helper()
	x := &rawTxn{t: t, cl: cl, id: id, seq: make(map[int32]int32)}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp, err := req.RequestWith(testCtx(t), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerID %q: %v", id, err)
	}
	x.pid, x.epoch = resp.ProducerID, resp.ProducerEpoch
	return x
}

// add sends AddPartitionsToTxn and returns the partition's error.
func (x *rawTxn) add(topic string, partition int32) error {
	x.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, x.pid, x.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{partition}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(x.t), x.cl)
	if err != nil {
		x.t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			return kerr.ErrorForCode(rp.ErrorCode)
		}
	}
	x.t.Fatalf("AddPartitionsToTxn: empty answer")
	return nil
}

func (x *rawTxn) mustAdd(topic string, partition int32) {
	x.t.Helper()
	if err := x.add(topic, partition); err != nil {
		x.t.Fatalf("AddPartitionsToTxn %s/%d: %v", topic, partition, err)
	}
}

// produce appends recs inside the transaction and returns the answer.
func (x *rawTxn) produce(topic string, partition int32, recs ...rec) kmsg.ProduceResponseTopicPartition {
	x.t.Helper()
	b := buildBatch(recs, batchSpec{pid: x.pid, epoch: x.epoch, seq: x.seq[partition], txn: true, explicit: true})
	rp := produceRawTo(x.t, x.cl, &x.id, target{topic, partition, b})[0]
	if rp.ErrorCode == 0 {
		x.seq[partition] += int32(len(recs))
	}
	return rp
}

func (x *rawTxn) mustProduce(topic string, partition int32, recs ...rec) int64 {
	x.t.Helper()
	rp := x.produce(topic, partition, recs...)
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		x.t.Fatalf("transactional produce: %v", err)
	}
	return rp.BaseOffset
}

// end sends EndTxn; on success with v5+ it adopts the new epoch and resets
// sequences, as KIP-890 requires.
func (x *rawTxn) end(commit bool) (*kmsg.EndTxnResponse, error) {
	x.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, x.pid, x.epoch, commit
	resp, err := req.RequestWith(testCtx(x.t), x.cl)
	if err != nil {
		x.t.Fatalf("EndTxn: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return resp, err
	}
	if resp.Version >= 5 {
		x.pid, x.epoch = resp.ProducerID, resp.ProducerEpoch
		x.seq = make(map[int32]int32)
	}
	return resp, nil
}

func (x *rawTxn) mustEnd(commit bool) {
	x.t.Helper()
	if _, err := x.end(commit); err != nil {
		x.t.Fatalf("EndTxn(commit=%v): %v", commit, err)
	}
}

// fakeTB records a Fatalf instead of ending the test, to test failures.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

// A test repeated in one process (-test.count) gets topics of its own: the shared real-broker
// clusters still hold the names its earlier run created.
func TestTopicForNamesARepeatedTestAnew(t *testing.T) {
	first, again := TopicFor(t, "x"), TopicFor(t, "x")
	const name = "TestTopicForNamesARepeatedTestAnew.x"
	if !strings.HasPrefix(first, name) || !strings.HasPrefix(again, name) || again == first {
		t.Fatalf("TopicFor gave %q, then %q: want two names, each after the test", first, again)
	}
}
