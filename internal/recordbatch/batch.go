package recordbatch

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
	OffBaseOffset      = 0
	OffBatchLength     = 8
	OffLeaderEpoch     = 12
	OffMagic           = 16
	OffCRC             = 17
	OffAttributes      = 21
	OffLastOffsetDelta = 23
	OffProducerID      = 43
	OffProducerEpoch   = 51
	OffBaseSequence    = 53
	OffRecordCount     = 57
	HeaderLen          = 61
)

// Attribute bits of a RecordBatch.
const (
	AttrCodecMask     int16 = 0x07
	AttrLogAppendTime int16 = 0x08
	AttrTransactional int16 = 0x10
	AttrControl       int16 = 0x20
)

var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Kind is what a source batch means for the destination.
type Kind int

const (
	Data Kind = iota
	TxnData
	Commit
	Abort
	// kindEmpty is a batch without records, data or control, that Apache Kafka's cleaner
	// keeps for its producer state or as a "transaction cleaned" marker: its offsets
	// (baseOffset to lastOffset) are a gap.
	Empty
)

func (k Kind) String() string {
	return [...]string{"data", "transactional data", "commit marker", "abort marker", "empty batch"}[k]
}

// Batch is one RecordBatch v2 exactly as the source broker returned it. The data path
// reads its header and forwards its bytes; the payload is only decoded when the batch has
// offset holes (compaction) and must be re-encoded. Split checks the header, so a
// Batch always holds one whole, checksummed header with sane offsets and count.
type Batch []byte

func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[OffBaseOffset:])) }
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[OffLastOffsetDelta:]))
}
func (b Batch) LastOffset() int64  { return b.BaseOffset() + int64(b.LastOffsetDelta()) }
func (b Batch) Attributes() int16  { return int16(binary.BigEndian.Uint16(b[OffAttributes:])) }
func (b Batch) ProducerID() int64  { return int64(binary.BigEndian.Uint64(b[OffProducerID:])) }
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[OffRecordCount:])) }
func (b Batch) LeaderEpoch() int32 { return int32(binary.BigEndian.Uint32(b[OffLeaderEpoch:])) }
func (b Batch) Codec() int16       { return b.Attributes() & AttrCodecMask }

// Producer is the batch's producer id, epoch and first sequence.
func (b Batch) Producer() Producer {
	return Producer{ID: b.ProducerID(), Epoch: int16(binary.BigEndian.Uint16(b[OffProducerEpoch:])),
		Sequence: int32(binary.BigEndian.Uint32(b[OffBaseSequence:]))}
}

// Contiguous reports whether the batch holds a record at every offset of its range. Record
// offset deltas strictly increase within [0, lastOffsetDelta], so the header alone tells.
func (b Batch) Contiguous() bool { return int64(b.LastOffsetDelta())+1 == int64(b.RecordCount()) }

// Kind classifies the batch; control batches are classified by their control record.
func (b Batch) Kind() (Kind, error) {
	attrs := b.Attributes()
	switch {
	case b.RecordCount() == 0:
		return Empty, nil
	case attrs&AttrControl != 0:
		recs, err := b.Records()
		if err != nil {
			return 0, err
		}
		// A marker is alone in its batch; the cleaner drops it whole or empties the batch.
		if len(recs) != 1 || b.LastOffsetDelta() != 0 || len(recs[0].Key) < 4 {
			return 0, b.corrupt("a control batch holds %d records over %d offsets, want one marker with a 4-byte key", len(recs), int64(b.LastOffsetDelta())+1)
		}
		switch ctype := binary.BigEndian.Uint16(recs[0].Key[2:]); ctype {
		case 0:
			return Abort, nil
		case 1:
			return Commit, nil
		default:
			return 0, b.corrupt("unknown control record type %d", ctype)
		}
	case attrs&AttrTransactional != 0:
		return TxnData, nil
	default:
		return Data, nil
	}
}

func (b Batch) corrupt(format string, args ...any) error {
	return &CorruptError{Offset: b.BaseOffset(), Reason: fmt.Sprintf(format, args...)}
}

