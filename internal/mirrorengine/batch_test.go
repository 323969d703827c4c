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
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testRecords(n int, offsetStep int32) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i] = kmsg.Record{
			OffsetDelta:      int32(i) * offsetStep,
			TimestampDelta64: int64(i * 10),
			Key:              []byte{byte('a' + i)},
			Value:            bytes.Repeat([]byte{byte(i)}, 100),
			Headers:          []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}},
		}
	}
	return recs
}

// sourceBatch encodes a batch as a source broker would hold it, at base offset base.
func sourceBatch(t *testing.T, base int64, codec int16, recs []kmsg.Record, pid int64, attrs int16) rawBatch {
	t.Helper()
	raw, err := encodeBatch(batchSpec{codec: codec, firstTimestamp: 1_000, maxTimestamp: 1_000 + int64(len(recs)*10), producer: producerIdentity{id: pid, epoch: 3, sequence: 7}}, recs)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(raw[offBaseOffset:], uint64(base))
	binary.BigEndian.PutUint16(raw[offAttributes:], uint16(int16(binary.BigEndian.Uint16(raw[offAttributes:]))|attrs))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return raw
}

func checkCRC(t *testing.T, b []byte) {
	t.Helper()
	if got, want := binary.BigEndian.Uint32(b[offCRC:]), crc32.Checksum(b[offAttributes:], castagnoli); got != want {
		t.Fatalf("crc %x, want %x", got, want)
	}
}

func TestSplitBatchesDropsPartialTail(t *testing.T) {
	a := sourceBatch(t, 0, 0, testRecords(3, 1), -1, 0)
	b := sourceBatch(t, 3, 4, testRecords(2, 1), -1, 0)
	raw := append(append(append([]byte(nil), a...), b...), b[:20]...)
	got, err := splitBatches(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].baseOffset() != 0 || got[1].baseOffset() != 3 || got[1].lastOffset() != 4 {
		t.Fatalf("got %d batches", len(got))
	}
}

func TestRewriteBatchKeepsPayloadAndRewritesProducer(t *testing.T) {
	for _, codec := range []int16{0, 1, 2, 3, 4} {
		src := sourceBatch(t, 500, codec, testRecords(5, 1), 42, attrTransactional|attrLogAppendTime)
		out := rawBatch(rewriteBatch(append(rawBatch(nil), src...), producerIdentity{id: 9, epoch: 2, sequence: 11}, false))
		checkCRC(t, out)
		if out.baseOffset() != 0 || out.producerID() != 9 || out.codec() != codec {
			t.Fatalf("codec %d: base %d pid %d codec %d", codec, out.baseOffset(), out.producerID(), out.codec())
		}
		if out.attributes()&(attrTransactional|attrLogAppendTime) != 0 {
			t.Fatalf("codec %d: attributes %x keep transactional or LogAppendTime", codec, out.attributes())
		}
		if !bytes.Equal(out[batchHeaderLen:], src[batchHeaderLen:]) {
			t.Fatalf("codec %d: payload changed", codec)
		}
		if seq := int32(binary.BigEndian.Uint32(out[offBaseSequence:])); seq != 11 {
			t.Fatalf("sequence %d", seq)
		}
		txn := rawBatch(rewriteBatch(append(rawBatch(nil), src...), producerIdentity{id: 9, epoch: 2}, true))
		if k, _ := txn.kind(); k != kindTxnData {
			t.Fatalf("transactional forward is %v", k)
		}
		// The source batch is untouched.
		if src.baseOffset() != 500 || src.producerID() != 42 {
			t.Fatal("source batch modified")
		}
	}
}

