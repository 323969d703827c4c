package datapath

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// The data path's decisions, free of I/O: what one fetch answer means for the destination.
// Every shape a real broker can answer with is a row of plan_test.go; partition.go only
// executes the writes. Throttled answers (no partitions at all) never get here: fetch waits
// them out.

// writeKind is what the destination gets for a stretch of offsets.
type writeKind int

const (
	writeFiller     writeKind = iota // below a source log start the destination must still reach: empty records, deleted right after
	writeGap                         // offsets without a source record: one lone abort marker each
	writeForward                     // a contiguous source batch, forwarded raw
	writeRun                         // one contiguous run of a compacted source batch, re-encoded
	writeEndTxn                      // a source marker ending its producer's replayed transaction
	writeLoneMarker                  // a source marker with no replayed transaction open: a lone marker of its kind
)

func (k writeKind) String() string {
	return [...]string{"filler", "gap", "forward", "run", "end transaction", "lone marker"}[k]
}

// write is one step of a plan: n destination offsets from offset at.
type write struct {
	kind   writeKind
	at, n  int64
	batch  recordbatch.Batch // forward, run and markers: the source batch
	run    recordbatch.Run   // run: its records
	txn    bool              // forward and run: data of a source transaction
	pid    int64             // transaction data and markers: the source producer id
	commit bool              // markers
}

// encode returns the batch to produce for a forward or run write.
func (w write) encode(as recordbatch.Producer) ([]byte, error) {
	if w.kind == writeRun {
		return recordbatch.ReencodeRun(w.batch, w.run, as, w.txn)
	}
	// In place: a fetch answer is read into a buffer of its own, and a forwarded batch is
	// not read again once encoded (its leader epoch is taken before).
	return recordbatch.Rewrite(w.batch, as, w.txn), nil
}

type planInput struct {
	next    int64          // the destination end offset
	alignTo int64          // a source log start the destination has not reached yet; 0 if none
	open    map[int64]bool // source producer ids whose replayed transaction is open on the destination
	// continuing: with a pending log start, the source producer ids whose transaction is still
	// open at the source from below next (so its marker was not deleted); nil when the source
	// cannot tell.
	continuing map[int64]bool
	maxSize    int // the destination topic's max.message.bytes; 0 if unknown
	fetched    kafkareq.Fetched
}

type plan struct {
	writes []write
	next   int64         // the destination end offset once the writes are done
	retry  time.Duration // wait before the next fetch
	err    error         // the source cannot be copied past the writes
}

// emptyAnswerRetry paces fetches answered without records below the high watermark. A real
// broker already waited (remote.fetch.max.wait.ms) before answering so.
const emptyAnswerRetry = 50 * time.Millisecond

// planFetch decides the writes for one fetch answer, read from max(next, alignTo).
func planFetch(in planInput) plan {
	p := planner{plan: plan{next: in.next}, alignTo: in.alignTo, maxSize: in.maxSize, open: maps.Clone(in.open), continuing: in.continuing}
	if p.open == nil {
		p.open = map[int64]bool{}
	}
	f := in.fetched
	if in.alignTo > in.next {
		p.endsFirst = endsFirst(f.Batches)
	}
	if len(f.Batches) == 0 {
		// A tiered-storage read that did not finish in time answers NONE, the real high
		// watermark and no records (DelayedRemoteFetch): those offsets are not known to be
		// gaps. Gaps are only ever filled up to a batch actually received.
		if f.HighWatermark > max(in.next, in.alignTo) {
			p.retry = emptyAnswerRetry
		} else {
			// The source holds no record from its log start on (retention emptied it): what
			// lies below was deleted, whatever an answer would hold.
			p.fill(in.alignTo)
		}
		return p.plan
	}
	for _, b := range f.Batches {
		if err := p.batch(b); err != nil {
			p.err = err
			break
		}
	}
	return p.plan
}

type planner struct {
	plan
	alignTo    int64
	maxSize    int
	open       map[int64]bool
	continuing map[int64]bool
	endsFirst  map[int64]bool // with a pending log start: producers whose first batch in the answer is a marker
}

// endsFirst returns the producers whose first batch among batches is a marker.
func endsFirst(batches []recordbatch.Batch) map[int64]bool {
	first := map[int64]bool{}
	for _, b := range batches {
		pid := b.ProducerID()
		if _, seen := first[pid]; seen {
			continue
		}
		kind, err := b.Kind()
		first[pid] = err == nil && (kind == recordbatch.Commit || kind == recordbatch.Abort)
	}
	return first
}

