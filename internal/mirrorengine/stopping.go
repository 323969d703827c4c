package mirrorengine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// stop is STOPPING, the failover: abort the replayed transactions still open (the KIP's
// ABORT markers at stop), record the last mirrored offset, make the topic writable. Each
// step is idempotent, so a crash mid-way resumes here.
func (r *runner) stop(ctx context.Context) error {
	e, k := r.e, r.key
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
	return e.liftReadOnly(ctx, k.topic)
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
