// Package batchtest builds record batches for tests of the code that reads and forwards them.
package batchtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// Records are n records with distinct keys, values and headers, offset deltas offsetStep apart.
func Records(n int, offsetStep int32) []kmsg.Record {
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

// Source encodes a batch as a source broker would hold it, at base offset base.
func Source(t testing.TB, base int64, codec int16, recs []kmsg.Record, pid int64, attrs int16) recordbatch.Batch {
	t.Helper()
	raw, err := recordbatch.Encode(recordbatch.Spec{Codec: codec, FirstTimestamp: 1_000, MaxTimestamp: 1_000 + int64(len(recs)*10), Producer: recordbatch.Producer{ID: pid, Epoch: 3, Sequence: 7}}, recs)
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint64(raw[recordbatch.OffBaseOffset:], uint64(base))
	binary.BigEndian.PutUint16(raw[recordbatch.OffAttributes:], uint16(int16(binary.BigEndian.Uint16(raw[recordbatch.OffAttributes:]))|attrs))
	binary.BigEndian.PutUint32(raw[recordbatch.OffCRC:], crc32.Checksum(raw[recordbatch.OffAttributes:], recordbatch.Castagnoli))
	return raw
}

// CheckCRC fails t unless b's CRC covers its bytes.
func CheckCRC(t testing.TB, b []byte) {
	t.Helper()
	if got, want := binary.BigEndian.Uint32(b[recordbatch.OffCRC:]), crc32.Checksum(b[recordbatch.OffAttributes:], recordbatch.Castagnoli); got != want {
		t.Fatalf("crc %x, want %x", got, want)
	}
}

// Craft builds a batch at base offset 100 from header fields and a raw payload, with a
// right length and CRC: what is wrong is in what the header and the payload say.
func Craft(attrs int16, lastOffsetDelta, count int32, payload []byte) recordbatch.Batch {
	b := kmsg.RecordBatch{FirstOffset: 100, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: lastOffsetDelta,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: count, Records: payload}
	return Fix(b.AppendTo(nil))
}

// Fix sets a whole batch's length and CRC from its bytes.
func Fix(raw []byte) []byte {
	binary.BigEndian.PutUint32(raw[recordbatch.OffBatchLength:], uint32(len(raw)-recordbatch.OffBatchLength-4))
	binary.BigEndian.PutUint32(raw[recordbatch.OffCRC:], crc32.Checksum(raw[recordbatch.OffAttributes:], recordbatch.Castagnoli))
	return raw
}
