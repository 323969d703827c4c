package mirrorerr

import (
	"fmt"
)

// BatchTooLargeError is a source batch the destination topic refuses for its size. Only the
// batch as it is keeps its offsets, so the partition stops there.
type BatchTooLargeError struct {
	Offset          int64 // the batch's base offset
	Size            int   // bytes of the batch sent
	MaxMessageBytes int   // the destination topic's effective max.message.bytes
	Compression     string
}

func (e *BatchTooLargeError) Error() string {
	s := fmt.Sprintf("the source record batch at offset %d is %d bytes, more than the destination topic's max.message.bytes %d", e.Offset, e.Size, e.MaxMessageBytes)
	if e.Compression != "" {
		s = fmt.Sprintf("the source record batch at offset %d (%d bytes) is larger than the destination topic's max.message.bytes %d once recompressed to its compression.type %s", e.Offset, e.Size, e.MaxMessageBytes, e.Compression)
	}
	return s + "; raise max.message.bytes (or set compression.type=producer) on the destination topic and restart the partition"
}

func (e *BatchTooLargeError) Is(target error) bool { return target == ErrUncopyable }

// SourceTruncatedError: the source log was truncated below what the destination holds (an
// unclean leader election) and its offsets from EpochEnd on now hold other records.
type SourceTruncatedError struct {
	Epoch          int32 // the source leader epoch of the last batch copied
	EpochEnd       int64 // where the source's log of that epoch now ends
	DestinationEnd int64
}

func (e *SourceTruncatedError) Error() string {
	return fmt.Sprintf("the source log of leader epoch %d now ends at offset %d, but the destination holds offsets up to %d: the source was truncated (unclean leader election) and offsets %d to %d differ; mirroring of this partition stopped",
		e.Epoch, e.EpochEnd, e.DestinationEnd-1, e.EpochEnd, e.DestinationEnd-1)
}

func (e *SourceTruncatedError) Is(target error) bool { return target == ErrUncopyable }