// Split cuts a fetch response's record bytes into whole v2 batches and checks each
// one's header and CRC. A fetch may end with a partial batch, which is dropped: the next
// fetch starts at it again.
func Split(raw []byte) ([]Batch, error) {
	var out []Batch
	for len(raw) >= OffBatchLength+4 {
		base := int64(binary.BigEndian.Uint64(raw[OffBaseOffset:]))
		length := int64(int32(binary.BigEndian.Uint32(raw[OffBatchLength:])))
		n := OffBatchLength + 4 + length
		if n < HeaderLen {
			return nil, &CorruptError{Offset: base, Reason: fmt.Sprintf("batch length %d is shorter than a v2 header", length)}
		}
		if n > int64(len(raw)) {
			break
		}
		b := Batch(raw[:n:n])
		if err := b.Check(); err != nil {
			return nil, err
		}
		out = append(out, b)
		raw = raw[n:]
	}
	return out, nil
}

// Check validates what the data path takes from a whole batch's header: the format, the
// CRC, and offsets and a record count that can be true.
func (b Batch) Check() error {
	if magic := b[OffMagic]; magic != 2 {
		return b.corrupt("message format v%d; only v2 (Kafka 0.11+) is supported", magic)
	}
	if want, got := binary.BigEndian.Uint32(b[OffCRC:]), crc32.Checksum(b[OffAttributes:], Castagnoli); got != want {
		return b.corrupt("CRC-32C is %08x, the batch says %08x", got, want)
	}
	base, delta, count := b.BaseOffset(), b.LastOffsetDelta(), b.RecordCount()
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

// Producer is what the destination sees as the writer of a forwarded batch.
type Producer struct {
	ID       int64
	Epoch    int16
	Sequence int32
}

// Rewrite makes a contiguous source batch ready to produce to the destination, in
// place: offsets reassigned by the broker from zero, the source producer replaced by ours,
// LogAppendTime cleared (a client may not send it; records keep their create times), and a
// new CRC. The compressed payload stays untouched. b must have passed Check: the CRC of a
// batch of crcUpdateFrom bytes or more is updated from the header bytes that change rather
// than computed over the whole batch again (a wrong one would stay wrong, and the
// destination refuse the batch as corrupt).
func Rewrite(b Batch, as Producer, transactional bool) []byte {
	attrs := b.Attributes() &^ (AttrLogAppendTime | AttrTransactional)
	if transactional {
		attrs |= AttrTransactional
	}
	binary.BigEndian.PutUint64(b[OffBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[OffLeaderEpoch:], 0xffffffff)
	var was [rewrittenEnd - OffAttributes]byte
	copy(was[:], b[OffAttributes:rewrittenEnd])
	binary.BigEndian.PutUint16(b[OffAttributes:], uint16(attrs))
	binary.BigEndian.PutUint64(b[OffProducerID:], uint64(as.ID))
	binary.BigEndian.PutUint16(b[OffProducerEpoch:], uint16(as.Epoch))
	binary.BigEndian.PutUint32(b[OffBaseSequence:], uint32(as.Sequence))
	if len(b) < crcUpdateFrom {
		binary.BigEndian.PutUint32(b[OffCRC:], crc32.Checksum(b[OffAttributes:], Castagnoli))
		return b
	}
	for i := range was {
		was[i] ^= b[OffAttributes+i]
	}
	crc := binary.BigEndian.Uint32(b[OffCRC:]) ^ crcUpdate(was[:], len(b)-rewrittenEnd)
	binary.BigEndian.PutUint32(b[OffCRC:], crc)
	return b
}

// rewrittenEnd ends the CRC-covered header bytes Rewrite changes (attributes to base
// sequence).
const rewrittenEnd = OffRecordCount

// crcUpdateFrom is the batch size from which updating the CRC costs less than computing it
// again (~0.3 µs against ~50 ns per KiB: BenchmarkRewrite).
const crcUpdateFrom = 6 << 10

// crcUpdate is what the CRC-32C of a message changes by when delta is XORed into it at
// n bytes before its end. A CRC is affine in the message, so for messages of equal length
// crc(a) ^ crc(b) is the register-only CRC (no initial or final inversion) of a ^ b; that
// of delta followed by n zero bytes is delta's, shifted through n zero bytes.
func crcUpdate(delta []byte, n int) uint32 {
	crc := ^crc32.Update(^uint32(0), Castagnoli, delta) // register-only: Update inverts on entry and exit
	for k := 0; n > 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			crc = zeroBytes[k].times(crc)
		}
	}
	return crc
}

