package mirrorengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// Whether a destination partition is a prefix of its source (judgeDestination, on the real
// clusters through partitionProbe), and the "recreate" divergence policy.

// recreateIfDiverged is the "recreate" divergence policy, applied by the start command
// before any partition prepares. Only a destination topic with a partition that really
// diverged is deleted, and only once no partition of the topic writes to it any more (the
// others may be mirroring happily); PREPARING then creates it again and mirrors from
// scratch.
func (e *Engine) recreateIfDiverged(ctx context.Context, mirror, topic string, partitions int) error {
	srcCl, err := e.source(mirror)
	if err != nil {
		return err
	}
	src := kafkareq.NewCluster("source", srcCl)
	if _, err := e.dst.Metadata(ctx, topic, 0); err != nil {
		var unknown *mirrorerr.UnknownTopicError
		if errors.As(err, &unknown) {
			return nil
		}
		return err
	}
	var diverged *divergence
	for p := range int32(partitions) {
		if diverged, err = e.checkDestination(ctx, partitionKey{mirror, topic, p}, src); err != nil || diverged != nil {
			break
		}
	}
	if err != nil || diverged == nil {
		return err
	}
	stopped, err := e.quiesceTopic(ctx, mirror, topic, fmt.Sprintf("stopped to recreate the destination topic (divergence = \"recreate\"): %s", diverged))
	if err != nil {
		return err
	}
	defer func() {
		for _, k := range stopped {
			e.runner(k) // FAILED or STOPPED: it waits for the start command's restart
		}
	}()
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	e.log.Warn("recreating the diverged destination topic", "topic", topic, "reason", diverged.String())
	resp, err := e.dst.Admin.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return mirrorerr.WrapAuth("destination", "delete diverged topic "+topic, err)
	}
	return e.waitTopicGone(ctx, topic)
}

