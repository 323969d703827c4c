package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

// holed is a compacted source batch over offsets base..last holding records at the given
// offsets: with last past the last record it has Apache Kafka's shape (the cleaner keeps the
// original last offset), with last at it kfake's.
func holed(t *testing.T, base, last int64, codec int16, pid int64, attrs int16, at ...int64) recordbatch.Batch {
	t.Helper()
	recs := batchtest.Records(len(at), 1)
	for i, off := range at {
		recs[i].OffsetDelta = int32(off - base)
	}
	b := batchtest.Source(t, base, codec, recs, pid, attrs)
	binary.BigEndian.PutUint32(b[recordbatch.OffLastOffsetDelta:], uint32(last-base))
	binary.BigEndian.PutUint32(b[recordbatch.OffCRC:], crc32.Checksum(b[recordbatch.OffAttributes:], recordbatch.Castagnoli))
	return b
}

func data(t *testing.T, base int64, n int) recordbatch.Batch {
	return batchtest.Source(t, base, 4, batchtest.Records(n, 1), -1, 0)
}

func txnData(t *testing.T, base int64, n int, pid int64) recordbatch.Batch {
	return batchtest.Source(t, base, 0, batchtest.Records(n, 1), pid, recordbatch.AttrTransactional)
}

func marker(t *testing.T, at int64, pid int64, commit bool) recordbatch.Batch {
	var ctype uint16
	if commit {
		ctype = 1
	}
	key := binary.BigEndian.AppendUint16([]byte{0, 0}, ctype)
	return batchtest.Source(t, at, 0, []kmsg.Record{{Key: key, Value: make([]byte, 6)}}, pid, recordbatch.AttrControl|recordbatch.AttrTransactional)
}

// emptyBatch is a batch header without records over base..last, as the cleaner keeps for a
// producer's state.
func emptyBatch(base, last int64, attrs int16) recordbatch.Batch {
	b := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(last - base), ProducerID: 7, ProducerEpoch: 1, FirstSequence: 0}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[recordbatch.OffBatchLength:], uint32(len(raw)-recordbatch.OffBatchLength-4))
	return raw
}

// describe renders a write as kind[ txn| commit| abort][ pid]@at+n (the pid of a transaction ended).
func (w write) describe() string {
	kind := w.kind.String()
	switch {
	case w.kind == writeEndTxn:
		kind += fmt.Sprintf(" %s %d", map[bool]string{true: "commit", false: "abort"}[w.commit], w.pid)
	case w.kind == writeLoneMarker:
		kind += map[bool]string{true: " commit", false: " abort"}[w.commit]
	case w.txn:
		kind += " txn"
	}
	return fmt.Sprintf("%s@%d+%d", kind, w.at, w.n)
}

