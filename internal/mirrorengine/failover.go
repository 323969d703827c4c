package mirrorengine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/metadatasync"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// The two ways to stop mirrored topics (the KIP's runbooks): a failover stops at once, a
// promote (a planned migration) first waits until nothing is left to copy. Both end with a
// group offset sync after the last mirrored record, so a consumer group that committed on
// the source goes on at the destination at exactly its next record.

const (
	// DefaultPromoteTimeout bounds a promote's wait for lag 0.
	DefaultPromoteTimeout = time.Minute
	// finalSyncTimeout bounds the group offset sync a failover attempts after its stop:
	// a failover never waits for a source that may be gone.
	finalSyncTimeout = 15 * time.Second
	// stoppedTimeout bounds the wait for the stopped partitions' last writes to land, so
	// that the final sync clamps offsets to the destination's real end.
	stoppedTimeout = 15 * time.Second
)

// Final sync outcomes, as a stop reports them per topic (TopicResult.FinalSync).
const (
	FinalSyncDone = "synced"
	FinalSyncOff  = "not synced: consumer group offset sync is off for this mirror"
)

// StopMirrorTopics fails topics over: each stops at once (STOPPING aborts the replayed
// transactions, records the last mirrored offsets and lifts the read-only ACLs), then a
// group offset sync for the stopped topics is attempted within finalSyncTimeout; its outcome
// is each result's FinalSync. A source that cannot be reached never holds a failover up.
func (e *Engine) StopMirrorTopics(ctx context.Context, mirror string, topics []string) ([]TopicResult, error) {
	results, err := e.changeDesired(ctx, mirror, topics, partitionstate.DesiredStopped)
	if err != nil {
		return nil, err
	}
	e.finishStop(ctx, mirror, results)
	return results, nil
}

