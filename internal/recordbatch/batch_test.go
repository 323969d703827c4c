package recordbatch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

func TestSplitBatchesDropsPartialTail(t *testing.T) {
	a := batchtest.Source(t, 0, 0, batchtest.Records(3, 1), -1, 0)
	b := batchtest.Source(t, 3, 4, batchtest.Records(2, 1), -1, 0)
	raw := append(append(append([]byte(nil), a...), b...), b[:20]...)
	got, err := recordbatch.Split(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].BaseOffset() != 0 || got[1].BaseOffset() != 3 || got[1].LastOffset() != 4 {
		t.Fatalf("got %d batches", len(got))
	}
}

func TestRewriteBatchKeepsPayloadAndRewritesProducer(t *testing.T) {
	for _, codec := range []int16{0, 1, 2, 3, 4} {
		src := batchtest.Source(t, 500, codec, batchtest.Records(5, 1), 42, recordbatch.AttrTransactional|recordbatch.AttrLogAppendTime)
		out := recordbatch.Batch(recordbatch.Rewrite(append(recordbatch.Batch(nil), src...), recordbatch.Producer{ID: 9, Epoch: 2, Sequence: 11}, false))
		batchtest.CheckCRC(t, out)
		if out.BaseOffset() != 0 || out.ProducerID() != 9 || out.Codec() != codec {
			t.Fatalf("codec %d: base %d pid %d codec %d", codec, out.BaseOffset(), out.ProducerID(), out.Codec())
		}
		if out.Attributes()&(recordbatch.AttrTransactional|recordbatch.AttrLogAppendTime) != 0 {
			t.Fatalf("codec %d: attributes %x keep transactional or LogAppendTime", codec, out.Attributes())
		}
		if !bytes.Equal(out[recordbatch.HeaderLen:], src[recordbatch.HeaderLen:]) {
			t.Fatalf("codec %d: payload changed", codec)
		}
		if seq := int32(binary.BigEndian.Uint32(out[recordbatch.OffBaseSequence:])); seq != 11 {
			t.Fatalf("sequence %d", seq)
		}
		txn := recordbatch.Batch(recordbatch.Rewrite(append(recordbatch.Batch(nil), src...), recordbatch.Producer{ID: 9, Epoch: 2}, true))
		if k, _ := txn.Kind(); k != recordbatch.TxnData {
			t.Fatalf("transactional forward is %v", k)
		}
		// The source batch is untouched.
		if src.BaseOffset() != 500 || src.ProducerID() != 42 {
			t.Fatal("source batch modified")
		}
	}
}

// Rewrite updates the CRC from the header bytes it changes: for every batch size (the
// update shifts through as many zero bytes as follow the header) and any producer and
// attributes, the CRC is the one computed over the whole rewritten batch.
func TestRewriteUpdatesTheCRC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 64, 255, 1000, 5000} {
		for _, codec := range []int16{0, 4} {
			src := batchtest.Source(t, 77, codec, batchtest.Records(n, 1), rng.Int64(), int16(rng.IntN(2))*recordbatch.AttrTransactional|int16(rng.IntN(2))*recordbatch.AttrLogAppendTime)
			as := recordbatch.Producer{ID: rng.Int64(), Epoch: int16(rng.Uint32()), Sequence: rng.Int32()}
			out := recordbatch.Rewrite(bytes.Clone(src), as, rng.IntN(2) == 0)
			batchtest.CheckCRC(t, out)
		}
	}
}

