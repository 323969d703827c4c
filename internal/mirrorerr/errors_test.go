package mirrorerr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// TestClassify pins who deals with each kind of data path error.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		what string
		err  error
		want mirrorerr.Handling
	}{
		{"a leader moved", kerr.NotLeaderForPartition, mirrorerr.SessionRetries},
		{"a dropped connection", fmt.Errorf("fetch: %w", io.ErrUnexpectedEOF), mirrorerr.SessionRetries},
		{"a dial timeout", &net.OpError{Op: "dial", Err: context.DeadlineExceeded}, mirrorerr.SessionRetries},
		{"a pipeline reordered", kerr.OutOfOrderSequenceNumber, mirrorerr.SessionRetries},
		{"a replayed transaction fenced", kerr.ProducerFenced, mirrorerr.SessionRetries},
		{"a source leader's high watermark behind", &mirrorerr.SourceBehindError{Topic: "t", DestinationEnd: 6, SourceHighWatermark: 5, SourceLogEnd: 6}, mirrorerr.SessionRetries},
		{"a destination past the source's log", &mirrorerr.DestinationAheadError{Topic: "t", DestinationEnd: 6, SourceHighWatermark: 5}, mirrorerr.OperatorActs},
		{"a broker refusing the records", kerr.InvalidRecord, mirrorerr.RunnerRetries},
		{"a missing ACL", mirrorerr.WrapAuth("destination", "write to t", kerr.TopicAuthorizationFailed), mirrorerr.RunnerRetries},
		{"a foreign write", &mirrorerr.OffsetMismatchError{Topic: "t", Expected: 5, Actual: 6}, mirrorerr.OperatorActs},
		{"a corrupt batch", fmt.Errorf("session: %w", &recordbatch.CorruptError{Offset: 3, Reason: "crc"}), mirrorerr.OperatorActs},
		{"a batch too large", &mirrorerr.BatchTooLargeError{Offset: 1, Size: 10, MaxMessageBytes: 5}, mirrorerr.OperatorActs},
		{"a source truncated", &mirrorerr.SourceTruncatedError{}, mirrorerr.OperatorActs},
		{"a changed source", &mirrorerr.SourceChangedError{What: "cluster id"}, mirrorerr.OperatorActs},
		{"an invariant broken", fmt.Errorf("%w: x", mirrorerr.ErrInvariant), mirrorerr.OperatorActs},
		{"a last entry mismatch", &mirrorerr.LastEntryMismatchError{}, mirrorerr.OperatorActs},
		{"a repeated marker", &mirrorerr.RepeatedMarkerError{Cause: &mirrorerr.OffsetMismatchError{Expected: 5, Actual: 6}}, mirrorerr.OperatorActs},
		{"an unknown error", errors.New("something"), mirrorerr.SessionRetries},
	} {
		if got := mirrorerr.Classify(tc.err); got != tc.want {
			t.Errorf("%s (%v): %d, want %d", tc.what, tc.err, got, tc.want)
		}
	}
}
