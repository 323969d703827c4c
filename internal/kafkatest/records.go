package kafkatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	decompressor = kgo.DefaultDecompressor()
	crc32c       = crc32.MakeTable(crc32.Castagnoli)
)

// Batch attribute bits (RecordBatch v2).
const (
	attrCodec         = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20
)

// splitBatches cuts a RecordBatches byte string at each batch's length field
// and drops a trailing partial batch, as a consumer must.
func splitBatches(raw []byte) [][]byte {
	var out [][]byte
	for len(raw) >= 12 {
		n := 12 + int64(int32(binary.BigEndian.Uint32(raw[8:12])))
		if n < 12 || n > int64(len(raw)) {
			break
		}
		out = append(out, raw[:n])
		raw = raw[n:]
	}
	return out
}

// errDecompress is a batch whose records do not decompress.
var errDecompress = errors.New("records do not decompress")

// batchRecords decompresses a batch's records and parses every record
// present (which need not be NumRecords of them).
func batchRecords(b *kmsg.RecordBatch) ([]kmsg.Record, error) {
	data := b.Records
	if codec := b.Attributes & attrCodec; codec != 0 {
		var err error
		data, err = decompressor.Decompress(data, kgo.CompressionCodecType(codec))
		if err != nil {
			return nil, fmt.Errorf("%w (codec %d): %v", errDecompress, codec, err)
		}
	}
	// Every record takes at least 7 bytes; sizing up front keeps million-record
	// batches (the mirror's filler) from reallocating the slice again and again.
	recs := make([]kmsg.Record, 0, max(0, min(int(b.NumRecords), len(data)/7+1)))
	for len(data) > 0 {
		// Each record starts with its length as a zig-zag varint, the
		// encoding binary.Varint reads.
		l, n := binary.Varint(data)
		if n <= 0 || l < 0 || l > int64(len(data)-n) {
			return recs, errors.New("truncated record")
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:n+int(l)]); err != nil {
			return recs, fmt.Errorf("record %d: %w", len(recs), err)
		}
		recs = append(recs, r)
		data = data[n+int(l):]
	}
	return recs, nil
}

// validateProduceBatch applies the checks of Kafka's LogValidator that kfake
// skips (Kafka's LogValidator.validateBatch and validateRecord). It returns code 0 when
// the batch passes them, or when it is malformed in a way kfake already
// rejects (bad length, CRC, magic, codec, control bit): kfake answers those
// itself. nullKey reports a record without a key, which only a compacted
// topic refuses.
func validateProduceBatch(raw []byte) (code int16, reason string, nullKey bool) {
	var b kmsg.RecordBatch
	if len(raw) < 61 || b.ReadFrom(raw) != nil || int(b.Length) != len(raw)-12 ||
		b.Magic != 2 || b.CRC != int32(crc32.Checksum(raw[21:], crc32c)) ||
		b.Attributes&attrControl != 0 || b.Attributes&attrCodec > 4 {
		return 0, "", false
	}
	invalid := kerr.InvalidRecord.Code
	if b.NumRecords <= 0 {
		return invalid, fmt.Sprintf("Invalid reported count for record batch: %d", b.NumRecords), false
	}
	if int64(b.LastOffsetDelta)+1 != int64(b.NumRecords) {
		return invalid, fmt.Sprintf("Inconsistent batch offset range: lastOffsetDelta %d but %d records", b.LastOffsetDelta, b.NumRecords), false
	}
	if b.ProducerID >= 0 && b.FirstSequence < 0 {
		return invalid, fmt.Sprintf("Invalid sequence number %d for producer %d", b.FirstSequence, b.ProducerID), false
	}
	// Apache Kafka answers a record that does not parse with INVALID_RECORD, and records
	// that do not decompress with UNKNOWN_SERVER_ERROR (its decompressing stream's
	// exception is not mapped to a code); proven on 4.0 and 4.4 (TestKafkaProduceValidation).
	recs, err := batchRecords(&b)
	switch {
	case errors.Is(err, errDecompress):
		return kerr.UnknownServerError.Code, "Corrupt records: " + err.Error(), false
	case err != nil:
		return invalid, "Invalid records: " + err.Error(), false
	}
	if len(recs) != int(b.NumRecords) {
		return invalid, fmt.Sprintf("Batch declares %d records but holds %d", b.NumRecords, len(recs)), false
	}
	for i := range recs {
		if recs[i].Key == nil {
			nullKey = true
		}
	}
	return 0, "", nullKey
}