func TestRunsSplitsCompactedBatch(t *testing.T) {
	recs := testRecords(6, 1)
	// offsets 0,1,2 then 5,6 then 9: holes at 3-4 and 7-8
	for i, d := range []int32{0, 1, 2, 5, 6, 9} {
		recs[i].OffsetDelta = d
	}
	src := sourceBatch(t, 100, 4, recs, -1, 0)
	if src.contiguous() {
		t.Fatal("batch with holes reported contiguous")
	}
	runs, err := src.runs()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		base int64
		n    int
	}{{100, 3}, {105, 2}, {109, 1}}
	if len(runs) != len(want) {
		t.Fatalf("%d runs", len(runs))
	}
	for i, w := range want {
		if runs[i].base != w.base || len(runs[i].records) != w.n {
			t.Fatalf("run %d: base %d n %d, want %+v", i, runs[i].base, len(runs[i].records), w)
		}
	}
	// Re-encoded runs keep key, value, headers and absolute timestamps, with the source codec.
	out, err := reencodeRun(src, runs[1], producerIdentity{id: 1, sequence: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	ob := rawBatch(out)
	checkCRC(t, ob)
	if !ob.contiguous() || ob.recordCount() != 2 || ob.codec() != 4 {
		t.Fatalf("re-encoded run: count %d codec %d", ob.recordCount(), ob.codec())
	}
	var hdr kmsg.RecordBatch
	if err := hdr.ReadFrom(ob); err != nil {
		t.Fatal(err)
	}
	got, err := ob.records()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		orig := recs[3+i]
		if !bytes.Equal(r.Key, orig.Key) || !bytes.Equal(r.Value, orig.Value) || r.Headers[0].Value[0] != orig.Headers[0].Value[0] {
			t.Fatalf("record %d differs", i)
		}
		if ts, want := hdr.FirstTimestamp+r.TimestampDelta64, 1_000+orig.TimestampDelta64; ts != want {
			t.Fatalf("record %d timestamp %d, want %d", i, ts, want)
		}
	}
}

func TestKindReadsControlRecord(t *testing.T) {
	for _, tc := range []struct {
		ctype uint16
		want  batchKind
	}{{0, kindAbort}, {1, kindCommit}} {
		key := binary.BigEndian.AppendUint16([]byte{0, 0}, tc.ctype)
		b := sourceBatch(t, 7, 0, []kmsg.Record{{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}}}, 5, attrControl|attrTransactional)
		if k, err := b.kind(); err != nil || k != tc.want {
			t.Fatalf("kind %v, %v; want %v", k, err, tc.want)
		}
	}
	if k, _ := sourceBatch(t, 0, 0, testRecords(1, 1), -1, 0).kind(); k != kindData {
		t.Fatalf("plain batch is %v", k)
	}
}

func TestFillerBatch(t *testing.T) {
	b, err := fillerBatch(100_000, nil, 4, 5, producerIdentity{id: 1})
	if err != nil {
		t.Fatal(err)
	}
	rb := rawBatch(b)
	checkCRC(t, rb)
	if rb.recordCount() != 100_000 || !rb.contiguous() || rb.codec() != 4 {
		t.Fatalf("filler: %d records codec %d", rb.recordCount(), rb.codec())
	}
	if len(b) > 100_000 {
		t.Fatalf("filler takes %d bytes for 100k offsets", len(b))
	}
	if _, err := encodeBatch(batchSpec{}, nil); err == nil {
		t.Fatal("empty batch encoded")
	}
}

// TestFillerBatchIsTheEncodingOfItsRecords: the filler written straight to bytes (and
// cached) is byte for byte the batch of its records encoded as record structs, with the
// timestamp and producer of each call; compressed, it decodes to those records.
func TestFillerBatchIsTheEncodingOfItsRecords(t *testing.T) {
	as := producerIdentity{id: 7, epoch: 2, sequence: 40}
	for _, n := range []int{1, 3, 200, 70_000} {
		for _, key := range [][]byte{nil, []byte("kafkamirror-filler")} {
			recs := make([]kmsg.Record, n)
			for i := range recs {
				recs[i] = kmsg.Record{OffsetDelta: int32(i), Key: key}
			}
			for _, now := range []int64{5, 9} { // the second call is served from the cache
				want, err := encodeBatch(batchSpec{firstTimestamp: now, maxTimestamp: now, producer: as}, recs)
				if err != nil {
					t.Fatal(err)
				}
				got, err := fillerBatch(n, key, 0, now, as)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("filler of %d records, key %q, at %d: %v\n%x\nwant\n%x", n, key, now, err, got[:min(len(got), 80)], want[:min(len(want), 80)])
				}
			}
			zb, err := fillerBatch(n, key, 4, 5, as)
			if err != nil {
				t.Fatal(err)
			}
			checkCRC(t, rawBatch(zb))
			decoded, err := rawBatch(zb).records()
			if err != nil || len(decoded) != n || !bytes.Equal(decoded[n-1].Key, key) || decoded[n-1].OffsetDelta != int32(n-1) || decoded[0].Value != nil {
				t.Fatalf("zstd filler of %d records decodes to %d records, %v", n, len(decoded), err)
			}
		}
	}
}

func TestNextSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ seq, n, want int32 }{
		{0, 5, 5},
		{2147483647 - 2, 2, 2147483647},
		{2147483647 - 2, 3, 0},
		{2147483647, 10, 9},
	} {
		if got := nextSequence(tc.seq, tc.n); got != tc.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}

// craft builds a batch at base offset 100 from header fields and a raw payload, with a
// right length and CRC: what is wrong is in what the header and the payload say.
func craft(attrs int16, lastOffsetDelta, count int32, payload []byte) rawBatch {
	b := kmsg.RecordBatch{FirstOffset: 100, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: lastOffsetDelta,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: payload}
	return fixBatch(b.AppendTo(nil))
}

// fixBatch sets a whole batch's length and CRC from its bytes.
func fixBatch(raw []byte) []byte {
	binary.BigEndian.PutUint32(raw[offBatchLength:], uint32(len(raw)-offBatchLength-4))
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:], castagnoli))
	return raw
}

// payloadOf encodes records as an uncompressed batch payload.
func payloadOf(t *testing.T, recs ...kmsg.Record) []byte {
	t.Helper()
	raw, err := encodeBatch(batchSpec{}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return raw[batchHeaderLen:]
}

func withDeltas(deltas ...int32) []kmsg.Record {
	recs := testRecords(len(deltas), 1)
	for i, d := range deltas {
		recs[i].OffsetDelta = d
	}
	return recs
}

func wantCorrupt(t *testing.T, err error, offset int64, reason string) {
	t.Helper()
	var c *CorruptBatchError
	if !errors.As(err, &c) {
		t.Fatalf("error %v, want a *CorruptBatchError", err)
	}
	if c.Offset != offset || !strings.Contains(c.Reason, reason) {
		t.Fatalf("corrupt batch at %d: %q; want offset %d and a reason with %q", c.Offset, c.Reason, offset, reason)
	}
	if classify(err) != operatorActs {
		t.Fatalf("%v is retried", err)
	}
}

func TestSplitBatchesRejectsCorruptHeaders(t *testing.T) {
	good := sourceBatch(t, 100, 0, testRecords(3, 1), -1, 0)
	payload := payloadOf(t, testRecords(3, 1)...)
	edit := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name   string
		raw    []byte
		offset int64
		reason string
	}{
		{"bad CRC", edit(func(b []byte) { b[len(b)-1]++ }), 100, "CRC-32C"},
		{"bad CRC in the second batch", append(append([]byte(nil), sourceBatch(t, 0, 0, testRecords(2, 1), -1, 0)...),
			edit(func(b []byte) { b[offRecordCount+3]++ })...), 100, "CRC-32C"},
		{"negative length", edit(func(b []byte) { binary.BigEndian.PutUint32(b[offBatchLength:], 0xffffffe8) }), 100, "length -24"},
		{"length shorter than a header", edit(func(b []byte) { binary.BigEndian.PutUint32(b[offBatchLength:], 40) }), 100, "length 40"},
		{"message format v1", edit(func(b []byte) { b[offMagic] = 1 }), 100, "format v1"},
		{"negative base offset", edit(func(b []byte) { binary.BigEndian.PutUint64(b, 1<<63) }), math.MinInt64, "negative base offset"},
		{"negative last offset delta", craft(0, -1, 0, nil), 100, "delta -1"},
		{"last offset past MaxInt64", edit(func(b []byte) {
			binary.BigEndian.PutUint64(b, math.MaxInt64-1)
		}), math.MaxInt64 - 1, "delta 2"},
		{"negative record count", craft(0, 2, -1, payload), 100, "-1 records"},
		{"more records than offsets", craft(0, 2, 0x30303030, payload), 100, "808464432 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := splitBatches(tc.raw)
			wantCorrupt(t, err, tc.offset, tc.reason)
		})
	}
}

