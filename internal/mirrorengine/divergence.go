package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
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
		if diverged, err = e.checkDestinationSettled(ctx, partitionKey{mirror, topic, p}, src); err != nil || diverged != nil {
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

// checkDestinationSettled is checkDestination, asked again for up to sourceBehindWait while
// a source leader elected a moment ago has not learnt its high watermark yet.
func (e *Engine) checkDestinationSettled(ctx context.Context, k partitionKey, src kafkareq.Cluster) (*divergence, error) {
	deadline := time.Now().Add(sourceBehindWait)
	for {
		d, err := e.checkDestination(ctx, k, src)
		var behind *mirrorerr.SourceBehindError
		if !errors.As(err, &behind) || time.Now().After(deadline) {
			return d, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// sourceBehindWait bounds the start command's wait for a source high watermark: its
// followers' next fetches (milliseconds) tell a new leader.
const sourceBehindWait = 10 * time.Second

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
	a, err := datapath.EntryAt(p.ctx, p.src, p.topic, p.partition, offset)
	if err != nil {
		return false, err
	}
	b, err := datapath.EntryAt(p.ctx, p.dst, p.topic, p.partition, offset)
	if err != nil {
		return false, err
	}
	return a.Gone || b.Gone || a.Equal(b), nil
}

// lastData reads the destination backwards in widening windows: the last data record is
// usually in the last batch, but runs of markers (gap fill) can stand between.
func (p partitionProbe) lastData(from, end int64) (int64, bool, error) {
	for window := int64(1); ; window *= 16 {
		lo := max(from, end-window)
		last := int64(-1)
		_, err := datapath.ReadEntries(p.ctx, p.dst, p.topic, p.partition, lo, end, func(at int64, c datapath.Entry) {
			if c.Kind == recordbatch.Data || c.Kind == recordbatch.TxnData {
				last = at
			}
		})
		if err != nil || last >= 0 || lo == from {
			return last, last >= 0, err
		}
	}
}
