package recordbatch_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// The parser of bytes from outside the worker: a source broker's record batches (the
// __mirror_state records are fuzzed in store_fuzz_test.go). `go test` runs the seed corpora in testdata/fuzz; `go test -fuzz`
// explores from them.

// FuzzBatches feeds a fetch answer's record bytes through the codec: Split, kind,
// records, runs, and the re-encoding of runs. With fixCRC the CRCs are made right first, so
// that mutations reach the record decoding instead of stopping at the checksum.
func FuzzBatches(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte, fixCRC bool) {
		if fixCRC {
			raw = fixCRCs(raw)
		}
		batches, err := recordbatch.Split(raw)
		if err != nil {
			mustBeCorrupt(t, err)
			return
		}
		for _, b := range batches {
			checkDecoded(t, b)
			checkRewrite(t, b)
		}
	})
}

// fixCRCs returns raw with the CRC of every whole batch recomputed.
func fixCRCs(raw []byte) []byte {
	raw = bytes.Clone(raw)
	for rest := raw; len(rest) >= recordbatch.HeaderLen; {
		n := recordbatch.OffBatchLength + 4 + int64(int32(binary.BigEndian.Uint32(rest[recordbatch.OffBatchLength:])))
		if n < recordbatch.HeaderLen || n > int64(len(rest)) {
			break
		}
		binary.BigEndian.PutUint32(rest[recordbatch.OffCRC:], crc32.Checksum(rest[recordbatch.OffAttributes:n], recordbatch.Castagnoli))
		rest = rest[n:]
	}
	return raw
}

// checkRewrite checks that a checked batch, rewritten for the destination, has the CRC of
// its new bytes.
func checkRewrite(t *testing.T, b recordbatch.Batch) {
	out := recordbatch.Rewrite(bytes.Clone(b), recordbatch.Producer{ID: 12345, Epoch: 6, Sequence: 789}, b.Attributes()&recordbatch.AttrTransactional != 0)
	if got, want := binary.BigEndian.Uint32(out[recordbatch.OffCRC:]), crc32.Checksum(out[recordbatch.OffAttributes:], recordbatch.Castagnoli); got != want {
		t.Fatalf("rewritten batch's CRC %08x, want %08x", got, want)
	}
}

func mustBeCorrupt(t *testing.T, err error) {
	t.Helper()
	var c *recordbatch.CorruptError
	if !errors.As(err, &c) {
		t.Fatalf("%v is not a corrupt batch error", err)
	}
}

// checkDecoded checks that what decodes is consistent: the kind agrees with the header,
// the runs cover exactly the records at their offsets, and a re-encoded run decodes to the
// same records.
func checkDecoded(t *testing.T, b recordbatch.Batch) {
	kind, kindErr := b.Kind()
	if kindErr != nil {
		mustBeCorrupt(t, kindErr)
		if b.Attributes()&recordbatch.AttrControl == 0 {
			t.Fatalf("kind of a data batch failed: %v", kindErr)
		}
	} else if (kind == recordbatch.Empty) != (b.RecordCount() == 0) {
		t.Fatalf("kind %v for %d records", kind, b.RecordCount())
	}
	recs, err := b.Records()
	runs, runsErr := b.Runs()
	if err != nil {
		mustBeCorrupt(t, err)
		if runsErr == nil {
			t.Fatal("runs decoded a batch that records refused")
		}
		return
	}
	if runsErr != nil {
		t.Fatalf("records decoded, runs did not: %v", runsErr)
	}
	if len(recs) != int(b.RecordCount()) {
		t.Fatalf("%d records decoded, the header says %d", len(recs), b.RecordCount())
	}
	covered := 0
	for i, r := range runs {
		last := r.Base + int64(len(r.Records)) - 1
		if len(r.Records) == 0 || r.Base < b.BaseOffset() || last > b.LastOffset() {
			t.Fatalf("run %d: %d records from %d, outside %d-%d", i, len(r.Records), r.Base, b.BaseOffset(), b.LastOffset())
		}
		if i > 0 {
			prev := runs[i-1]
			if r.Base <= prev.Base+int64(len(prev.Records)) {
				t.Fatalf("run %d at %d does not follow run %d after a hole", i, r.Base, i-1)
			}
		}
		for j, rec := range r.Records {
			if off := b.BaseOffset() + int64(rec.OffsetDelta); off != r.Base+int64(j) || !reflect.DeepEqual(rec, recs[covered+j]) {
				t.Fatalf("run %d record %d: offset %d, want %d, or not the batch's record", i, j, off, r.Base+int64(j))
			}
		}
		covered += len(r.Records)
	}
	if covered != len(recs) {
		t.Fatalf("runs cover %d of %d records", covered, len(recs))
	}
	if b.Contiguous() && (len(runs) != 1 || runs[0].Base != b.BaseOffset()) {
		t.Fatalf("a contiguous batch split into %d runs", len(runs))
	}
	if kindErr != nil || kind == recordbatch.Commit || kind == recordbatch.Abort {
		return
	}
	for _, r := range runs {
		checkReencoded(t, b, r, kind == recordbatch.TxnData)
	}
}

// checkReencoded checks what the destination gets for a run: one sound contiguous batch
// with the records' keys, values (null stays null: a tombstone stays one), headers and
// absolute timestamps.
func checkReencoded(t *testing.T, src recordbatch.Batch, r recordbatch.Run, txn bool) {
	enc, err := recordbatch.ReencodeRun(src, r, recordbatch.Producer{ID: 1, Epoch: 2, Sequence: 3}, txn)
	if err != nil {
		t.Fatalf("re-encoding a run: %v", err)
	}
	split, err := recordbatch.Split(enc)
	if err != nil || len(split) != 1 || !split[0].Contiguous() || int(split[0].RecordCount()) != len(r.Records) {
		t.Fatalf("re-encoded run: %d batches, %v", len(split), err)
	}
	got, err := split[0].Records()
	if err != nil {
		t.Fatalf("re-encoded run does not decode: %v", err)
	}
	var srcHdr, outHdr kmsg.RecordBatch
	if srcHdr.ReadFrom(src) != nil || outHdr.ReadFrom(split[0]) != nil {
		t.Fatal("headers do not decode")
	}
	for i, want := range r.Records {
		g := got[i]
		if !bytes.Equal(g.Key, want.Key) || (g.Key == nil) != (want.Key == nil) ||
			!bytes.Equal(g.Value, want.Value) || (g.Value == nil) != (want.Value == nil) ||
			!reflect.DeepEqual(g.Headers, want.Headers) ||
			outHdr.FirstTimestamp+g.TimestampDelta64 != srcHdr.FirstTimestamp+want.TimestampDelta64 {
			t.Fatalf("re-encoded record %d differs:\n got %+v\nwant %+v", i, g, want)
		}
	}
}
