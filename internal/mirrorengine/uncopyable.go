package mirrorengine

import (
	"errors"
	"fmt"
)

// errUncopyable marks the data path's failures where the destination cannot become (or stay)
// identical to the source and retrying cannot change that: the partition stops with a
// message naming the offsets and waits for the operator.
var errUncopyable = errors.New("the source cannot be copied exactly")

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

func (e *BatchTooLargeError) Is(target error) bool { return target == errUncopyable }