// compressedZeros compresses n zero bytes with w, a compressing writer on buf.
func compressedZeros(t *testing.T, n int, buf *bytes.Buffer, w io.WriteCloser) []byte {
	t.Helper()
	if _, err := w.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRecordsRejectCorruptPayloads(t *testing.T) {
	recs := testRecords(3, 1)
	payload := payloadOf(t, recs...)
	one := payloadOf(t, recs[0])

	// A record whose length covers one byte more than its fields.
	r := recs[0]
	body := r.AppendTo(nil)[1:] // Length 0 encodes as one byte
	padded := append(binary.AppendVarint(nil, int64(len(body)+1)), append(body, 0)...)

	bomb := func(codec int16, w func(*bytes.Buffer) io.WriteCloser) rawBatch {
		var buf bytes.Buffer
		return craft(codec, 0, 1, compressedZeros(t, maxDecompressedBatch+1, &buf, w(&buf)))
	}
	zstdDeclared, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zstdDeclared.Close()
	xerial := func(chunks ...[]byte) []byte {
		return slices.Concat(append([][]byte{xerialMagic, {0, 0, 0, 1, 0, 0, 0, 1}}, chunks...)...)
	}
	chunk := func(block []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(block))), block...)
	}

	control := func(deltas int32, recs ...kmsg.Record) rawBatch {
		return craft(attrControl|attrTransactional, deltas, int32(len(recs)), payloadOf(t, recs...))
	}
	marker := func(key ...byte) kmsg.Record { return kmsg.Record{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}} }

	for _, tc := range []struct {
		name   string
		batch  rawBatch
		reason string
	}{
		{"record count 0x30303030", craft(0, 0x30303030, 0x30303030, payload), "says 808464432 records, the payload holds 3"},
		{"negative record length", craft(0, 2, 3, append(binary.AppendVarint(nil, -25), payload[1:]...)), "record 0: length -25"},
		{"record length past the payload", craft(0, 2, 3, append(append([]byte(nil), one...), binary.AppendVarint(nil, 1000)...)), "record 1: length 1000"},
		{"record with trailing bytes", craft(0, 0, 1, padded), "does not re-encode"},
		{"truncated record fields", craft(0, 0, 1, append(binary.AppendVarint(nil, 3), 0, 0, 0)), "record 0:"},
		{"fewer records than the count", craft(0, 5, 4, payload), "says 4 records, the payload holds 3"},
		{"offset deltas out of order", craft(0, 2, 3, payloadOf(t, withDeltas(0, 2, 1)...)), "record 2: offset delta 1"},
		{"repeated offset delta", craft(0, 2, 3, payloadOf(t, withDeltas(0, 1, 1)...)), "record 2: offset delta 1"},
		{"offset delta past the last", craft(0, 2, 3, payloadOf(t, withDeltas(0, 1, 5)...)), "record 2: offset delta 5"},
		{"negative offset delta", craft(0, 2, 2, payloadOf(t, withDeltas(-1, 1)...)), "record 0: offset delta -1"},
		{"gzip garbage", craft(1, 2, 3, payload), "decompressing"},
		{"unknown codec", craft(5, 2, 3, payload), "unknown compression codec 5"},
		{"zstd bomb with a declared size", craft(4, 0, 1, zstdDeclared.EncodeAll(make([]byte, maxDecompressedBatch+1), nil)), "more than 64 MiB"},
		{"zstd bomb streamed", bomb(4, func(b *bytes.Buffer) io.WriteCloser {
			w, err := zstd.NewWriter(b, zstd.WithEncoderLevel(zstd.SpeedFastest))
			if err != nil {
				t.Fatal(err)
			}
			return w
		}), "more than 64 MiB"},
		{"gzip bomb", bomb(1, func(b *bytes.Buffer) io.WriteCloser {
			w, _ := gzip.NewWriterLevel(b, gzip.BestCompression)
			return w
		}), "more than 64 MiB"},
		{"lz4 bomb", bomb(3, func(b *bytes.Buffer) io.WriteCloser { return lz4.NewWriter(b) }), "more than 64 MiB"},
		{"snappy block claiming 4 GiB", craft(2, 0, 1, binary.AppendUvarint(nil, 1<<32-1)), "more than 64 MiB"},
		{"xerial chunks adding up past the bound", craft(2, 0, 1, xerial(
			chunk(s2.EncodeSnappy(nil, make([]byte, 1024))),
			chunk(binary.AppendUvarint(nil, maxDecompressedBatch-1023)))), "more than 64 MiB"},
		{"xerial chunk past the payload", craft(2, 0, 1, xerial([]byte{0, 0, 1, 0, 1})), "xerial"},
		{"control batch of two records", control(1, marker(0, 0, 0, 1), kmsg.Record{OffsetDelta: 1, Key: []byte{0, 0, 0, 1}}), "2 records over 2 offsets"},
		{"control batch over two offsets", control(1, marker(0, 0, 0, 1)), "1 records over 2 offsets"},
		{"control key too short", control(0, marker(0, 0)), "4-byte key"},
		{"unknown control type", control(0, marker(0, 0, 0, 7)), "control record type 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split, err := splitBatches(tc.batch)
			if err != nil || len(split) != 1 {
				t.Fatalf("the header is sound, yet splitBatches: %d batches, %v", len(split), err)
			}
			b := split[0]
			if b.attributes()&attrControl != 0 {
				_, err := b.kind()
				wantCorrupt(t, err, 100, tc.reason)
				return
			}
			_, err = b.records()
			wantCorrupt(t, err, 100, tc.reason)
			if _, err := b.runs(); err == nil {
				t.Fatal("runs decoded a corrupt batch")
			}
		})
	}
}