// gf2Matrix is a linear map of 32-bit CRC registers over GF(2): column i is the image of bit i.
type gf2Matrix [32]uint32

func (m *gf2Matrix) times(v uint32) (sum uint32) {
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

func (m *gf2Matrix) squared() (sq gf2Matrix) {
	for i := range m {
		sq[i] = m.times(m[i])
	}
	return sq
}

// zeroBytes[k] feeds 2^k zero bytes through a CRC-32C register (zlib's crc32_combine).
var zeroBytes = func() (ops [64]gf2Matrix) {
	var bit gf2Matrix   // one zero bit: shift right, folding the polynomial in on a carry
	bit[0] = 0x82f63b78 // Castagnoli, reversed
	for i := 1; i < 32; i++ {
		bit[i] = 1 << (i - 1)
	}
	two := bit.squared()
	four := two.squared()
	ops[0] = four.squared()
	for k := 1; k < len(ops); k++ {
		ops[k] = ops[k-1].squared()
	}
	return ops
}()

// minRecordLen is the smallest encoded record: one byte each for the length, attributes,
// timestamp delta, offset delta, key length, value length and header count.
const minRecordLen = 7

// Records decodes (and decompresses) the batch's records. Every record must re-encode to
// exactly its bytes, with offset deltas strictly increasing within the batch's range, so
// that runs and re-encoded batches carry exactly what the source holds.
func (b Batch) Records() ([]kmsg.Record, error) {
	var batch kmsg.RecordBatch
	if err := batch.ReadFrom(b); err != nil {
		return nil, b.corrupt("decoding the header: %v", err)
	}
	count := batch.NumRecords
	if count < 0 {
		return nil, b.corrupt("negative record count %d", count)
	}
	payload, err := decompress(batch.Attributes&AttrCodecMask, batch.Records)
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

// Run is a stretch of consecutive offsets of a non-contiguous batch.
type Run struct {
	Base    int64
	Records []kmsg.Record
}

// Runs splits a batch with offset holes into its contiguous runs, in offset order.
func (b Batch) Runs() ([]Run, error) {
	recs, err := b.Records()
	if err != nil {
		return nil, err
	}
	base := b.BaseOffset()
	var out []Run
	for _, r := range recs {
		off := base + int64(r.OffsetDelta)
		if n := len(out); n > 0 && out[n-1].Base+int64(len(out[n-1].Records)) == off {
			out[n-1].Records = append(out[n-1].Records, r)
			continue
		}
		out = append(out, Run{Base: off, Records: []kmsg.Record{r}})
	}
	return out, nil
}

// maxDecompressedBatch bounds what one batch may decompress to, so that a small
// compression bomb in a source topic cannot exhaust the worker's memory (kgo's
// DefaultDecompressor allows 2 GiB). Producers' batches are far smaller: brokers bound a
// compressed batch by max.message.bytes (1 MiB by default), kgo and librdkafka bound the
// uncompressed batch (1 MB by default), and real data compresses 2-20 times. Only
// compacted and control batches are decompressed; a larger one fails its partition.
const MaxDecompressed = 64 << 20

var errTooLarge = fmt.Errorf("decompresses to more than %d MiB", MaxDecompressed>>20)

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
	out, err := io.ReadAll(io.LimitReader(r, MaxDecompressed+1))
	if err != nil {
		return nil, err
	}
	if len(out) > MaxDecompressed {
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
	if n > MaxDecompressed-len(dst) {
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
	zstdDecoder, err = zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(MaxDecompressed))
	if err != nil {
		panic(err)
	}
}

// Spec describes a batch the worker encodes itself (re-encoded runs, filler).
type Spec struct {
	Codec          int16 // 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
	Transactional  bool
	FirstTimestamp int64
	MaxTimestamp   int64
	Producer       Producer
}

var errEmptyBatch = errors.New("refusing to encode an empty batch")

// Encode builds a v2 batch from records whose OffsetDelta and TimestampDelta64 are
// relative to offset 0 and spec.firstTimestamp. The payload is compressed with spec.codec.
func Encode(spec Spec, recs []kmsg.Record) ([]byte, error) {
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
	codec, payload := Compress(spec.Codec, payload)
	return Seal(spec, codec, payload, int32(len(recs)), recs[len(recs)-1].OffsetDelta), nil
}

// Compress compresses an encoded records payload with codec; it returns the codec used
// (none when compressing would not make it smaller) and the payload to frame.
func Compress(codec int16, payload []byte) (int16, []byte) {
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

// Seal frames a records payload, compressed with codec, as a v2 batch of spec.
func Seal(spec Spec, codec int16, payload []byte, numRecords, lastOffsetDelta int32) []byte {
	attrs := codec
	if spec.Transactional {
		attrs |= AttrTransactional
	}
	batch := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      lastOffsetDelta,
		FirstTimestamp:       spec.FirstTimestamp,
		MaxTimestamp:         spec.MaxTimestamp,
		ProducerID:           spec.Producer.ID,
		ProducerEpoch:        spec.Producer.Epoch,
		FirstSequence:        spec.Producer.Sequence,
		NumRecords:           numRecords,
		Records:              payload,
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[OffBatchLength:], uint32(len(raw)-OffBatchLength-4))
	binary.BigEndian.PutUint32(raw[OffCRC:], crc32.Checksum(raw[OffAttributes:], Castagnoli))
	return raw
}

// ReencodeRun encodes one contiguous run of a compacted source batch as its own batch with
// the source codec and timestamps, so the destination records keep their offsets and times.
func ReencodeRun(src Batch, r Run, as Producer, transactional bool) ([]byte, error) {
	var srcBatch kmsg.RecordBatch
	if err := srcBatch.ReadFrom(src); err != nil {
		return nil, err
	}
	recs := make([]kmsg.Record, len(r.Records))
	first := srcBatch.FirstTimestamp + r.Records[0].TimestampDelta64
	maxTS := first
	for i, rec := range r.Records {
		ts := srcBatch.FirstTimestamp + rec.TimestampDelta64
		maxTS = max(maxTS, ts)
		rec.OffsetDelta = int32(i)
		rec.TimestampDelta = 0
		rec.TimestampDelta64 = ts - first
		recs[i] = rec
	}
	return Encode(Spec{
		Codec:          src.Codec(),
		Transactional:  transactional,
		FirstTimestamp: first,
		MaxTimestamp:   maxTS,
		Producer:       as,
	}, recs)
}

// Filler encodes n empty records (zstd: well under a byte per offset) that advance an
// empty destination partition to the source log start; they are deleted right after with
// DeleteRecords. Compacted topics reject null keys, so key is set there. The compressed
// records are encoded once per process for each size, key and codec (fillerPayloads); only
// the batch header is written per call.
func Filler(n int, key []byte, codec int16, now int64, as Producer) ([]byte, error) {
	if n <= 0 {
		return nil, errEmptyBatch
	}
	used, payload := fillerPayloads.get(n, key, codec)
	return Seal(Spec{FirstTimestamp: now, MaxTimestamp: now, Producer: as}, used, payload, int32(n), int32(n-1)), nil
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
	e.codec, e.payload = Compress(codec, fillerRecords(n, key))
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

// CorruptError means a source record batch cannot be decoded: a wrong CRC,
// impossible framing, offsets or counts, or a payload that does not decompress (or
// decompresses past the worker's bound). Fetching again returns the same bytes, so the
// partition fails at the batch instead of retrying; the other partitions keep mirroring.
type CorruptError struct {
	Offset int64 // the batch's base offset, as the source reports it
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt source record batch at offset %d: %s; mirroring of this partition stopped there", e.Offset, e.Reason)
}