func TestPlanFetch(t *testing.T) {
	garbled := marker(t, 12, 7, true)
	garbled[len(garbled)-1] ^= 0xff // the control record no longer parses
	for _, tc := range []struct {
		name       string
		next       int64
		alignTo    int64
		open       map[int64]bool
		continuing map[int64]bool
		maxSize    int
		hw         int64
		batches    []recordbatch.Batch
		want       []string
		retry      time.Duration
		err        string
	}{
		{
			name:    "contiguous batches are forwarded",
			batches: []recordbatch.Batch{data(t, 0, 3), data(t, 3, 2)},
			want:    []string{"forward@0+3", "forward@3+2"},
		},
		{
			name:    "a gap before the first batch received is filled",
			next:    4,
			batches: []recordbatch.Batch{data(t, 10, 2)},
			want:    []string{"gap@4+6", "forward@10+2"},
		},
		{
			name:    "a batch the destination already holds is skipped",
			next:    5,
			batches: []recordbatch.Batch{data(t, 0, 5), data(t, 5, 1)},
			want:    []string{"forward@5+1"},
		},
		{
			name:    "kfake's compaction: last offset shrunk to the last record",
			next:    20,
			batches: []recordbatch.Batch{holed(t, 20, 27, 0, -1, 0, 20, 21, 25, 27), data(t, 30, 1)},
			want:    []string{"run@20+2", "gap@22+3", "run@25+1", "gap@26+1", "run@27+1", "gap@28+2", "forward@30+1"},
		},
		{
			name:    "Apache Kafka's compaction: leading, inner and trailing holes",
			batches: []recordbatch.Batch{holed(t, 0, 9, 1, -1, 0, 3, 4, 8), data(t, 10, 1)},
			want:    []string{"gap@0+3", "run@3+2", "gap@5+3", "run@8+1", "gap@9+1", "forward@10+1"},
		},
		{
			name:    "a trailing hole in the last batch received is filled to the batch's end",
			batches: []recordbatch.Batch{holed(t, 0, 9, 2, -1, 0, 0, 1, 2, 3, 4)},
			want:    []string{"run@0+5", "gap@5+5"},
		},
		{
			name:    "the destination ends in a batch's trailing hole (an earlier session)",
			next:    5,
			batches: []recordbatch.Batch{holed(t, 0, 9, 3, -1, 0, 0, 1, 2, 3, 4)},
			want:    []string{"gap@5+5"},
		},
		{
			name:    "the destination ends inside a re-encoded run (an earlier session)",
			next:    4,
			batches: []recordbatch.Batch{holed(t, 0, 9, 4, -1, 0, 3, 4, 8)},
			want:    []string{"run@4+1", "gap@5+3", "run@8+1", "gap@9+1"},
		},
		{
			name:    "the source log start in a batch's leading hole",
			alignTo: 2,
			batches: []recordbatch.Batch{holed(t, 0, 9, 1, -1, 0, 3, 4, 8)},
			want:    []string{"filler@0+2", "gap@2+1", "run@3+2", "gap@5+3", "run@8+1", "gap@9+1"},
		},
		{
			name:    "the source log start at the base of a batch with a leading hole (kfake)",
			alignTo: 725,
			batches: []recordbatch.Batch{holed(t, 725, 733, 1, -1, 0, 730, 733)},
			want:    []string{"filler@0+725", "gap@725+5", "run@730+1", "gap@731+2", "run@733+1"},
		},
		{
			name:    "the source log start inside a run: the run is written whole, then deleted below",
			alignTo: 4,
			batches: []recordbatch.Batch{holed(t, 0, 9, 1, -1, 0, 3, 4, 8)},
			want:    []string{"filler@0+3", "run@3+2", "gap@5+3", "run@8+1", "gap@9+1"},
		},
		{
			name:    "the source log start inside a contiguous batch: forwarded whole",
			alignTo: 105,
			batches: []recordbatch.Batch{data(t, 100, 10)},
			want:    []string{"filler@0+100", "forward@100+10"},
		},
		{
			name:    "the source log start past the markers of transactions open on the destination: aborted below it",
			next:    10,
			alignTo: 20,
			open:    map[int64]bool{9: true, 7: true, 3: false},
			batches: []recordbatch.Batch{data(t, 20, 2)},
			want:    []string{"end transaction abort 7@10+1", "end transaction abort 9@11+1", "filler@12+8", "forward@20+2"},
		},
		{
			name:    "more transactions open than offsets below the source log start",
			next:    10,
			alignTo: 11,
			open:    map[int64]bool{9: true, 7: true},
			batches: []recordbatch.Batch{txnData(t, 11, 2, 9)},
			want:    []string{"end transaction abort 7@10+1", "forward txn@11+2"},
		},
		{
			name:       "a transaction the source still has open keeps its replayed one open; the other's marker was deleted",
			next:       10,
			alignTo:    11,
			open:       map[int64]bool{7: true, 9: true},
			continuing: map[int64]bool{7: true},
			batches:    []recordbatch.Batch{txnData(t, 11, 2, 7), marker(t, 13, 7, true)},
			want:       []string{"end transaction abort 9@10+1", "forward txn@11+2", "end transaction commit 7@13+1"},
		},
		{
			name:    "a marker first in the answer ends its replayed transaction there",
			next:    10,
			alignTo: 12,
			open:    map[int64]bool{7: true, 9: true},
			batches: []recordbatch.Batch{data(t, 12, 1), marker(t, 13, 7, false)},
			want:    []string{"end transaction abort 9@10+1", "filler@11+1", "forward@12+1", "end transaction abort 7@13+1"},
		},
		{
			name:    "a producer's data first in the answer: its transaction may have ended below, aborted there",
			next:    10,
			alignTo: 11,
			open:    map[int64]bool{7: true},
			batches: []recordbatch.Batch{txnData(t, 11, 1, 7), marker(t, 12, 7, true)},
			want:    []string{"end transaction abort 7@10+1", "forward txn@11+1", "end transaction commit 7@12+1"},
		},
		{
			name:       "no pending log start: the source's open transactions do not matter",
			next:       10,
			open:       map[int64]bool{7: true},
			continuing: map[int64]bool{},
			batches:    []recordbatch.Batch{data(t, 12, 1)},
			want:       []string{"gap@10+2", "forward@12+1"},
		},
		{
			name:    "transaction data right past the source log start opens its transaction after the filler",
			next:    10,
			alignTo: 20,
			open:    map[int64]bool{9: false},
			batches: []recordbatch.Batch{txnData(t, 20, 2, 9), marker(t, 22, 9, true)},
			want:    []string{"filler@10+10", "forward txn@20+2", "end transaction commit 9@22+1"},
		},
		{
			name:    "a contiguous batch starting below the destination end",
			next:    102,
			batches: []recordbatch.Batch{data(t, 100, 10)},
			err:     "starts below the destination end",
		},
		{
			name:    "an empty batch the cleaner kept is a gap",
			next:    5,
			batches: []recordbatch.Batch{emptyBatch(5, 9, recordbatch.AttrControl|recordbatch.AttrTransactional), data(t, 10, 1)},
			want:    []string{"gap@5+5", "forward@10+1"},
		},
		{
			name:    "holes of batches in a row are one run of markers",
			next:    0,
			batches: []recordbatch.Batch{holed(t, 0, 9, 0, -1, 0, 0), emptyBatch(10, 19, 0), emptyBatch(20, 29, 0), data(t, 35, 1)},
			want:    []string{"run@0+1", "gap@1+34", "forward@35+1"},
		},
		{
			name:  "an answer without batches below the high watermark (tiered storage) fills nothing",
			next:  5,
			hw:    40,
			retry: emptyAnswerRetry,
		},
		{
			name:    "an answer without batches below a pending log start fills nothing",
			alignTo: 30,
			hw:      40,
			retry:   emptyAnswerRetry,
		},
		{
			// Retention deleted every record: nothing is left to come below the log start.
			name:       "an answer without batches at a pending log start at the high watermark: the destination moves there",
			next:       5,
			alignTo:    9,
			hw:         9,
			open:       map[int64]bool{7: true, 8: true},
			continuing: map[int64]bool{8: true},
			want:       []string{"end transaction abort 7@5+1", "filler@6+3"},
		},
		{
			name: "an answer without batches at the high watermark: caught up",
			next: 40,
			hw:   40,
		},
		{
			name:    "a transaction is replayed and its marker ends it; a marker of no open transaction is lone",
			batches: []recordbatch.Batch{txnData(t, 0, 2, 7), data(t, 2, 1), marker(t, 3, 7, true), marker(t, 4, 8, false)},
			want:    []string{"forward txn@0+2", "forward@2+1", "end transaction commit 7@3+1", "lone marker abort@4+1"},
		},
		{
			name:    "a transaction an earlier session opened",
			next:    3,
			open:    map[int64]bool{7: true, 8: false},
			batches: []recordbatch.Batch{marker(t, 3, 7, false), marker(t, 4, 8, true)},
			want:    []string{"end transaction abort 7@3+1", "lone marker commit@4+1"},
		},
		{
			name:    "a compacted transactional batch",
			batches: []recordbatch.Batch{holed(t, 0, 5, 0, 7, recordbatch.AttrTransactional, 1, 2, 4), marker(t, 6, 7, true)},
			want:    []string{"gap@0+1", "run txn@1+2", "gap@3+1", "run txn@4+1", "gap@5+1", "end transaction commit 7@6+1"},
		},
		{
			name:    "a batch larger than the destination's max.message.bytes fails after the writes before it",
			next:    10,
			maxSize: len(data(t, 12, 3)) - 1,
			batches: []recordbatch.Batch{data(t, 10, 1), data(t, 11, 1), data(t, 12, 3), data(t, 15, 1)},
			want:    []string{"forward@10+1", "forward@11+1"},
			err:     "offset 12 is",
		},
		{
			name:    "a transactional batch too large opens no transaction",
			maxSize: len(txnData(t, 0, 2, 7)) - 1,
			batches: []recordbatch.Batch{txnData(t, 0, 2, 7)},
			err:     "max.message.bytes",
		},
		{
			name:    "a batch that cannot be decoded fails after the writes before it",
			next:    10,
			batches: []recordbatch.Batch{data(t, 10, 2), garbled, data(t, 13, 1)},
			want:    []string{"forward@10+2"},
			err:     "offset 12",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := maps.Clone(tc.open)
			p := planFetch(planInput{next: tc.next, alignTo: tc.alignTo, open: tc.open, continuing: tc.continuing, maxSize: tc.maxSize,
				fetched: kafkareq.Fetched{Batches: tc.batches, HighWatermark: tc.hw}})
			var got []string
			end := tc.next
			for _, w := range p.writes {
				got = append(got, w.describe())
				if w.at != end {
					t.Errorf("write %s does not start at the end of the previous one (%d)", w.describe(), end)
				}
				end = w.at + w.n
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("writes\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if p.next != end {
				t.Errorf("plan ends at %d, its writes at %d", p.next, end)
			}
			if p.retry != tc.retry {
				t.Errorf("retry %v, want %v", p.retry, tc.retry)
			}
			switch {
			case tc.err == "" && p.err != nil:
				t.Errorf("error %v", p.err)
			case tc.err != "" && (p.err == nil || !strings.Contains(p.err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", p.err, tc.err)
			}
			if !maps.Equal(open, tc.open) {
				t.Errorf("the planner changed its input's open transactions: %v", tc.open)
			}
		})
	}
}

func TestPlanFetchStartingBelowDestinationIsAnInvariant(t *testing.T) {
	p := planFetch(planInput{next: 102, fetched: kafkareq.Fetched{Batches: []recordbatch.Batch{data(t, 100, 10)}}})
	if !errors.Is(p.err, mirrorerr.ErrInvariant) {
		t.Fatalf("error %v, want the mirror invariant", p.err)
	}
}

// Every codec's compacted batch is re-encoded run by run with its codec, records intact.
func TestPlanRunsKeepCodecAndRecords(t *testing.T) {
	for codec := range int16(5) {
		b := holed(t, 40, 49, codec, -1, 0, 42, 43, 47)
		p := planFetch(planInput{next: 40, fetched: kafkareq.Fetched{Batches: []recordbatch.Batch{b}, HighWatermark: 50}})
		var runs []write
		for _, w := range p.writes {
			if w.kind == writeRun {
				runs = append(runs, w)
			}
		}
		if len(runs) != 2 {
			t.Fatalf("codec %d: %d runs", codec, len(runs))
		}
		src, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for _, w := range runs {
			enc, err := w.encode(recordbatch.Producer{ID: 3, Sequence: 9})
			if err != nil {
				t.Fatal(err)
			}
			out := recordbatch.Batch(enc)
			batchtest.CheckCRC(t, out)
			if !out.Contiguous() || out.Codec() != codec || int64(out.RecordCount()) != w.n {
				t.Fatalf("codec %d: run at %d re-encoded as %d records with codec %d", codec, w.at, out.RecordCount(), out.Codec())
			}
			recs, err := out.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if string(r.Key) != string(src[i].Key) || string(r.Value) != string(src[i].Value) {
					t.Fatalf("codec %d: record %d differs", codec, i)
				}
				i++
			}
		}
	}
}
