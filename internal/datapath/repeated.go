package datapath

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// explainTimeout bounds the reads that name the cause of a failed exactness check.
const explainTimeout = 10 * time.Second

// aheadLookback is how far below a destination end past the source's the cause is looked
// for: a session stops at its first write past a repeat, so it lies near the end.
const aheadLookback = 10_000

// explainMismatch returns err, or a RepeatedMarkerError wrapping it when the destination
// offsets the failed exactness check names hold the marker of one of the partition's replayed
// transactions twice in a row. The worker cannot prevent that repeat (see
// mirrorerr.RepeatedMarkerError), so the operator is told it, not that someone else wrote to
// the destination or the source was rewritten.
func (m *PartitionMirror) explainMismatch(ctx context.Context, err error) error {
	var (
		mismatch *mirrorerr.OffsetMismatchError
		last     *mirrorerr.LastEntryMismatchError
		ahead    *mirrorerr.DestinationAheadError
		from, to int64 // a repeat at an offset in [from, to] explains err
	)
	switch {
	case errors.As(err, &mismatch):
		// What the session wrote at Expected landed at Actual: a repeat took an offset between.
		from, to = mismatch.Expected, mismatch.Actual
	case errors.As(err, &last):
		from, to = last.Offset, last.Offset
	case errors.As(err, &ahead):
		// A session wrote past a repeat before this one started: somewhere below the end.
		from, to = max(ahead.DestinationEnd-aheadLookback, 0), ahead.DestinationEnd-1
	default:
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, explainTimeout)
	defer cancel()
	replayed, rerr := m.replayedProducers(ctx)
	if rerr != nil || len(replayed) == 0 {
		return err
	}
	at, id, rerr := m.repeatedMarker(ctx, max(from-1, 0), to, replayed)
	if rerr != nil || at < 0 {
		return err
	}
	return &mirrorerr.RepeatedMarkerError{Topic: m.cfg.Topic, Partition: m.cfg.Partition, Offset: at, TransactionalID: id, Cause: err}
}

// replayedProducers returns the destination producer ids of the partition's replayed
// transactions, with their transactional ids.
func (m *PartitionMirror) replayedProducers(ctx context.Context) (map[int64]string, error) {
	prefix := PartitionTxnPrefix(m.cfg.Mirror, m.cfg.Topic, m.cfg.Partition)
	described, err := partitionTxns.ask(ctx, m.dst, prefix)
	if err != nil {
		return nil, err
	}
	ids := map[int64]string{}
	for _, d := range described {
		// Replayed transactions' ids end in their source producer id; the gap writers' and
		// the marker producer's legitimately write markers in a row.
		if _, err := strconv.ParseInt(strings.TrimPrefix(d.TxnID, prefix), 10, 64); err == nil {
			ids[d.ProducerID] = d.TxnID
		}
	}
	return ids, nil
}

// repeatedMarker returns the offset of the first marker in [from+1, to] that repeats the one
// right before it (same producer, epoch and outcome) for a producer of replayed, and that
// producer's transactional id; -1 if there is none. A replayed transaction holds data before
// its marker, so two of its producer's markers in a row are one marker written twice.
func (m *PartitionMirror) repeatedMarker(ctx context.Context, from, to int64, replayed map[int64]string) (int64, string, error) {
	meta, err := m.dst.Metadata(ctx, m.cfg.Topic, m.cfg.Partition)
	if err != nil {
		return -1, "", err
	}
	var prev recordbatch.Batch
	for next := from; next <= to; {
		f, err := m.dst.Fetch(ctx, meta, m.cfg.Topic, m.cfg.Partition, next, 1<<20)
		if err != nil {
			return -1, "", err
		}
		at := next
		for _, b := range f.Batches {
			if b.LastOffset() < next {
				continue
			}
			if b.BaseOffset() > to {
				return -1, "", nil
			}
			if repeats(prev, b) {
				if id, ok := replayed[b.ProducerID()]; ok {
					return b.BaseOffset(), id, nil
				}
			}
			prev, next = b, b.LastOffset()+1
		}
		if next == at {
			break // nothing more below the high watermark
		}
	}
	return -1, "", nil
}

// repeats tells whether b is a marker right after prev that repeats it.
func repeats(prev, b recordbatch.Batch) bool {
	if prev == nil || b.BaseOffset() != prev.LastOffset()+1 || b.ProducerID() != prev.ProducerID() || b.Producer().Epoch != prev.Producer().Epoch {
		return false
	}
	pk, perr := prev.Kind()
	k, err := b.Kind()
	return perr == nil && err == nil && pk == k && (k == recordbatch.Commit || k == recordbatch.Abort)
}
