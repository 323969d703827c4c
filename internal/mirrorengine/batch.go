package mirrorengine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
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
	// kindEmpty is a batch without records, data or control, that Apache Kafka's cleaner
	// keeps for its producer state or as a "transaction cleaned" marker: its offsets
	// (baseOffset to lastOffset) are a gap.
	kindEmpty
)

func (k batchKind) String() string {
	return [...]string{"data", "transactional data", "commit marker", "abort marker", "empty batch"}[k]
}

// rawBatch is one RecordBatch v2 exactly as the source broker returned it. The data path
// reads its header and forwards its bytes; the payload is only decoded when the batch has
// offset holes (compaction) and must be re-encoded. splitBatches checks the header, so a
// rawBatch always holds one whole, checksummed header with sane offsets and count.
type rawBatch []byte

func (b rawBatch) baseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }
func (b rawBatch) lastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}
func (b rawBatch) lastOffset() int64  { return b.baseOffset() + int64(b.lastOffsetDelta()) }
func (b rawBatch) attributes() int16  { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }
func (b rawBatch) producerID() int64  { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }
func (b rawBatch) recordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }
func (b rawBatch) leaderEpoch() int32 { return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])) }
func (b rawBatch) codec() int16       { return b.attributes() & attrCodecMask }

// producer is the batch's producer id, epoch and first sequence.
func (b rawBatch) producer() producerIdentity {
	return producerIdentity{id: b.producerID(), epoch: int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		sequence: int32(binary.BigEndian.Uint32(b[offBaseSequence:]))}
}

// contiguous reports whether the batch holds a record at every offset of its range. Record
// offset deltas strictly increase within [0, lastOffsetDelta], so the header alone tells.
func (b rawBatch) contiguous() bool { return int64(b.lastOffsetDelta())+1 == int64(b.recordCount()) }

// kind classifies the batch; control batches are classified by their control record.
func (b rawBatch) kind() (batchKind, error) {
	attrs := b.attributes()
	switch {
	case b.recordCount() == 0:
		return kindEmpty, nil
	case attrs&attrControl != 0:
		recs, err := b.records()
		if err != nil {
			return 0, err
		}
		// A marker is alone in its batch; the cleaner drops it whole or empties the batch.
		if len(recs) != 1 || b.lastOffsetDelta() != 0 || len(recs[0].Key) < 4 {
			return 0, b.corrupt("a control batch holds %d records over %d offsets, want one marker with a 4-byte key", len(recs), int64(b.lastOffsetDelta())+1)
		}
		switch ctype := binary.BigEndian.Uint16(recs[0].Key[2:]); ctype {
		case 0:
			return kindAbort, nil
		case 1:
			return kindCommit, nil
		default:
			return 0, b.corrupt("unknown control record type %d", ctype)
		}
	case attrs&attrTransactional != 0:
		return kindTxnData, nil
	default:
		return kindData, nil
	}
}

func (b rawBatch) corrupt(format string, args ...any) error {
	return &CorruptBatchError{Offset: b.baseOffset(), Reason: fmt.Sprintf(format, args...)}
}

// splitBatches cuts a fetch response's record bytes into whole v2 batches and checks each
// one's header and CRC. A fetch may end with a partial batch, which is dropped: the next
// fetch starts at it again.
func splitBatches(raw []byte) ([]rawBatch, error) {
	var out []rawBatch
	for len(raw) >= offBatchLength+4 {
		base := int64(binary.BigEndian.Uint64(raw[offBaseOffset:]))
		length := int64(int32(binary.BigEndian.Uint32(raw[offBatchLength:])))
		n := offBatchLength + 4 + length
		if n < batchHeaderLen {
			return nil, &CorruptBatchError{Offset: base, Reason: fmt.Sprintf("batch length %d is shorter than a v2 header", length)}
		}
		if n > int64(len(raw)) {
			break
		}
		b := rawBatch(raw[:n:n])
		if err := b.check(); err != nil {
			return nil, err
		}
		out = append(out, b)
		raw = raw[n:]
	}
	return out, nil
}

// check validates what the data path takes from a whole batch's header: the format, the
// CRC, and offsets and a record count that can be true.
func (b rawBatch) check() error {
	if magic := b[offMagic]; magic != 2 {
		return b.corrupt("message format v%d; only v2 (Kafka 0.11+) is supported", magic)
	}
	if want, got := binary.BigEndian.Uint32(b[offCRC:]), crc32.Checksum(b[offAttributes:], castagnoli); got != want {
		return b.corrupt("CRC-32C is %08x, the batch says %08x", got, want)
	}
	base, delta, count := b.baseOffset(), b.lastOffsetDelta(), b.recordCount()
	switch {
	case base < 0:
		return b.corrupt("negative base offset")
	case delta < 0 || base > math.MaxInt64-int64(delta):
		return b.corrupt("last offset delta %d is outside the offset range", delta)
	case count < 0 || int64(count) > int64(delta)+1:
		// Record offset deltas are distinct and within [0, lastOffsetDelta].
		return b.corrupt("%d records cannot fit offsets %d to %d", count, base, base+int64(delta))
	}
	return nil
}