func (e *Engine) waitTopicGone(ctx context.Context, topic string) error {
	for {
		_, err := e.dst.Metadata(ctx, topic, 0)
		var unknown *mirrorerr.UnknownTopicError
		if errors.As(err, &unknown) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logRange is a partition's log start and end offsets.
type logRange struct{ start, end int64 }

// divergence is a destination partition that is not a prefix of its source: the offsets
// from `from` to its end hold what the source does not.
type divergence struct {
	topic     string
	partition int32
	from, end int64
	reason    string
}

// records is how many destination offsets are not the source's.
func (d *divergence) records() int64 { return d.end - d.from }

func (d *divergence) String() string {
	s := fmt.Sprintf("destination %s[%d] diverged from the source: %s", d.topic, d.partition, d.reason)
	if n := d.records(); n > 0 {
		s += fmt.Sprintf("; its %d records at offsets %d to %d are not the source's", n, d.from, d.end-1)
	}
	return s
}

// destinationProbe reads what judgeDestination needs of one partition on both clusters.
type destinationProbe interface {
	// same reports whether both clusters hold the same at offset. An offset either no
	// longer holds (below its log start) contradicts nothing and counts as the same.
	same(offset int64) (bool, error)
	// lastData returns the offset of the destination's last data record in [from, end).
	lastData(from, end int64) (offset int64, found bool, err error)
}

// judgeDestination decides whether a destination partition is a prefix of its source, so
// that mirroring may continue from the destination end. No last mirrored offset is needed:
// records the mirror wrote are the source's at the same offsets, anything written since a
// failover (or never mirrored) is not. The check compares the destination's last offset,
// its last data record (a marker alone proves little: the source has markers everywhere)
// and the first offset both still hold. Records below the source log start are not
// compared (the mirror moves the destination log start past them), but some record must
// be. A destination past the source end diverged. Where a destination diverged is found by
// binary search, so the message can say what "recreate" would discard.
func judgeDestination(src, dst logRange, p destinationProbe) (*divergence, error) {
	lo, hi := max(dst.start, src.start), min(dst.end, src.end) // the offsets both may hold
	if dst.end > src.end {
		d := &divergence{from: max(dst.start, src.end), end: dst.end,
			reason: fmt.Sprintf("it ends at offset %d, past the source end %d", dst.end, src.end)}
		if lo < hi {
			same, err := p.same(hi - 1)
			if err != nil {
				return nil, err
			}
			if !same {
				if d.from, err = firstDifference(lo, hi-1, p.same); err != nil {
					return nil, err
				}
			}
		}
		return d, nil
	}
	switch {
	case dst.start == dst.end:
		return nil, nil // empty: nothing to contradict the source
	case lo >= hi:
		// Nothing proves these records the source's, and continuing would delete them
		// (the mirror moves the log start to the source's): "fail" must keep them.
		return &divergence{from: dst.start, end: dst.end,
			reason: fmt.Sprintf("the source no longer holds any of its offsets (source log start %d), so it cannot be checked", src.start)}, nil
	}
	points := []int64{hi - 1}
	last, found, err := p.lastData(lo, hi)
	if err != nil {
		return nil, err
	}
	if found && last != hi-1 {
		points = append(points, last)
	}
	if lo < hi-1 && lo != last {
		points = append(points, lo)
	}
	for _, at := range points {
		same, err := p.same(at)
		if err != nil {
			return nil, err
		}
		if same {
			continue
		}
		from, err := firstDifference(lo, at, p.same)
		if err != nil {
			return nil, err
		}
		return &divergence{from: from, end: dst.end, reason: fmt.Sprintf("it differs from the source at offset %d", at)}, nil
	}
	return nil, nil
}

// firstDifference returns the first offset in [lo, hi] where the destination differs from
// the source, given that it differs at hi. A destination diverges as a tail (it was the
// source's until something else wrote to it), so a binary search finds where.
func firstDifference(lo, hi int64, same func(int64) (bool, error)) (int64, error) {
	for lo < hi {
		mid := lo + (hi-lo)/2
		ok, err := same(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// partitionProbe is the destinationProbe of one partition on the real clusters.
type partitionProbe struct {
	ctx       context.Context
	src, dst  kafkareq.Cluster
	topic     string
	partition int32
}

func (p partitionProbe) same(offset int64) (bool, error) {
	a, err := recordAt(p.ctx, p.src, p.topic, p.partition, offset)
	if err != nil {
		return false, err
	}
	b, err := recordAt(p.ctx, p.dst, p.topic, p.partition, offset)
	if err != nil {
		return false, err
	}
	return a.gone || b.gone || a.equal(b), nil
}

// lastData reads the destination backwards in widening windows: the last data record is
// usually in the last batch, but runs of markers (gap fill) can stand between.
func (p partitionProbe) lastData(from, end int64) (int64, bool, error) {
	for window := int64(1); ; window *= 16 {
		lo := max(from, end-window)
		last := int64(-1)
		_, err := readRange(p.ctx, p.dst, p.topic, p.partition, lo, end, func(at int64, c offsetContent) {
			if c.kind == recordbatch.Data || c.kind == recordbatch.TxnData {
				last = at
			}
		})
		if err != nil || last >= 0 || lo == from {
			return last, last >= 0, err
		}
	}
}

// offsetContent is what one offset holds, as far as consumers can tell.
type offsetContent struct {
	kind      recordbatch.Kind
	gap       bool // no record: a compaction hole or a lone marker's neighbour
	gone      bool // below the log start: nothing left to compare
	record    kmsg.Record
	timestamp int64
}

func (a offsetContent) equal(b offsetContent) bool {
	if a.gap || b.gap || a.kind == recordbatch.Abort || b.kind == recordbatch.Abort {
		// A source gap is an abort marker on the destination; both are invisible.
		return (a.gap || a.kind == recordbatch.Abort) && (b.gap || b.kind == recordbatch.Abort)
	}
	if a.kind != b.kind {
		return false
	}
	if a.kind == recordbatch.Commit {
		return true // the destination's coordinator stamps the marker with its own time
	}
	return a.timestamp == b.timestamp && bytes.Equal(a.record.Key, b.record.Key) && bytes.Equal(a.record.Value, b.record.Value) &&
		slices.EqualFunc(a.record.Headers, b.record.Headers, func(x, y kmsg.Header) bool {
			return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
		})
}

func recordAt(ctx context.Context, c kafkareq.Cluster, topic string, partition int32, offset int64) (offsetContent, error) {
	got := offsetContent{gap: true}
	held, err := readRange(ctx, c, topic, partition, offset, offset+1, func(_ int64, oc offsetContent) { got = oc })
	if !held {
		got = offsetContent{gone: true}
	}
	return got, err
}

// readRange calls fn, in offset order, for every record (markers included) the partition
// holds in [from, end). It reports false, without error, when the log no longer holds from.
func readRange(ctx context.Context, c kafkareq.Cluster, topic string, partition int32, from, end int64, fn func(int64, offsetContent)) (held bool, err error) {
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
					fn(o, offsetContent{kind: kind, record: rec, timestamp: hdr.FirstTimestamp + rec.TimestampDelta64})
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