// Apache Kafka's cleaner keeps batches emptied of their records: a control batch as a
// "transaction cleaned" marker, a data batch for its producer's state. Their offsets are
// a gap, not corruption.
func TestEmptyBatchesAreGaps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs int16
		delta int32
	}{
		{"control", attrControl | attrTransactional, 0},
		{"data", 0, 9},
		{"compressed transactional data", 4 | attrTransactional, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split, err := splitBatches(craft(tc.attrs, tc.delta, 0, nil))
			if err != nil || len(split) != 1 {
				t.Fatalf("%d batches, %v", len(split), err)
			}
			b := split[0]
			if k, err := b.kind(); err != nil || k != kindEmpty {
				t.Fatalf("kind %v, %v; want an empty batch", k, err)
			}
			if b.lastOffset() != 100+int64(tc.delta) || b.contiguous() {
				t.Fatalf("offsets 100-%d, contiguous %v", b.lastOffset(), b.contiguous())
			}
			if runs, err := b.runs(); err != nil || len(runs) != 0 {
				t.Fatalf("%d runs, %v", len(runs), err)
			}
		})
	}
}

func TestRecordsDecodeEveryCodec(t *testing.T) {
	recs := withDeltas(0, 1, 2, 5, 6, 40)
	check := func(t *testing.T, b rawBatch) {
		t.Helper()
		got, err := b.records()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(recs) {
			t.Fatalf("%d records", len(got))
		}
		for i := range got {
			if got[i].OffsetDelta != recs[i].OffsetDelta || !bytes.Equal(got[i].Value, recs[i].Value) || got[i].Headers[0].Key != "h" {
				t.Fatalf("record %d differs", i)
			}
		}
	}
	for codec := int16(0); codec <= 4; codec++ {
		t.Run(fmt.Sprint("codec ", codec), func(t *testing.T) { check(t, sourceBatch(t, 0, codec, recs, -1, 0)) })
	}
	t.Run("xerial snappy", func(t *testing.T) {
		// As snappy-java writes it: a header, then chunks of a length and a snappy block.
		plain := payloadOf(t, recs...)
		xerial := slices.Concat(xerialMagic, []byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(plain) > 0 {
			n := min(len(plain), 100)
			block := s2.EncodeSnappy(nil, plain[:n])
			xerial = append(binary.BigEndian.AppendUint32(xerial, uint32(len(block))), block...)
			plain = plain[n:]
		}
		check(t, craft(2, 40, int32(len(recs)), xerial))
	})
}

// BenchmarkFillerEncoding compares encoding a full filler batch (a million empty records,
// zstd) from record structs, as before, with encoding it straight to bytes; the process
// then keeps the result (fillerPayloads), so a head alignment pays this once.
func BenchmarkFillerEncoding(b *testing.B) {
	const n = fillerBatchRecords
	b.Run("record structs", func(b *testing.B) {
		for b.Loop() {
			recs := make([]kmsg.Record, n)
			for i := range recs {
				recs[i] = kmsg.Record{OffsetDelta: int32(i)}
			}
			if _, err := encodeBatch(batchSpec{codec: 4}, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("straight to bytes", func(b *testing.B) {
		for b.Loop() {
			compress(4, fillerRecords(n, nil))
		}
	})
}