// producerIdentity is what the destination sees as the writer of a forwarded batch.
type producerIdentity struct {
	id       int64
	epoch    int16
	sequence int32
}

// rewriteBatch makes a contiguous source batch ready to produce to the destination, in
// place: offsets reassigned by the broker from zero, the source producer replaced by ours,
// LogAppendTime cleared (a client may not send it; records keep their create times), and a
// new CRC. The compressed payload stays untouched.
func rewriteBatch(b rawBatch, as producerIdentity, transactional bool) []byte {
	attrs := b.attributes() &^ (attrLogAppendTime | attrTransactional)
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

// minRecordLen is the smallest encoded record: one byte each for the length, attributes,
// timestamp delta, offset delta, key length, value length and header count.
const minRecordLen = 7

// records decodes (and decompresses) the batch's records. Every record must re-encode to
// exactly its bytes, with offset deltas strictly increasing within the batch's range, so
// that runs and re-encoded batches carry exactly what the source holds.
func (b rawBatch) records() ([]kmsg.Record, error) {
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		return nil, b.corrupt("decoding the header: %v", err)
	}
	count := batch.NumRecords
	if count < 0 {
		return nil, b.corrupt("negative record count %d", count)
	}
	payload, err := decompress(batch.Attributes&attrCodecMask, batch.Records)
	if err != nil {
		return nil, b.corrupt("decompressing: %v", err)
	}
	// The count is only a claim: the records actually present bound the allocation.
	recs := make([]kmsg.Record, 0, min(int(count), len(payload)/minRecordLen))
	var encoded []byte
	for len(payload) > 0 {
		i := len(recs)
		length, n := binary.Varint(payload)
		if n <= 0 || length < 0 || length > int64(len(payload)-n) {
			return nil, b.corrupt("record %d: length %d does not fit the %d bytes left", i, length, len(payload))
		}
		raw := payload[:n+int(length)]
		payload = payload[len(raw):]
		var r kmsg.Record
		if err := r.ReadFrom(raw); err != nil {
			return nil, b.corrupt("record %d: %v", i, err)
		}
		if encoded = r.AppendTo(encoded[:0]); !bytes.Equal(encoded, raw) {
			// Trailing bytes inside the length, or non-canonical varints.
			return nil, b.corrupt("record %d does not re-encode to its own %d bytes", i, len(raw))
		}
		if r.OffsetDelta < 0 || r.OffsetDelta > batch.LastOffsetDelta || (i > 0 && r.OffsetDelta <= recs[i-1].OffsetDelta) {
			return nil, b.corrupt("record %d: offset delta %d out of order or outside [0, %d]", i, r.OffsetDelta, batch.LastOffsetDelta)
		}
		recs = append(recs, r)
	}
	if len(recs) != int(count) {
		return nil, b.corrupt("the header says %d records, the payload holds %d", count, len(recs))
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

// maxDecompressedBatch bounds what one batch may decompress to, so that a small
// compression bomb in a source topic cannot exhaust the worker's memory (kgo's
// DefaultDecompressor allows 2 GiB). Producers' batches are far smaller: brokers bound a
// compressed batch by max.message.bytes (1 MiB by default), kgo and librdkafka bound the
// uncompressed batch (1 MB by default), and real data compresses 2-20 times. Only
// compacted and control batches are decompressed; a larger one fails its partition.
const maxDecompressedBatch = 64 << 20

var errTooLarge = fmt.Errorf("decompresses to more than %d MiB", maxDecompressedBatch>>20)

var (
	compressors = map[int16]kgo.Compressor{}
	// zstdDecoder refuses frames and output over maxDecompressedBatch before allocating them.
	zstdDecoder *zstd.Decoder
)

// decompress returns a batch payload decompressed with codec, or an error when it would
// exceed maxDecompressedBatch bytes.
func decompress(codec int16, src []byte) ([]byte, error) {
	switch codec {
	case 0:
		return src, nil
	case 1:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return readLimited(r)
	case 2:
		return unsnappy(src)
	case 3:
		return readLimited(lz4.NewReader(bytes.NewReader(src)))
	case 4:
		out, err := zstdDecoder.DecodeAll(src, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, errTooLarge
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown compression codec %d", codec)
}

// readLimited reads a decompressing stream to its end, stopping past maxDecompressedBatch.
func readLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressedBatch+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxDecompressedBatch {
		return nil, errTooLarge
	}
	return out, nil
}

// xerialMagic starts the framing of snappy-java, which Java producers write: after a
// 16-byte header, blocks of a big-endian length and a raw snappy block. Other clients
// write one raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func unsnappy(src []byte) ([]byte, error) {
	if len(src) < 16 || !bytes.HasPrefix(src, xerialMagic) {
		return appendSnappy(nil, src)
	}
	var out []byte
	for rest := src[16:]; len(rest) > 0; {
		if len(rest) < 4 || uint64(binary.BigEndian.Uint32(rest)) > uint64(len(rest)-4) {
			return nil, errors.New("malformed xerial snappy framing")
		}
		n := 4 + int(binary.BigEndian.Uint32(rest))
		var err error
		if out, err = appendSnappy(out, rest[4:n]); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// appendSnappy decodes a raw snappy block after dst; the block declares its decoded
// length, which is checked before anything is allocated.
func appendSnappy(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > maxDecompressedBatch-len(dst) {
		return nil, errTooLarge
	}
	dst = slices.Grow(dst, n)
	decoded, err := s2.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return nil, err
	}
	return dst[:len(dst)+len(decoded)], nil
}

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
	var err error
	zstdDecoder, err = zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(maxDecompressedBatch))
	if err != nil {
		panic(err)
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
	codec, payload := compress(spec.codec, payload)
	return sealBatch(spec, codec, payload, int32(len(recs)), recs[len(recs)-1].OffsetDelta), nil
}

// compress compresses an encoded records payload with codec; it returns the codec used
// (none when compressing would not make it smaller) and the payload to frame.
func compress(codec int16, payload []byte) (int16, []byte) {
	comp := compressors[codec]
	if comp == nil {
		return codec, payload
	}
	compressed, used := comp.Compress(new(bytes.Buffer), payload)
	if used == kgo.CodecNone {
		return 0, payload
	}
	return codec, append([]byte(nil), compressed...)
}

// sealBatch frames a records payload, compressed with codec, as a v2 batch of spec.
func sealBatch(spec batchSpec, codec int16, payload []byte, numRecords, lastOffsetDelta int32) []byte {
	attrs := codec
	if spec.transactional {
		attrs |= attrTransactional
	}
	batch := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      lastOffsetDelta,
		FirstTimestamp:       spec.firstTimestamp,
		MaxTimestamp:         spec.maxTimestamp,
		ProducerID:           spec.producer.id,
		ProducerEpoch:        spec.producer.epoch,
		FirstSequence:        spec.producer.sequence,
		NumRecords:           numRecords,
		Records:              payload,
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-offBatchLength-4))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return raw
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
// DeleteRecords. Compacted topics reject null keys, so key is set there. The compressed
// records are encoded once per process for each size, key and codec (fillerPayloads); only
// the batch header is written per call.
func fillerBatch(n int, key []byte, codec int16, now int64, as producerIdentity) ([]byte, error) {
	if n <= 0 {
		return nil, errEmptyBatch
	}
	used, payload := fillerPayloads.get(n, key, codec)
	return sealBatch(batchSpec{firstTimestamp: now, maxTimestamp: now, producer: as}, used, payload, int32(n), int32(n-1)), nil
}

// fillerPayloads caches the compressed records of filler batches. A head alignment asks for
// full batches of one size again and again, and a last smaller one; the cache is cleared
// when it holds fillerPayloadsMax entries, so odd sizes cannot grow it.
var fillerPayloads = fillerCache{m: map[fillerCacheKey]fillerCacheEntry{}}

const fillerPayloadsMax = 16

type fillerCache struct {
	mu sync.Mutex
	m  map[fillerCacheKey]fillerCacheEntry
}

type fillerCacheKey struct {
	n     int
	key   string
	codec int16
}

type fillerCacheEntry struct {
	codec   int16 // the codec the payload is in
	payload []byte
}

func (c *fillerCache) get(n int, key []byte, codec int16) (int16, []byte) {
	k := fillerCacheKey{n, string(key), codec}
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return e.codec, e.payload
	}
	e.codec, e.payload = compress(codec, fillerRecords(n, key))
	c.mu.Lock()
	if len(c.m) >= fillerPayloadsMax {
		clear(c.m)
	}
	c.m[k] = e
	c.mu.Unlock()
	return e.codec, e.payload
}

// fillerRecords encodes n records with offset deltas 0 to n-1, timestamp delta 0, key (nil:
// null), a null value and no headers, straight to bytes.
func fillerRecords(n int, key []byte) []byte {
	keyLen := int64(-1)
	if key != nil {
		keyLen = int64(len(key))
	}
	payload := make([]byte, 0, n*(10+len(key)))
	var body []byte
	for i := range n {
		body = append(body[:0], 0, 0) // attributes, timestamp delta
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, keyLen)
		body = append(body, key...)
		body = append(body, 1, 0) // value length -1 (null), no headers
		payload = binary.AppendVarint(payload, int64(len(body)))
		payload = append(payload, body...)
	}
	return payload
}
