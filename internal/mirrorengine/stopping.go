package mirrorengine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// stop is STOPPING, the failover: abort the replayed transactions still open (the KIP's
// ABORT markers at stop), record the last mirrored offset, make the topic writable once no
// other partition of it is still mirrored. Each step is idempotent, so a crash mid-way
// resumes here.
func (r *runner) stop(ctx context.Context) error {
	e, k := r.e, r.key
	r.liftedAtStop = false
	if err := r.abortOpenTxns(ctx); err != nil {
		return err
	}
	_, end, err := e.dst.Offsets(ctx, k.topic, k.partition)
	if err != nil {
		return err
	}
	rec, _ := e.store.Mirror(k.mirror)
	tc, _ := e.store.TopicConfig(k.topic)
	lm := mirrorstate.LastMirrorRecord{
		LastMirroredOffset: end, LastMirroredEpoch: r.lastEpoch,
		SourceClusterID: rec.SourceClusterID, SourceTopicID: tc.SourceTopicID, DestinationClusterID: e.dstID,
	}
	if err := e.store.PutLastMirror(ctx, k.mirror, k.topic, k.partition, lm); err != nil {
		return err
	}
	r.liftedAtStop, err = r.liftReadOnlyIfTopicStopped(ctx, true)
	return err
}

// liftReadOnlyIfTopicStopped makes the topic writable when none of its partitions is mirrored
// any more (each STOPPED, or never started; stopping: this partition, whose stop is done
// but not recorded yet): a foreign write to a partition still copying would fail it. Two
// last partitions finishing at once may each see the other still STOPPING; the one that
// records STOPPED later sees both (afterStopped). A restart of the topic may record its
// first partition between the look and the lift, and make the topic read-only before the
// lift lands: so the lift looks again afterwards and puts the ACL back if the topic is
// mirrored again (the restart makes it read-only only after recording, so one of the two
// always leaves it read-only). It tells whether it lifted the ACL.
func (r *runner) liftReadOnlyIfTopicStopped(ctx context.Context, stopping bool) (bool, error) {
	if mirrored, err := r.topicMirrored(ctx, stopping); mirrored || err != nil {
		return false, err
	}
	if testHookBeforeLift != nil {
		testHookBeforeLift(r.key.topic)
	}
	if err := r.e.liftReadOnly(ctx, r.key.topic); err != nil {
		return false, err
	}
	mirrored, err := r.topicMirrored(ctx, stopping)
	if err == nil && !mirrored {
		return true, nil
	}
	// Started again meanwhile, or not known: read-only again (a retry looks again).
	if mirrored {
		r.log.Info("the topic was started again while it was made writable: making it read-only again")
	}
	if err := r.e.enforceReadOnly(ctx, r.key.topic); err != nil {
		// Rare (a restart racing the lift, then a failing CREATE ACL); a foreign write
		// would still fail the partitions it reaches rather than go unnoticed.
		r.log.Error("making the topic read-only again failed: it stays writable", "error", err)
		return false, err
	}
	return false, err
}

// topicMirrored reports whether a partition of the topic other than a stopping one is
// mirrored (neither STOPPED nor never started). With several workers the partitions run on
// several of them, so the store is read to its end first (a lone worker's view holds every
// write).
func (r *runner) topicMirrored(ctx context.Context, stopping bool) (bool, error) {
	e, k := r.e, r.key
	if e.cfg.Placement != nil {
		if err := e.Refresh(ctx); err != nil {
			return false, err
		}
	}
	for p, rec := range e.store.Partitions(k.mirror, k.topic) {
		switch s := rec.Status.State; {
		case stopping && p == k.partition, s == partitionstate.StateStopped, s == partitionstate.StateUnknown:
		default:
			r.log.Debug("the topic stays read-only: another partition is still mirrored", "other_partition", p, "state", s)
			return true, nil
		}
	}
	return false, nil
}

// afterStopped makes the topic writable if this partition, now STOPPED, was the last one
// mirrored and its stop did not see it (see liftReadOnlyIfTopicStopped).
func (r *runner) afterStopped() { r.e.wg.Go(r.liftOnceStopped) }

// liftOnceStopped makes the topic writable if none of its partitions is mirrored any more,
// retrying until it succeeds or the engine stops.
func (r *runner) liftOnceStopped() {
	for wait := time.Second; ; wait = min(2*wait, time.Minute) {
		ctx, cancel := context.WithTimeout(r.e.ctx, 30*time.Second)
		_, err := r.liftReadOnlyIfTopicStopped(ctx, false)
		cancel()
		if err == nil || r.e.ctx.Err() != nil {
			return
		}
		r.log.Warn("making the stopped topic writable failed; retrying", "error", err, "retry_in", wait)
		if kafkareq.Sleep(r.e.ctx, wait) != nil {
			return
		}
	}
}

// abortOpenTxns aborts every replayed transaction of this partition that is still open and
// waits until no transaction holds the partition's last stable offset back.
func (r *runner) abortOpenTxns(ctx context.Context) error {
	e, k := r.e, r.key
	prefix := datapath.PartitionTxnPrefix(k.mirror, k.topic, k.partition)
	listed, err := e.dst.Admin.ListTransactions(ctx, nil, nil)
	if err != nil {
		return mirrorerr.WrapAuth("destination", "list transactions", err)
	}
	var ids []string
	for id := range listed {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		described, err := e.dst.Admin.DescribeTransactions(ctx, ids...)
		if err != nil {
			return mirrorerr.WrapAuth("destination", "describe transactions", err)
		}
		for _, d := range described {
			if d.Err != nil {
				return d.Err
			}
			if d.State != "Ongoing" {
				continue
			}
			if _, err := e.dst.EndTxn(ctx, d.TxnID, recordbatch.Producer{ID: d.ProducerID, Epoch: d.ProducerEpoch}, false); err != nil {
				return err
			}
			r.log.Info("aborted a replayed transaction still open at failover", "transactional_id", d.TxnID)
		}
	}
	// Markers land asynchronously on real brokers: wait for the last stable offset.
	deadline := time.Now().Add(time.Minute)
	for {
		lso, err := e.dst.Admin.ListCommittedOffsets(ctx, k.topic)
		if err != nil {
			return err
		}
		hw, err := e.dst.Admin.ListEndOffsets(ctx, k.topic)
		if err != nil {
			return err
		}
		l, _ := lso.Lookup(k.topic, k.partition)
		h, _ := hw.Lookup(k.topic, k.partition)
		if l.Err == nil && h.Err == nil && l.Offset == h.Offset {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("transactions on destination %s[%d] still open after aborting ours (last stable offset %d, end %d)", k.topic, k.partition, l.Offset, h.Offset)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
