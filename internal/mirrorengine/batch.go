package mirrorengine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Byte offsets of the RecordBatch v2 header fields the data path reads or rewrites.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
	batchHeaderLen     = 61
)

// Attribute bits of a RecordBatch.
const (
	attrCodecMask     int16 = 0x07
	attrLogAppendTime int16 = 0x08
	attrTransactional int16 = 0x10
	attrControl       int16 = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchKind is what a source batch means for the destination.
type batchKind int

const (
	kindData batchKind = iota
	kindTxnData
	kindCommit
	kindAbort
)

func (k batchKind) String() string {
	return [...]string{"data", "transactional data", "commit marker", "abort marker"}[k]
}

// rawBatch is one RecordBatch v2 exactly as the source broker returned it. The data path
// reads its header and forwards its bytes; the payload is only decoded when the batch has
// offset holes (compaction) and must be re-encoded.
type rawBatch []byte

func (b rawBatch) baseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }
func (b rawBatch) lastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}
func (b rawBatch) lastOffset() int64  { return b.baseOffset() + int64(b.lastOffsetDelta()) }
func (b rawBatch) attributes() int16  { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }
func (b rawBatch) producerID() int64  { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }
func (b rawBatch) recordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }
func (b rawBatch) codec() int16       { return b.attributes() & attrCodecMask }

// contiguous reports whether the batch holds a record at every offset of its range. Record
// offset deltas strictly increase within [0, lastOffsetDelta], so the header alone tells.
func (b rawBatch) contiguous() bool { return int64(b.lastOffsetDelta())+1 == int64(b.recordCount()) }

// kind classifies the batch; control batches are classified by their control record.
func (b rawBatch) kind() (batchKind, error) {
	attrs := b.attributes()
	switch {
	case attrs&attrControl != 0:
		recs, err := b.records()
		if err != nil {
			return 0, err
		}
		if len(recs) != 1 || len(recs[0].Key) < 4 {
			return 0, fmt.Errorf("control batch at offset %d has %d records, want one marker", b.baseOffset(), len(recs))
		}
		switch binary.BigEndian.Uint16(recs[0].Key[2:]) {
		case 0:
			return kindAbort, nil
		case 1:
			return kindCommit, nil
		default:
			return 0, fmt.Errorf("control batch at offset %d has unknown control type %d", b.baseOffset(), binary.BigEndian.Uint16(recs[0].Key[2:]))
		}
	case attrs&attrTransactional != 0:
		return kindTxnData, nil
	default:
		return kindData, nil
	}
}

// splitBatches cuts a fetch response's record bytes into whole v2 batches. A fetch may end
// with a partial batch, which is dropped: the next fetch starts at it again.
func splitBatches(raw []byte) ([]rawBatch, error) {
	var out []rawBatch
	for len(raw) >= offBatchLength+4 {
		n := offBatchLength + 4 + int(int32(binary.BigEndian.Uint32(raw[offBatchLength:])))
		if n > len(raw) {
			break
		}
		if n < batchHeaderLen {
			return nil, fmt.Errorf("record batch of %d bytes is shorter than a v2 header", n)
		}
		if magic := raw[offMagic]; magic != 2 {
			return nil, fmt.Errorf("record batch at offset %d has message format v%d; only v2 (Kafka 0.11+) is supported", int64(binary.BigEndian.Uint64(raw)), magic)
		}
		out = append(out, rawBatch(raw[:n:n]))
		raw = raw[n:]
	}
	return out, nil
}

// producerIdentity is what the destination sees as the writer of a forwarded batch.
type producerIdentity struct {
	id       int64
	epoch    int16
	sequence int32
}

// forwardBatch returns a copy of a contiguous source batch ready to produce to the
// destination: offsets reassigned by the broker from zero, the source producer replaced by
// ours, LogAppendTime cleared (a client may not send it; records keep their create times),
// and a new CRC. The compressed payload is copied untouched.
func forwardBatch(src rawBatch, as producerIdentity, transactional bool) []byte {
	b := append([]byte(nil), src...)
	attrs := src.attributes() &^ (attrLogAppendTime | attrTransactional)
	if transactional {
		attrs |= attrTransactional
	}
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(as.id))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(as.epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(as.sequence))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// records decodes (and decompresses) the batch's records.
func (b rawBatch) records() ([]kmsg.Record, error) {
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("decoding batch at offset %d: %w", b.baseOffset(), err)
	}
	payload, err := decompressor.Decompress(batch.Records, kgo.CompressionCodecType(batch.Attributes&attrCodecMask))
	if err != nil {
		return nil, fmt.Errorf("decompressing batch at offset %d: %w", b.baseOffset(), err)
	}
	recs := make([]kmsg.Record, 0, batch.NumRecords)
	for len(payload) > 0 {
		length, n := binary.Varint(payload)
		if n <= 0 || int64(len(payload)-n) < length {
			return nil, fmt.Errorf("batch at offset %d: truncated record", b.baseOffset())
		}
		var r kmsg.Record
		if err := r.ReadFrom(payload[:n+int(length)]); err != nil {
			return nil, fmt.Errorf("batch at offset %d: %w", b.baseOffset(), err)
		}
		recs = append(recs, r)
		payload = payload[n+int(length):]
	}
	if int32(len(recs)) != batch.NumRecords {
		return nil, fmt.Errorf("batch at offset %d says %d records but holds %d", b.baseOffset(), batch.NumRecords, len(recs))
	}
	return recs, nil
}