// endedBelow returns the transactions open on the destination whose source marker may lie
// below the pending log start, in the order they are aborted there: not one the source still
// has open from below next, nor one whose marker comes first in the answer (it ends the
// replayed transaction where the source has it; what the transaction wrote before is gone
// on both sides).
func (p *planner) endedBelow() []int64 {
	var pids []int64
	for _, pid := range slices.Sorted(maps.Keys(p.open)) {
		if p.open[pid] && !p.continuing[pid] && !p.endsFirst[pid] {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (p *planner) add(w write) {
	w.at = p.next
	p.next += w.n
	p.writes = append(p.writes, w)
	if w.txn {
		p.open[w.pid] = true // from here on: a transaction's data opens it (after any fill before it)
	}
}

// fill covers [next, to), where the source has no record: filler below the pending log start,
// lone abort markers from it on.
//
// Offsets below the pending log start were deleted at the source before they were copied,
// and with them maybe the markers of transactions replayed on the destination so far: those
// are aborted first, inside the stretch that is deleted right after, so no transaction the
// source ended stays open on the destination. Each such marker had an offset of its own in
// the stretch, so there is room for them all; the transactions known to go on keep theirs
// open. One that ended after the source log start moved, with its marker past this answer,
// is aborted too (its data after the log start is replayed anew, its marker becomes a lone
// one): only if those leave no room does a transaction whose marker was deleted stay open.
func (p *planner) fill(to int64) {
	if end := min(to, p.alignTo); p.next < end {
		for _, pid := range p.endedBelow() {
			if p.next == end {
				break
			}
			delete(p.open, pid)
			p.add(write{kind: writeEndTxn, n: 1, pid: pid})
		}
	}
	if end := min(to, p.alignTo); p.next < end {
		p.add(write{kind: writeFiller, n: end - p.next})
	}
	if p.next >= to {
		return
	}
	if last := len(p.writes) - 1; last >= 0 && p.writes[last].kind == writeGap {
		// Holes of batches in a row (emptied by the cleaner) are one run of markers.
		p.writes[last].n += to - p.next
		p.next = to
		return
	}
	p.add(write{kind: writeGap, n: to - p.next})
}

func (p *planner) batch(b recordbatch.Batch) error {
	if b.LastOffset() < p.next {
		return nil // on the destination already (a fetch starts at the batch holding its offset)
	}
	kind, err := b.Kind()
	if err != nil {
		return err
	}
	txn := kind == recordbatch.TxnData
	pid := b.ProducerID()
	switch kind {
	case recordbatch.Empty:
		// The cleaner keeps an emptied batch for its producer state (LogCleaner,
		// MemoryRecords.filterTo): its whole range is a gap.
		p.fill(b.LastOffset() + 1)
		return nil
	case recordbatch.Commit, recordbatch.Abort:
		p.fill(b.BaseOffset())
		commit := kind == recordbatch.Commit
		if p.open[pid] {
			delete(p.open, pid)
			p.add(write{kind: writeEndTxn, n: 1, batch: b, pid: pid, commit: commit})
		} else {
			// Nothing replayed to end (the transaction began below the log start, or the
			// source holds a lone marker itself): a lone marker of the same kind.
			p.add(write{kind: writeLoneMarker, n: 1, batch: b, pid: pid, commit: commit})
		}
		return nil
	}
	if b.Contiguous() {
		if b.BaseOffset() < p.next {
			// Contiguous batches are only ever written whole.
			return fmt.Errorf("%w: source batch %d-%d starts below the destination end %d", mirrorerr.ErrInvariant, b.BaseOffset(), b.LastOffset(), p.next)
		}
		if p.maxSize > 0 && len(b) > p.maxSize {
			// A broker checks the size of the batch it receives before anything else
			// (UnifiedLog.analyzeAndValidateRecords): splitting it would move offsets.
			return &mirrorerr.BatchTooLargeError{Offset: b.BaseOffset(), Size: len(b), MaxMessageBytes: p.maxSize}
		}
		p.fill(b.BaseOffset())
		p.add(write{kind: writeForward, n: int64(b.RecordCount()), batch: b, txn: txn, pid: pid})
		return nil
	}
	// Compacted: Apache Kafka's cleaner keeps the base and the original last offset
	// (leading, inner and trailing holes); kfake's keeps the base and shrinks the last
	// offset to the last record kept. Each run is re-encoded; the destination end may lie
	// inside the batch when an earlier session wrote part of it.
	runs, err := b.Runs()
	if err != nil {
		return err
	}
	for _, r := range runs {
		if skip := p.next - r.Base; skip > 0 {
			if skip >= int64(len(r.Records)) {
				continue
			}
			r.Base, r.Records = p.next, r.Records[skip:]
		}
		p.fill(r.Base)
		p.add(write{kind: writeRun, n: int64(len(r.Records)), batch: b, run: r, txn: txn, pid: pid})
	}
	p.fill(b.LastOffset() + 1)
	return nil
}

// checkLineage decides whether the destination still continues the source after a leader
// change: the source log of the epoch of the last batch copied must reach the destination
// end. Otherwise an unclean election truncated the source below what was copied and its
// offsets now hold other records (KIP-320; the KIP's ULE_RECOVERY case). lastEpoch < 0: no
// batch copied yet, or its epoch is not known.
func checkLineage(lastEpoch int32, epochEnd, dstEnd int64) error {
	if lastEpoch < 0 || epochEnd < 0 || epochEnd >= dstEnd {
		return nil
	}
	return &mirrorerr.SourceTruncatedError{Epoch: lastEpoch, EpochEnd: epochEnd, DestinationEnd: dstEnd}
}