func TestRunsSplitsCompactedBatch(t *testing.T) {
	recs := batchtest.Records(6, 1)
	// offsets 0,1,2 then 5,6 then 9: holes at 3-4 and 7-8
	for i, d := range []int32{0, 1, 2, 5, 6, 9} {
		recs[i].OffsetDelta = d
	}
	src := batchtest.Source(t, 100, 4, recs, -1, 0)
	if src.Contiguous() {
		t.Fatal("batch with holes reported contiguous")
	}
	runs, err := src.Runs()
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
		if runs[i].Base != w.base || len(runs[i].Records) != w.n {
			t.Fatalf("run %d: base %d n %d, want %+v", i, runs[i].Base, len(runs[i].Records), w)
		}
	}
	// Re-encoded runs keep key, value, headers and absolute timestamps, with the source codec.
	out, err := recordbatch.ReencodeRun(src, runs[1], recordbatch.Producer{ID: 1, Sequence: 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	ob := recordbatch.Batch(out)
	batchtest.CheckCRC(t, ob)
	if !ob.Contiguous() || ob.RecordCount() != 2 || ob.Codec() != 4 {
		t.Fatalf("re-encoded run: count %d codec %d", ob.RecordCount(), ob.Codec())
	}
	var hdr kmsg.RecordBatch
	if err := hdr.ReadFrom(ob); err != nil {
		t.Fatal(err)
	}
	got, err := ob.Records()
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
		want  recordbatch.Kind
	}{{0, recordbatch.Abort}, {1, recordbatch.Commit}} {
		key := binary.BigEndian.AppendUint16([]byte{0, 0}, tc.ctype)
		b := batchtest.Source(t, 7, 0, []kmsg.Record{{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}}}, 5, recordbatch.AttrControl|recordbatch.AttrTransactional)
		if k, err := b.Kind(); err != nil || k != tc.want {
			t.Fatalf("kind %v, %v; want %v", k, err, tc.want)
		}
	}
	if k, _ := batchtest.Source(t, 0, 0, batchtest.Records(1, 1), -1, 0).Kind(); k != recordbatch.Data {
		t.Fatalf("plain batch is %v", k)
	}
}

