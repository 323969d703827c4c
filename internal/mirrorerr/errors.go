// Package mirrorerr is the engine's error taxonomy: the errors the data path and the control
// plane report, and the one classification of who deals with each (Classify).
package mirrorerr

import (
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// OffsetMismatchError means the destination assigned a record (or marker) another offset
// than the source had: something else wrote to the destination partition, or the
// destination was changed behind the mirror's back. The partition must stop; writing past
// it would make the destination silently differ from the source.
type OffsetMismatchError struct {
	Topic     string
	Partition int32
	Expected  int64 // the source offset
	Actual    int64 // the offset the destination assigned
}

func (e *OffsetMismatchError) Error() string {
	return fmt.Sprintf("destination %s[%d] assigned offset %d where the source has offset %d: another writer or a changed destination log; mirroring of this partition stopped",
		e.Topic, e.Partition, e.Actual, e.Expected)
}

// LastEntryMismatchError means the destination's last entry differs from the source's at the
// same offset: the source was rewritten below what was copied (an unclean leader election)
// or the destination was written behind the mirror's back. Continuing would build on a
// destination that is not a prefix of the source.
type LastEntryMismatchError struct {
	Topic       string
	Partition   int32
	Offset      int64
	Source      string // what the source holds there
	Destination string
}

func (e *LastEntryMismatchError) Error() string {
	return fmt.Sprintf("destination %s[%d] offset %d holds a different %s than the source's %s at the same offset: the source was rewritten (an unclean leader election) or the destination was written by someone else; mirroring of this partition stopped (restart the topic with divergence = \"recreate\" to copy it again)",
		e.Topic, e.Partition, e.Offset, e.Destination, e.Source)
}

// RepeatedMarkerError is a destination partition holding the marker that ended one of the
// mirror's replayed transactions twice, at consecutive offsets. The destination's transaction
// coordinator writes that marker, and writes it again when its first write's answer was lost
// (the partition's leader moved) or when a new coordinator completes the transaction (the
// coordinator moved before recording it complete); Kafka appends the repeat as a marker of its
// own (ProducerAppendInfo). The destination then holds an offset the source does not have, and
// an exactness check (Cause) found the offsets apart.
type RepeatedMarkerError struct {
	Topic           string
	Partition       int32
	Offset          int64 // of the repeat; the first is at Offset-1
	TransactionalID string
	Cause           error
}

func (e *RepeatedMarkerError) Error() string {
	return fmt.Sprintf("destination %s[%d] offset %d repeats the transaction marker at offset %d of the mirror's replayed transaction %s: the destination's transaction coordinator wrote it again after a destination leader or coordinator move (Kafka appends such a repeat), so the destination holds an offset the source does not have (%v); mirroring of this partition stopped (restart the topic with divergence = \"recreate\" to copy it again)",
		e.Topic, e.Partition, e.Offset, e.Offset-1, e.TransactionalID, e.Cause)
}

func (e *RepeatedMarkerError) Unwrap() error { return e.Cause }

// DestinationNotEmptyError is returned at a first start when the destination partition
// already holds records: mirroring into it would interleave foreign data with the source's.
type DestinationNotEmptyError struct {
	Topic     string
	Partition int32
	EndOffset int64
}

func (e *DestinationNotEmptyError) Error() string {
	return fmt.Sprintf("destination %s[%d] is not empty (end offset %d): a first mirror start needs an empty destination partition",
		e.Topic, e.Partition, e.EndOffset)
}

// DestinationAheadError means the destination holds more offsets than the source: the two
// logs diverged (for example the source topic was truncated or recreated).
type DestinationAheadError struct {
	Topic               string
	Partition           int32
	DestinationEnd      int64
	SourceHighWatermark int64
}

func (e *DestinationAheadError) Error() string {
	return fmt.Sprintf("destination %s[%d] ends at offset %d, past the source high watermark %d: the logs diverged",
		e.Topic, e.Partition, e.DestinationEnd, e.SourceHighWatermark)
}

// SourceBehindError means the source's high watermark lies below the destination's end
// while the source leader's log holds the offsets in between: a leader elected a moment ago
// has not learnt its predecessor's high watermark yet. Retrying waits for it.
type SourceBehindError struct {
	Topic               string
	Partition           int32
	DestinationEnd      int64
	SourceHighWatermark int64
	SourceLogEnd        int64
}

func (e *SourceBehindError) Error() string {
	return fmt.Sprintf("source %s[%d]: its high watermark %d is below the destination end %d while its leader's log, which ends at %d, holds those offsets: a source leader elected a moment ago learns the high watermark from its followers; waiting for it",
		e.Topic, e.Partition, e.SourceHighWatermark, e.DestinationEnd, e.SourceLogEnd)
}

// ForeignWriteError means the destination partition holds offsets the mirror never wrote:
// something else wrote to a topic that is read-only while mirrored.
type ForeignWriteError struct {
	Topic               string
	Partition           int32
	DestinationEnd      int64
	Mirrored            int64 // the destination end the mirror wrote up to
	SourceHighWatermark int64
}

func (e *ForeignWriteError) Error() string {
	return fmt.Sprintf("destination %s[%d] ends at offset %d, but the mirror wrote only up to offset %d (source high watermark %d): %d records were written by something else to a topic that must be read-only while mirrored",
		e.Topic, e.Partition, e.DestinationEnd, e.Mirrored, e.SourceHighWatermark, e.DestinationEnd-e.Mirrored)
}

// CoordinatorAbortError is a destination partition whose last entry is an abort marker where
// the source holds data or a commit marker: the destination's transaction coordinator aborted
// a replayed transaction (it stayed open longer than transaction.max.timeout.ms: a long
// pause, an outage, a source transaction open for longer) and wrote its marker at an offset
// the source uses otherwise. Offsets no longer line up, and continuing would turn the
// source's commit into a lone marker that read_committed consumers see as an empty
// transaction: the partition fails for good.
type CoordinatorAbortError struct {
	Topic     string
	Partition int32
	Offset    int64
	Source    string
}

func (e *CoordinatorAbortError) Error() string {
	return fmt.Sprintf("destination %s[%d] offset %d holds an abort marker where the source holds %s: the destination's transaction coordinator aborted a replayed transaction that stayed open longer than its transaction.max.timeout.ms; the destination no longer lines up with the source (restart the topic with divergence = \"recreate\" to copy it again)",
		e.Topic, e.Partition, e.Offset, e.Source)
}

// UnknownTopicError names a topic missing on one side.
type UnknownTopicError struct {
	Cluster string // "source" or "destination"
	Topic   string
}

func (e *UnknownTopicError) Error() string {
	return fmt.Sprintf("topic %q does not exist on the %s cluster", e.Topic, e.Cluster)
}

// PartitionCountMismatchError means the destination topic cannot hold the source's
// partitions one to one.
type PartitionCountMismatchError struct {
	Topic       string
	Source      int
	Destination int
}

func (e *PartitionCountMismatchError) Error() string {
	return fmt.Sprintf("topic %q has %d partitions on the source but %d on the destination: partition counts must match",
		e.Topic, e.Source, e.Destination)
}

// SourceChangedError means the source is not what the mirror was bound to: another
// cluster answers at its address, or the topic was deleted and recreated (offsets restart).
type SourceChangedError struct {
	What             string // "cluster id" or "topic id of <topic>"
	Expected, Actual string
}

func (e *SourceChangedError) Error() string {
	return fmt.Sprintf("the source %s is %q, not %q as when mirroring started: the source changed and mirroring of it stopped", e.What, e.Actual, e.Expected)
}

// AuthorizationError wraps a broker's authorization failure with what was attempted.
type AuthorizationError struct {
	Cluster string
	Action  string
	Err     error
}

func (e *AuthorizationError) Error() string {
	return fmt.Sprintf("not authorized on the %s cluster to %s: %v", e.Cluster, e.Action, e.Err)
}

func (e *AuthorizationError) Unwrap() error { return e.Err }

// Handling is who deals with a data path error: the one classification the partition's
// session loop (PartitionMirror.Run) and its runner (FAILED, retryable or not) both follow.
type Handling int

const (
	// SessionRetries: transient — a leader moved, a connection dropped, a coordinator loads.
	// The partition stays MIRRORING and its next session starts after a short back-off.
	SessionRetries Handling = iota
	// RunnerRetries: the partition goes FAILED and its runner retries it with the KIP's
	// back-off: trying again at once will not help, time may (an ACL granted, a broker
	// error that is not transient).
	RunnerRetries
	// OperatorActs: the partition goes FAILED for good; retrying cannot fix it (diverged
	// logs, a foreign write, a corrupt batch, a changed source) and the operator must act.
	OperatorActs
)

// Classify says who deals with err (not nil).
func Classify(err error) Handling {
	var auth *AuthorizationError
	switch {
	case errors.As(err, &auth):
		return RunnerRetries
	case needsOperator(err):
		return OperatorActs
	case transient(err):
		return SessionRetries
	}
	return RunnerRetries
}

// transient reports whether an error is one the next session may not meet: leader moves,
// coordinator loads, connections dropping.
func transient(err error) bool {
	var netErr net.Error
	switch {
	case errors.Is(err, kerr.OutOfOrderSequenceNumber),
		errors.Is(err, kerr.ConcurrentTransactions),
		errors.Is(err, kerr.UnknownTopicOrPartition), // metadata not yet propagated
		errors.Is(err, kerr.InvalidTxnState),
		// A replayed transaction's epoch moved on: the destination coordinator aborted it
		// (it outlived transaction.max.timeout.ms; Kafka 4.0 answers PRODUCER_FENCED, 4.4
		// INVALID_TXN_STATE) or a session of ours re-initialized the id. The next session
		// reads the destination again and continues, or fails naming the offsets.
		errors.Is(err, kerr.ProducerFenced),
		errors.Is(err, kerr.InvalidProducerEpoch):
		return true
	case errors.As(err, &netErr):
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	// Dial failures and dropped connections surface as plain errors from kgo.
	return true
}

// needsOperator is true for errors that retrying cannot fix.
func needsOperator(err error) bool {
	var (
		mismatch *OffsetMismatchError
		notEmpty *DestinationNotEmptyError
		ahead    *DestinationAheadError
		unknown  *UnknownTopicError
		count    *PartitionCountMismatchError
		changed  *SourceChangedError
		corrupt  *recordbatch.CorruptError
		aborted  *CoordinatorAbortError
		last     *LastEntryMismatchError
		repeated *RepeatedMarkerError
	)
	return errors.As(err, &mismatch) || errors.As(err, &notEmpty) || errors.As(err, &ahead) ||
		errors.As(err, &unknown) || errors.As(err, &count) || errors.As(err, &changed) ||
		errors.As(err, &corrupt) || errors.As(err, &aborted) || errors.As(err, &last) || errors.As(err, &repeated) ||
		errors.Is(err, ErrInvariant) || errors.Is(err, ErrUncopyable)
}

var ErrInvariant = errors.New("mirror invariant broken")

// ErrUncopyable marks the data path's failures where the destination cannot become (or stay)
// identical to the source and retrying cannot change that: the partition stops with a
// message naming the offsets and waits for the operator.
var ErrUncopyable = errors.New("the source cannot be copied exactly")

// WrapAuth turns authorization error codes into an AuthorizationError naming the action.
func WrapAuth(cluster, action string, err error) error {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.SaslAuthenticationFailed) {
		return &AuthorizationError{Cluster: cluster, Action: action, Err: err}
	}
	return err
}
