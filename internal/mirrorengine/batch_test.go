package mirrorengine

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

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

func TestSplitBatchesRejectsOldMessageFormat(t *testing.T) {
	a := sourceBatch(t, 0, 0, testRecords(1, 1), -1, 0)
	a[offMagic] = 1
	if _, err := splitBatches(a); err == nil {
		t.Fatal("message format v1 accepted")
	}
}

func TestForwardBatchKeepsPayloadAndRewritesProducer(t *testing.T) {
	for _, codec := range []int16{0, 1, 2, 3, 4} {
		src := sourceBatch(t, 500, codec, testRecords(5, 1), 42, attrTransactional|attrLogAppendTime)
		out := rawBatch(forwardBatch(src, producerIdentity{id: 9, epoch: 2, sequence: 11}, false))
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
		txn := rawBatch(forwardBatch(src, producerIdentity{id: 9, epoch: 2}, true))
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
	b, err := fillerBatch(100_000, nil, 5, producerIdentity{id: 1})
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