// PromoteMirrorTopics is the planned migration: it waits (up to timeout; 0 means
// DefaultPromoteTimeout) until every partition of the topics is MIRRORING with lag 0 and the
// topics' group offsets are synced after the last mirrored record, and only then stops them
// as StopMirrorTopics does. When the source cannot be reached, a partition is not
// MIRRORING, lag does not drain or the sync fails, nothing is stopped and each topic's
// error says why, per partition.
func (e *Engine) PromoteMirrorTopics(ctx context.Context, mirror string, topics []string, timeout time.Duration) ([]TopicResult, error) {
	if timeout <= 0 {
		timeout = DefaultPromoteTimeout
	}
	rec, ok := e.store.Mirror(mirror)
	if !ok {
		return nil, cmdErr(kip.CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	results := e.eachTopic(topics, func(topic string) *CommandError {
		return e.promoteReady(ctx, rec, topic, timeout)
	})
	var ready []string
	for _, r := range results {
		if r.Err == nil {
			ready = append(ready, r.Topic)
		}
	}
	if len(ready) == 0 {
		return results, nil
	}
	stopped, err := e.changeDesired(ctx, mirror, ready, partitionstate.DesiredStopped)
	if err != nil {
		return nil, err
	}
	e.finishStop(ctx, mirror, stopped)
	for i := range results {
		if results[i].Err == nil {
			results[i], stopped = stopped[0], stopped[1:]
		}
	}
	return results, nil
}

// promoteReady waits until topic has lag 0 on every partition, all MIRRORING, then syncs its
// group offsets.
func (e *Engine) promoteReady(ctx context.Context, rec mirrorstate.MirrorRecord, topic string, timeout time.Duration) *CommandError {
	tc, ok := e.store.TopicConfig(topic)
	if owner, desired := partitionstate.ParseMirrorName(tc.MirrorName); !ok || owner != rec.Name {
		return cmdErr(kip.CodeTopicNotInClusterMirror, "topic %q is not in cluster mirror %q", topic, rec.Name)
	} else if desired == partitionstate.DesiredStopped {
		return cmdErr(kip.CodeMirrorTopicAlreadyStopped, "topic %q is already stopped", topic)
	}
	srcCl, err := e.source(rec.Name)
	if err != nil {
		return cmdErr(kip.CodeSourceClusterUnreachable, "promote of %q: %w; nothing was stopped (fail over instead if the source is gone)", topic, err)
	}
	srcAdm := kadm.NewClient(srcCl)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var behind []string
	for {
		behind = behind[:0]
		statuses := e.topicStatuses(rec.Name, topic)
		for _, p := range slices.Sorted(maps.Keys(statuses)) {
			if st := statuses[p]; st.State != partitionstate.StateMirroring {
				behind = append(behind, fmt.Sprintf("partition %d is %s", p, st.State))
			}
		}
		var askErr error
		if len(behind) == 0 {
			behind, askErr = lagging(ctx, srcAdm, e.dst.Admin, topic)
		}
		if askErr == nil && len(behind) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			if askErr != nil {
				return cmdErr(kip.CodeSourceClusterUnreachable, "promote of %q: %w; nothing was stopped (fail over instead if the source is gone)", topic, askErr)
			}
			return cmdErr(kip.CodeInvalidMirrorPartitionState, "promote of %q: not caught up after %v: %s; nothing was stopped (stop the source's producers, or fail over)", topic, timeout, strings.Join(behind, "; "))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !rec.Sync.ConsumerGroups {
		return nil
	}
	if _, err := e.syncGroupsRetrying(ctx, rec, srcCl, []string{topic}); err != nil {
		return cmdErr(kip.CodeUnknownServerError, "promote of %q: the final group offset sync failed: %w; nothing was stopped", topic, err)
	}
	return nil
}

// syncGroupsRetrying syncs topics' group offsets, trying again until ctx ends: right after
// a cluster starts, its group coordinator is not available until __consumer_offsets exists
// (COORDINATOR_NOT_AVAILABLE on Apache Kafka), and a sync is idempotent.
func (e *Engine) syncGroupsRetrying(ctx context.Context, rec mirrorstate.MirrorRecord, srcCl *kgo.Client, topics []string) (skipped int, err error) {
	s := metadatasync.New(syncHost{e}, e.dst.Client, e.log, rec.Name)
	for {
		skipped, err = s.SyncGroupOffsets(ctx, kafkareq.NewCluster("source", srcCl), topics, rec.Sync)
		if err == nil {
			return skipped, nil
		}
		select {
		case <-ctx.Done():
			return skipped, err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lagging lists the partitions of topic whose destination end is behind the source's high
// watermark.
func lagging(ctx context.Context, src, dst *kadm.Client, topic string) ([]string, error) {
	srcEnds, err := src.ListEndOffsets(ctx, topic)
	if err == nil {
		err = srcEnds.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the source did not answer: %w", err)
	}
	dstEnds, err := dst.ListEndOffsets(ctx, topic)
	if err == nil {
		err = dstEnds.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the destination did not answer: %w", err)
	}
	var behind []string
	srcEnds.Each(func(o kadm.ListedOffset) {
		d, ok := dstEnds.Lookup(topic, o.Partition)
		if !ok || d.Offset < o.Offset {
			behind = append(behind, fmt.Sprintf("partition %d has lag %d (source %d, destination %d)", o.Partition, o.Offset-d.Offset, o.Offset, d.Offset))
		}
	})
	return behind, nil
}

// finishStop waits (bounded) for the stopped topics' partitions to reach STOPPED, so their
// last writes have landed, then syncs their group offsets once more and records the outcome
// in each successful result.
func (e *Engine) finishStop(ctx context.Context, mirror string, results []TopicResult) {
	var topics []string
	for _, r := range results {
		if r.Err == nil {
			topics = append(topics, r.Topic)
		}
	}
	if len(topics) == 0 {
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, stoppedTimeout)
	for _, topic := range topics {
		for !e.topicStopped(mirror, topic) && waitCtx.Err() == nil {
			select {
			case <-waitCtx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	cancel()
	outcome := e.finalGroupSync(ctx, mirror, topics)
	for i := range results {
		if results[i].Err == nil {
			results[i].FinalSync = outcome
		}
	}
}

// finalGroupSync copies the source's committed offsets of topics' groups to the destination
// within finalSyncTimeout and says how that went.
func (e *Engine) finalGroupSync(ctx context.Context, mirror string, topics []string) string {
	rec, ok := e.store.Mirror(mirror)
	if !ok || !rec.Sync.ConsumerGroups {
		return FinalSyncOff
	}
	ctx, cancel := context.WithTimeout(ctx, finalSyncTimeout)
	defer cancel()
	srcCl, err := e.source(mirror)
	if err != nil {
		return "not synced: " + err.Error()
	}
	skipped, err := e.syncGroupsRetrying(ctx, rec, srcCl, topics)
	switch {
	case err != nil:
		e.log.Warn("final group offset sync after a stop failed", "mirror", mirror, "topics", topics, "error", err)
		return "not synced: " + err.Error()
	case skipped > 0:
		return fmt.Sprintf("%s (%d groups with members on the destination left alone)", FinalSyncDone, skipped)
	}
	return FinalSyncDone
}