func TestFillerBatch(t *testing.T) {
	b, err := recordbatch.Filler(100_000, nil, 4, 5, recordbatch.Producer{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	rb := recordbatch.Batch(b)
	batchtest.CheckCRC(t, rb)
	if rb.RecordCount() != 100_000 || !rb.Contiguous() || rb.Codec() != 4 {
		t.Fatalf("filler: %d records codec %d", rb.RecordCount(), rb.Codec())
	}
	if len(b) > 100_000 {
		t.Fatalf("filler takes %d bytes for 100k offsets", len(b))
	}
	if _, err := recordbatch.Encode(recordbatch.Spec{}, nil); err == nil {
		t.Fatal("empty batch encoded")
	}
}

// TestFillerBatchIsTheEncodingOfItsRecords: the filler written straight to bytes (and
// cached) is byte for byte the batch of its records encoded as record structs, with the
// timestamp and producer of each call; compressed, it decodes to those records.
func TestFillerBatchIsTheEncodingOfItsRecords(t *testing.T) {
	as := recordbatch.Producer{ID: 7, Epoch: 2, Sequence: 40}
	for _, n := range []int{1, 3, 200, 70_000} {
		for _, key := range [][]byte{nil, []byte("kafkamirror-filler")} {
			recs := make([]kmsg.Record, n)
			for i := range recs {
				recs[i] = kmsg.Record{OffsetDelta: int32(i), Key: key}
			}
			for _, now := range []int64{5, 9} { // the second call is served from the cache
				want, err := recordbatch.Encode(recordbatch.Spec{FirstTimestamp: now, MaxTimestamp: now, Producer: as}, recs)
				if err != nil {
					t.Fatal(err)
				}
				got, err := recordbatch.Filler(n, key, 0, now, as)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("filler of %d records, key %q, at %d: %v\n%x\nwant\n%x", n, key, now, err, got[:min(len(got), 80)], want[:min(len(want), 80)])
				}
			}
			zb, err := recordbatch.Filler(n, key, 4, 5, as)
			if err != nil {
				t.Fatal(err)
			}
			batchtest.CheckCRC(t, recordbatch.Batch(zb))
			decoded, err := recordbatch.Batch(zb).Records()
			if err != nil || len(decoded) != n || !bytes.Equal(decoded[n-1].Key, key) || decoded[n-1].OffsetDelta != int32(n-1) || decoded[0].Value != nil {
				t.Fatalf("zstd filler of %d records decodes to %d records, %v", n, len(decoded), err)
			}
		}
	}
}

// payloadOf encodes records as an uncompressed batch payload.
func payloadOf(t *testing.T, recs ...kmsg.Record) []byte {
	t.Helper()
	raw, err := recordbatch.Encode(recordbatch.Spec{}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return raw[recordbatch.HeaderLen:]
}

func withDeltas(deltas ...int32) []kmsg.Record {
	recs := batchtest.Records(len(deltas), 1)
	for i, d := range deltas {
		recs[i].OffsetDelta = d
	}
	return recs
}

func wantCorrupt(t *testing.T, err error, offset int64, reason string) {
	t.Helper()
	var c *recordbatch.CorruptError
	if !errors.As(err, &c) {
		t.Fatalf("error %v, want a *recordbatch.CorruptError", err)
	}
	if c.Offset != offset || !strings.Contains(c.Reason, reason) {
		t.Fatalf("corrupt batch at %d: %q; want offset %d and a reason with %q", c.Offset, c.Reason, offset, reason)
	}
}

func TestSplitBatchesRejectsCorruptHeaders(t *testing.T) {
	good := batchtest.Source(t, 100, 0, batchtest.Records(3, 1), -1, 0)
	payload := payloadOf(t, batchtest.Records(3, 1)...)
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
		{"bad CRC in the second batch", append(append([]byte(nil), batchtest.Source(t, 0, 0, batchtest.Records(2, 1), -1, 0)...),
			edit(func(b []byte) { b[recordbatch.OffRecordCount+3]++ })...), 100, "CRC-32C"},
		{"negative length", edit(func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], 0xffffffe8) }), 100, "length -24"},
		{"length shorter than a header", edit(func(b []byte) { binary.BigEndian.PutUint32(b[recordbatch.OffBatchLength:], 40) }), 100, "length 40"},
		{"message format v1", edit(func(b []byte) { b[recordbatch.OffMagic] = 1 }), 100, "format v1"},
		{"negative base offset", edit(func(b []byte) { binary.BigEndian.PutUint64(b, 1<<63) }), math.MinInt64, "negative base offset"},
		{"negative last offset delta", batchtest.Craft(0, -1, 0, nil), 100, "delta -1"},
		{"last offset past MaxInt64", edit(func(b []byte) {
			binary.BigEndian.PutUint64(b, math.MaxInt64-1)
		}), math.MaxInt64 - 1, "delta 2"},
		{"negative record count", batchtest.Craft(0, 2, -1, payload), 100, "-1 records"},
		{"more records than offsets", batchtest.Craft(0, 2, 0x30303030, payload), 100, "808464432 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := recordbatch.Split(tc.raw)
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
	recs := batchtest.Records(3, 1)
	payload := payloadOf(t, recs...)
	one := payloadOf(t, recs[0])

	// A record whose length covers one byte more than its fields.
	r := recs[0]
	body := r.AppendTo(nil)[1:] // Length 0 encodes as one byte
	padded := append(binary.AppendVarint(nil, int64(len(body)+1)), append(body, 0)...)

	bomb := func(codec int16, w func(*bytes.Buffer) io.WriteCloser) recordbatch.Batch {
		var buf bytes.Buffer
		return batchtest.Craft(codec, 0, 1, compressedZeros(t, recordbatch.MaxDecompressed+1, &buf, w(&buf)))
	}
	zstdDeclared, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zstdDeclared.Close()
	xerial := func(chunks ...[]byte) []byte {
		return slices.Concat(append([][]byte{recordbatch.XerialMagic, {0, 0, 0, 1, 0, 0, 0, 1}}, chunks...)...)
	}
	chunk := func(block []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(block))), block...)
	}

	control := func(deltas int32, recs ...kmsg.Record) recordbatch.Batch {
		return batchtest.Craft(recordbatch.AttrControl|recordbatch.AttrTransactional, deltas, int32(len(recs)), payloadOf(t, recs...))
	}
	marker := func(key ...byte) kmsg.Record { return kmsg.Record{Key: key, Value: []byte{0, 0, 0, 0, 0, 0}} }

	for _, tc := range []struct {
		name   string
		batch  recordbatch.Batch
		reason string
	}{
		{"record count 0x30303030", batchtest.Craft(0, 0x30303030, 0x30303030, payload), "says 808464432 records, the payload holds 3"},
		{"negative record length", batchtest.Craft(0, 2, 3, append(binary.AppendVarint(nil, -25), payload[1:]...)), "record 0: length -25"},
		{"record length past the payload", batchtest.Craft(0, 2, 3, append(append([]byte(nil), one...), binary.AppendVarint(nil, 1000)...)), "record 1: length 1000"},
		{"record with trailing bytes", batchtest.Craft(0, 0, 1, padded), "does not re-encode"},
		{"truncated record fields", batchtest.Craft(0, 0, 1, append(binary.AppendVarint(nil, 3), 0, 0, 0)), "record 0:"},
		{"fewer records than the count", batchtest.Craft(0, 5, 4, payload), "says 4 records, the payload holds 3"},
		{"offset deltas out of order", batchtest.Craft(0, 2, 3, payloadOf(t, withDeltas(0, 2, 1)...)), "record 2: offset delta 1"},
		{"repeated offset delta", batchtest.Craft(0, 2, 3, payloadOf(t, withDeltas(0, 1, 1)...)), "record 2: offset delta 1"},
		{"offset delta past the last", batchtest.Craft(0, 2, 3, payloadOf(t, withDeltas(0, 1, 5)...)), "record 2: offset delta 5"},
		{"negative offset delta", batchtest.Craft(0, 2, 2, payloadOf(t, withDeltas(-1, 1)...)), "record 0: offset delta -1"},
		{"gzip garbage", batchtest.Craft(1, 2, 3, payload), "decompressing"},
		{"unknown codec", batchtest.Craft(5, 2, 3, payload), "unknown compression codec 5"},
		{"zstd bomb with a declared size", batchtest.Craft(4, 0, 1, zstdDeclared.EncodeAll(make([]byte, recordbatch.MaxDecompressed+1), nil)), "more than 64 MiB"},
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
		{"snappy block claiming 4 GiB", batchtest.Craft(2, 0, 1, binary.AppendUvarint(nil, 1<<32-1)), "more than 64 MiB"},
		{"xerial chunks adding up past the bound", batchtest.Craft(2, 0, 1, xerial(
			chunk(s2.EncodeSnappy(nil, make([]byte, 1024))),
			chunk(binary.AppendUvarint(nil, recordbatch.MaxDecompressed-1023)))), "more than 64 MiB"},
		{"xerial chunk past the payload", batchtest.Craft(2, 0, 1, xerial([]byte{0, 0, 1, 0, 1})), "xerial"},
		{"control batch of two records", control(1, marker(0, 0, 0, 1), kmsg.Record{OffsetDelta: 1, Key: []byte{0, 0, 0, 1}}), "2 records over 2 offsets"},
		{"control batch over two offsets", control(1, marker(0, 0, 0, 1)), "1 records over 2 offsets"},
		{"control key too short", control(0, marker(0, 0)), "4-byte key"},
		{"unknown control type", control(0, marker(0, 0, 0, 7)), "control record type 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split, err := recordbatch.Split(tc.batch)
			if err != nil || len(split) != 1 {
				t.Fatalf("the header is sound, yet splitBatches: %d batches, %v", len(split), err)
			}
			b := split[0]
			if b.Attributes()&recordbatch.AttrControl != 0 {
				_, err := b.Kind()
				wantCorrupt(t, err, 100, tc.reason)
				return
			}
			_, err = b.Records()
			wantCorrupt(t, err, 100, tc.reason)
			if _, err := b.Runs(); err == nil {
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
		{"control", recordbatch.AttrControl | recordbatch.AttrTransactional, 0},
		{"data", 0, 9},
		{"compressed transactional data", 4 | recordbatch.AttrTransactional, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			split, err := recordbatch.Split(batchtest.Craft(tc.attrs, tc.delta, 0, nil))
			if err != nil || len(split) != 1 {
				t.Fatalf("%d batches, %v", len(split), err)
			}
			b := split[0]
			if k, err := b.Kind(); err != nil || k != recordbatch.Empty {
				t.Fatalf("kind %v, %v; want an empty batch", k, err)
			}
			if b.LastOffset() != 100+int64(tc.delta) || b.Contiguous() {
				t.Fatalf("offsets 100-%d, contiguous %v", b.LastOffset(), b.Contiguous())
			}
			if runs, err := b.Runs(); err != nil || len(runs) != 0 {
				t.Fatalf("%d runs, %v", len(runs), err)
			}
		})
	}
}