// run is a stretch of consecutive offsets of a non-contiguous batch.
type run struct {
	base    int64
	records []kmsg.Record
}

// runs splits a batch with offset holes into its contiguous runs, in offset order.
func (b rawBatch) runs() ([]run, error) {
	recs, err := b.records()
	if err != nil {
		return nil, err
	}
	base := b.baseOffset()
	var out []run
	for _, r := range recs {
		off := base + int64(r.OffsetDelta)
		if n := len(out); n > 0 && out[n-1].base+int64(len(out[n-1].records)) == off {
			out[n-1].records = append(out[n-1].records, r)
			continue
		}
		out = append(out, run{base: off, records: []kmsg.Record{r}})
	}
	return out, nil
}

var (
	decompressor = kgo.DefaultDecompressor()
	compressors  = map[int16]kgo.Compressor{}
)

func init() {
	for codec, c := range map[int16]kgo.CompressionCodec{
		1: kgo.GzipCompression(), 2: kgo.SnappyCompression(), 3: kgo.Lz4Compression(), 4: kgo.ZstdCompression(),
	} {
		comp, err := kgo.DefaultCompressor(c)
		if err != nil {
			panic(err)
		}
		compressors[codec] = comp
	}
}

// batchSpec describes a batch the worker encodes itself (re-encoded runs, filler).
type batchSpec struct {
	codec          int16 // 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
	transactional  bool
	firstTimestamp int64
	maxTimestamp   int64
	producer       producerIdentity
}

var errEmptyBatch = errors.New("refusing to encode an empty batch")

// encodeBatch builds a v2 batch from records whose OffsetDelta and TimestampDelta64 are
// relative to offset 0 and spec.firstTimestamp. The payload is compressed with spec.codec.
func encodeBatch(spec batchSpec, recs []kmsg.Record) ([]byte, error) {
	if len(recs) == 0 {
		return nil, errEmptyBatch
	}
	payload := make([]byte, 0, 8*len(recs))
	var scratch []byte
	for i := range recs {
		r := recs[i]
		r.Length = 0
		// AppendTo writes the length first; with Length 0 that is the single byte 0x00,
		// replaced here by the body's real length.
		scratch = r.AppendTo(scratch[:0])
		body := scratch[1:]
		payload = binary.AppendVarint(payload, int64(len(body)))
		payload = append(payload, body...)
	}
	codec := spec.codec
	if comp := compressors[codec]; comp != nil {
		compressed, used := comp.Compress(new(bytes.Buffer), payload)
		if used == kgo.CodecNone {
			codec = 0
		} else {
			payload = append([]byte(nil), compressed...)
		}
	}
	attrs := codec
	if spec.transactional {
		attrs |= attrTransactional
	}
	batch := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      recs[len(recs)-1].OffsetDelta,
		FirstTimestamp:       spec.firstTimestamp,
		MaxTimestamp:         spec.maxTimestamp,
		ProducerID:           spec.producer.id,
		ProducerEpoch:        spec.producer.epoch,
		FirstSequence:        spec.producer.sequence,
		NumRecords:           int32(len(recs)),
		Records:              payload,
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-offBatchLength-4))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return raw, nil
}

// reencodeRun encodes one contiguous run of a compacted source batch as its own batch with
// the source codec and timestamps, so the destination records keep their offsets and times.
func reencodeRun(src rawBatch, r run, as producerIdentity, transactional bool) ([]byte, error) {
	var srcBatch kmsg.RecordBatch
	if err := srcBatch.ReadFrom(src); err != nil {
		return nil, err
	}
	recs := make([]kmsg.Record, len(r.records))
	first := srcBatch.FirstTimestamp + r.records[0].TimestampDelta64
	maxTS := first
	for i, rec := range r.records {
		ts := srcBatch.FirstTimestamp + rec.TimestampDelta64
		maxTS = max(maxTS, ts)
		rec.OffsetDelta = int32(i)
		rec.TimestampDelta = 0
		rec.TimestampDelta64 = ts - first
		recs[i] = rec
	}
	return encodeBatch(batchSpec{
		codec:          src.codec(),
		transactional:  transactional,
		firstTimestamp: first,
		maxTimestamp:   maxTS,
		producer:       as,
	}, recs)
}

// fillerBatch encodes n empty records (zstd: well under a byte per offset) that advance an
// empty destination partition to the source log start; they are deleted right after with
// DeleteRecords. Compacted topics reject null keys, so key is set there.
func fillerBatch(n int, key []byte, now int64, as producerIdentity) ([]byte, error) {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = kmsg.Record{OffsetDelta: int32(i), Key: key}
	}
	return encodeBatch(batchSpec{codec: 4, firstTimestamp: now, maxTimestamp: now, producer: as}, recs)
}
