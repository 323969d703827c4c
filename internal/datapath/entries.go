package datapath

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// checkLastEntry compares the destination's last entry with the source's at the same offset
// when a session starts: a destination that no longer lines up (a coordinator abort, a source
// rewritten by an unclean leader election, another writer) fails with the offset instead of
// being written past. An offset compacted away on either side proves nothing.
func (s *session) checkLastEntry(ctx context.Context, at int64) error {
	dst, err := EntryAt(ctx, s.m.dst, s.cfg.Topic, s.cfg.Partition, at)
	if err != nil || dst.Gap || dst.Gone {
		return err
	}
	src, err := EntryAt(ctx, s.m.src, s.cfg.Topic, s.cfg.Partition, at)
	if err != nil || src.Gap || src.Gone || src.Equal(dst) {
		return err
	}
	if dst.Kind == recordbatch.Abort {
		return &mirrorerr.CoordinatorAbortError{Topic: s.cfg.Topic, Partition: s.cfg.Partition, Offset: at, Source: src.Kind.String()}
	}
	return &mirrorerr.LastEntryMismatchError{Topic: s.cfg.Topic, Partition: s.cfg.Partition, Offset: at, Source: src.Kind.String(), Destination: dst.Kind.String()}
}

// Entry is what one offset holds, as far as consumers can tell.
type Entry struct {
	Kind      recordbatch.Kind
	Gap       bool // no record: a compaction hole or a lone marker's neighbour
	Gone      bool // below the log start: nothing left to compare
	Record    kmsg.Record
	Timestamp int64
}

func (a Entry) Equal(b Entry) bool {
	if a.Gap || b.Gap || a.Kind == recordbatch.Abort || b.Kind == recordbatch.Abort {
		// A source gap is an abort marker on the destination; both are invisible.
		return (a.Gap || a.Kind == recordbatch.Abort) && (b.Gap || b.Kind == recordbatch.Abort)
	}
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == recordbatch.Commit {
		return true // the destination's coordinator stamps the marker with its own time
	}
	return a.Timestamp == b.Timestamp && bytes.Equal(a.Record.Key, b.Record.Key) && bytes.Equal(a.Record.Value, b.Record.Value) &&
		slices.EqualFunc(a.Record.Headers, b.Record.Headers, func(x, y kmsg.Header) bool {
			return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
		})
}

func EntryAt(ctx context.Context, c kafkareq.Cluster, topic string, partition int32, offset int64) (Entry, error) {
	got := Entry{Gap: true}
	held, err := ReadEntries(ctx, c, topic, partition, offset, offset+1, func(_ int64, oc Entry) { got = oc })
	if !held {
		got = Entry{Gone: true}
	}
	return got, err
}

// ReadEntries calls fn, in offset order, for every record (markers included) the partition
// holds in [from, end). It reports false, without error, when the log no longer holds from.
func ReadEntries(ctx context.Context, c kafkareq.Cluster, topic string, partition int32, from, end int64, fn func(int64, Entry)) (held bool, err error) {
	meta, err := c.Metadata(ctx, topic, partition)
	if err != nil {
		return false, err
	}
	for next := from; next < end; {
		f, err := c.Fetch(ctx, meta, topic, partition, next, 1<<20)
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return next > from, nil
		}
		if err != nil {
			return false, err
		}
		at := next
		for _, b := range f.Batches {
			if b.LastOffset() < next || b.BaseOffset() >= end {
				continue
			}
			kind, err := b.Kind()
			if err != nil {
				return false, err
			}
			recs, err := b.Records()
			if err != nil {
				return false, err
			}
			var hdr kmsg.RecordBatch
			if err := hdr.ReadFrom(b); err != nil {
				return false, err
			}
			for _, rec := range recs {
				if o := b.BaseOffset() + int64(rec.OffsetDelta); o >= next && o < end {
					fn(o, Entry{Kind: kind, Record: rec, Timestamp: hdr.FirstTimestamp + rec.TimestampDelta64})
				}
			}
			next = b.LastOffset() + 1
		}
		if next == at {
			break // nothing more below the high watermark
		}
	}
	return true, nil
}
