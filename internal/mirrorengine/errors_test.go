package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// TestClassify pins who deals with each kind of data path error.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		what string
		err  error
		want handling
	}{
		{"a leader moved", kerr.NotLeaderForPartition, sessionRetries},
		{"a dropped connection", fmt.Errorf("fetch: %w", io.ErrUnexpectedEOF), sessionRetries},
		{"a dial timeout", &net.OpError{Op: "dial", Err: context.DeadlineExceeded}, sessionRetries},
		{"a pipeline reordered", kerr.OutOfOrderSequenceNumber, sessionRetries},
		{"a replayed transaction fenced", kerr.ProducerFenced, sessionRetries},
		{"a broker refusing the records", kerr.InvalidRecord, runnerRetries},
		{"a missing ACL", authErr("destination", "write to t", kerr.TopicAuthorizationFailed), runnerRetries},
		{"a foreign write", &OffsetMismatchError{Topic: "t", Expected: 5, Actual: 6}, operatorActs},
		{"a corrupt batch", fmt.Errorf("session: %w", &recordbatch.CorruptError{Offset: 3, Reason: "crc"}), operatorActs},
		{"a batch too large", &BatchTooLargeError{Offset: 1, Size: 10, MaxMessageBytes: 5}, operatorActs},
		{"a source truncated", &SourceTruncatedError{}, operatorActs},
		{"a changed source", &SourceChangedError{What: "cluster id"}, operatorActs},
		{"an invariant broken", fmt.Errorf("%w: x", errInvariant), operatorActs},
		{"a last entry mismatch", &LastEntryMismatchError{}, operatorActs},
		{"an unknown error", errors.New("something"), sessionRetries},
	} {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("%s (%v): %d, want %d", tc.what, tc.err, got, tc.want)
		}
	}
}

// TestCommandErrorWrapsItsCause: a command's error keeps its cause for errors.Is/As, and
// its message for the API.
func TestCommandErrorWrapsItsCause(t *testing.T) {
	cause := &SourceChangedError{What: "cluster id", Expected: "a", Actual: "b"}
	err := error(cmdErr(CodeSourceClusterIDMismatch, "mirror %q: %w", "m", cause))
	var changed *SourceChangedError
	var ce *CommandError
	if !errors.As(err, &changed) || changed != cause || !errors.As(err, &ce) || ce.Message != `mirror "m": `+cause.Error() {
		t.Fatalf("%#v does not wrap its cause with the message", err)
	}
	if plain := cmdErr(CodeInvalidRequest, "no cause %d", 1); plain.Err != nil || plain.Message != "no cause 1" {
		t.Fatalf("%#v", plain)
	}
}