func TestRecordsDecodeEveryCodec(t *testing.T) {
	recs := withDeltas(0, 1, 2, 5, 6, 40)
	check := func(t *testing.T, b recordbatch.Batch) {
		t.Helper()
		got, err := b.Records()
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
		t.Run(fmt.Sprint("codec ", codec), func(t *testing.T) { check(t, batchtest.Source(t, 0, codec, recs, -1, 0)) })
	}
	t.Run("xerial snappy", func(t *testing.T) {
		// As snappy-java writes it: a header, then chunks of a length and a snappy block.
		plain := payloadOf(t, recs...)
		xerial := slices.Concat(recordbatch.XerialMagic, []byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(plain) > 0 {
			n := min(len(plain), 100)
			block := s2.EncodeSnappy(nil, plain[:n])
			xerial = append(binary.BigEndian.AppendUint32(xerial, uint32(len(block))), block...)
			plain = plain[n:]
		}
		check(t, batchtest.Craft(2, 40, int32(len(recs)), xerial))
	})
}

// BenchmarkFillerEncoding compares encoding a full filler batch (250,000 empty records,
// zstd) from record structs, as before, with encoding it straight to bytes; the process
// then keeps the result (fillerPayloads), so a head alignment pays this once.
func BenchmarkFillerEncoding(b *testing.B) {
	const n = 250_000 // a full-size filler batch of the data path
	b.Run("record structs", func(b *testing.B) {
		for b.Loop() {
			recs := make([]kmsg.Record, n)
			for i := range recs {
				recs[i] = kmsg.Record{OffsetDelta: int32(i)}
			}
			if _, err := recordbatch.Encode(recordbatch.Spec{Codec: 4}, recs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("straight to bytes", func(b *testing.B) {
		for b.Loop() {
			recordbatch.Compress(4, recordbatch.FillerRecords(n, nil))
		}
	})
}

// BenchmarkRewrite times readying a source batch for the destination against the CRC-32C
// over the whole batch that it used to compute.
func BenchmarkRewrite(b *testing.B) {
	for _, n := range []int{10, 300, 10_000} {
		batch := batchtest.Source(b, 0, 0, batchtest.Records(n, 1), 5, 0)
		b.Run(fmt.Sprintf("%dKiB/rewrite", len(batch)>>10), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for i := range b.N {
				recordbatch.Rewrite(batch, recordbatch.Producer{ID: 9, Sequence: int32(i)}, false)
			}
		})
		b.Run(fmt.Sprintf("%dKiB/whole-crc", len(batch)>>10), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			for range b.N {
				crc32.Checksum(batch[recordbatch.OffAttributes:], recordbatch.Castagnoli)
			}
		})
	}
}
