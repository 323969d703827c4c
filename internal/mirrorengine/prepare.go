package mirrorengine

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// prepare is PREPARING: check the source, create the destination topic when absent, and
// decide whether the destination may be continued: empty (first start), ending at or before
// the last mirrored offset with matching records (restart or failback: only the delta is
// copied), or diverged (the topic's divergence policy decides).
func (r *runner) prepare(ctx context.Context) error {
	e, k := r.e, r.key
	rec, ok := e.store.Mirror(k.mirror)
	if !ok {
		return permanent(fmt.Errorf("cluster mirror %q no longer exists", k.mirror))
	}
	srcCl, err := e.source(k.mirror)
	if err != nil {
		return err
	}
	src := newCluster("source", srcCl)
	id, err := clusterID(ctx, srcCl)
	if err != nil {
		return fmt.Errorf("reaching the source cluster: %w", err)
	}
	if id != rec.SourceClusterID {
		return permanent(fmt.Errorf("%s: the source cluster now reports cluster id %q, but mirror %q is bound to %q; recreate the mirror if the source really moved",
			CodeSourceClusterIDMismatch, id, k.mirror, rec.SourceClusterID))
	}
	smeta, err := src.metadata(ctx, k.topic, k.partition)
	if err != nil {
		var unknown *UnknownTopicError
		if errors.As(err, &unknown) {
			return permanent(fmt.Errorf("source topic %q was deleted", k.topic))
		}
		return err
	}
	if err := e.checkSourceTopicID(ctx, k.topic, smeta.id); err != nil {
		return err
	}
	if err := e.ensureDestinationTopic(ctx, src, k.mirror, k.topic, smeta.partitions); err != nil {
		return err
	}
	what, discard, err := e.divergence(ctx, k, src)
	if err != nil {
		return err
	}
	if what != "" {
		tc, _ := e.store.TopicConfig(k.topic)
		if tc.Divergence == "recreate" {
			// The start command recreates; here the destination changed after it.
			return permanent(fmt.Errorf("%s; start the topic again to recreate the destination topic", what))
		}
		return permanent(fmt.Errorf("%s; divergence policy \"fail\" keeps them: divergence = \"recreate\" would discard %d records and copy the source again", what, discard))
	}
	return nil
}

// divergence decides whether the destination partition may be continued from its end: it
// must be empty, or end at or before the last mirrored offset with the same record as the
// source there. Otherwise it returns what diverged and how many destination records a
// recreation would discard.
func (e *Engine) divergence(ctx context.Context, k partitionKey, src cluster) (what string, discard int64, err error) {
	other, err := ReadStore(ctx, src.cl, e.cfg.Store)
	if err != nil {
		return "", 0, fmt.Errorf("reading the source cluster's %s: %w", storeTopic(e.cfg.Store), err)
	}
	if m := mirroringFromUs(other, k.topic, k.partition, e.dstID); m != "" {
		return "", 0, fmt.Errorf("the source cluster still mirrors topic %q from this cluster (its mirror %q is not stopped); stop it there first", k.topic, m)
	}
	rec, _ := e.store.Mirror(k.mirror)
	lmo, hasLMO := e.lastMirroredOffset(k, other, rec.SourceClusterID)
	_, dstEnd, err := e.dst.offsets(ctx, k.topic, k.partition)
	if err != nil {
		return "", 0, err
	}
	_, srcEnd, err := src.offsets(ctx, k.topic, k.partition)
	if err != nil {
		return "", 0, err
	}
	switch {
	case dstEnd == 0:
		return "", 0, nil // empty: mirror from the source log start
	case !hasLMO:
		return fmt.Sprintf("destination %s[%d] already holds %d records and was never mirrored from this source", k.topic, k.partition, dstEnd), dstEnd, nil
	case dstEnd > lmo:
		return fmt.Sprintf("destination %s[%d] has %d records past the last mirrored offset %d (written after the failover)", k.topic, k.partition, dstEnd-lmo, lmo), dstEnd - lmo, nil
	case dstEnd > srcEnd:
		return fmt.Sprintf("destination %s[%d] ends at %d, past the source end %d", k.topic, k.partition, dstEnd, srcEnd), dstEnd - srcEnd, nil
	}
	same, err := e.sameRecordAt(ctx, src, k.topic, k.partition, dstEnd-1)
	if err != nil {
		return "", 0, err
	}
	if !same {
		return fmt.Sprintf("destination %s[%d] offset %d differs from the source's record there", k.topic, k.partition, dstEnd-1), dstEnd, nil
	}
	return "", 0, nil
}

// recreateIfDiverged is the "recreate" divergence policy, applied by the start command
// before any partition prepares: when a partition of the destination topic diverged, the
// topic is deleted, and PREPARING creates it again and mirrors from scratch.
func (e *Engine) recreateIfDiverged(ctx context.Context, mirror, topic string, partitions int) (recreated bool, err error) {
	srcCl, err := e.source(mirror)
	if err != nil {
		return false, err
	}
	src := newCluster("source", srcCl)
	if _, err := e.dst.metadata(ctx, topic, 0); err != nil {
		var unknown *UnknownTopicError
		if errors.As(err, &unknown) {
			return false, nil
		}
		return false, err
	}
	for p := range int32(partitions) {
		what, _, err := e.divergence(ctx, partitionKey{mirror, topic, p}, src)
		if err != nil {
			return false, err
		}
		if what == "" {
			continue
		}
		e.topicMu.Lock()
		defer e.topicMu.Unlock()
		e.log.Warn("recreating the diverged destination topic", "topic", topic, "reason", what)
		resp, err := e.dst.adm.DeleteTopic(ctx, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return false, authErr("destination", "delete diverged topic "+topic, err)
		}
		return true, e.waitTopicGone(ctx, topic)
	}
	return false, nil
}

func (e *Engine) waitTopicGone(ctx context.Context, topic string) error {
	for {
		_, err := e.dst.metadata(ctx, topic, 0)
		var unknown *UnknownTopicError
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

// lastMirroredOffset finds where mirroring of this partition last stopped: in this cluster's
// records (a restart in the same direction) or in the source cluster's (failback: the
// source was mirrored from here). Offsets only grow across failovers, so the largest wins.
func (e *Engine) lastMirroredOffset(k partitionKey, other *Store, srcID string) (int64, bool) {
	best, found := int64(-1), false
	if lm, ok := e.store.LastMirror(k.mirror, k.topic, k.partition); ok && lm.SourceClusterID == srcID {
		best, found = lm.LastMirroredOffset, true
	}
	for _, parts := range other.LastMirrorsForTopic(k.topic) {
		if lm, ok := parts[k.partition]; ok && lm.SourceClusterID == e.dstID && lm.LastMirroredOffset > best {
			best, found = lm.LastMirroredOffset, true
		}
	}
	return best, found
}

// mirroringFromUs returns the name of a mirror in another cluster's store that still
// mirrors the partition from cluster id us (not yet STOPPED, even if a stop is requested:
// its last mirrored offset is written only at the end of STOPPING), or "".
func mirroringFromUs(other *Store, topic string, partition int32, us string) string {
	tc, ok := other.TopicConfig(topic)
	if !ok {
		return ""
	}
	mirror, d := ParseMirrorName(tc.MirrorName)
	if m, ok := other.Mirror(mirror); !ok || m.SourceClusterID != us {
		return ""
	}
	if rec, ok := other.Partition(mirror, topic, partition); d == DesiredStopped && ok && rec.Status.State == StateStopped {
		return ""
	}
	return mirror
}

// checkSourceTopicID binds the topic to the source topic id seen first; a different id
// later means the source topic was deleted and recreated, which restarts its offsets.
func (e *Engine) checkSourceTopicID(ctx context.Context, topic string, id [16]byte) error {
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	tc, ok := e.store.TopicConfig(topic)
	if !ok {
		return permanent(fmt.Errorf("topic %q is no longer mirrored", topic))
	}
	seen := hex.EncodeToString(id[:])
	switch tc.SourceTopicID {
	case seen:
		return nil
	case "":
		tc.SourceTopicID = seen
		return e.store.PutTopicConfig(ctx, topic, tc)
	}
	return permanent(fmt.Errorf("source topic %q was deleted and recreated (topic id %s, mirrored %s); its offsets started over", topic, seen, tc.SourceTopicID))
}

// topicConfigExcludes are source topic configs never copied (the KIP's exclude list): they
// describe the source brokers or would stop the destination accepting the source's records.
var topicConfigExcludes = []string{
	"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
	"message.timestamp.difference.max.ms", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
	"message.timestamp.type", "unclean.leader.election.enable", "min.insync.replicas",
}

// ensureDestinationTopic creates the destination topic with the source's partition count
// and explicit config overrides when it does not exist, and checks the count when it does.
func (e *Engine) ensureDestinationTopic(ctx context.Context, src cluster, mirror, topic string, partitions int) error {
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	meta, err := e.dst.metadata(ctx, topic, 0)
	var unknown *UnknownTopicError
	switch {
	case err == nil:
		if meta.partitions != partitions {
			return permanent(&PartitionCountMismatchError{Topic: topic, Source: partitions, Destination: meta.partitions})
		}
		return nil
	case !errors.As(err, &unknown):
		return err
	}
	configs := map[string]*string{}
	rcs, err := src.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return authErr("source", "describe configs of "+topic, err)
	}
	rec, _ := e.store.Mirror(mirror)
	if rc, err := rcs.On(topic, nil); err == nil && rc.Err == nil {
		for _, c := range rc.Configs {
			excluded := slices.Contains(topicConfigExcludes, c.Key) || slices.Contains(rec.Sync.TopicConfigExcludes, c.Key)
			if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !excluded && c.Value != nil {
				configs[c.Key] = c.Value
			}
		}
	}
	resp, err := e.dst.adm.CreateTopic(ctx, int32(partitions), -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return authErr("destination", "create topic "+topic, err)
	}
	e.log.Info("destination topic created", "topic", topic, "partitions", partitions, "configs", len(configs))
	return nil
}

// sameRecordAt compares what the source and the destination hold at one offset.
func (e *Engine) sameRecordAt(ctx context.Context, src cluster, topic string, partition int32, offset int64) (bool, error) {
	a, err := recordAt(ctx, src, topic, partition, offset)
	if err != nil {
		return false, err
	}
	b, err := recordAt(ctx, e.dst, topic, partition, offset)
	if err != nil {
		return false, err
	}
	return a.equal(b), nil
}

// offsetContent is what one offset holds, as far as consumers can tell.
type offsetContent struct {
	kind      batchKind
	gap       bool // no record: a compaction hole or a lone marker's neighbour
	record    kmsg.Record
	timestamp int64
}

func (a offsetContent) equal(b offsetContent) bool {
	if a.gap || b.gap || a.kind == kindAbort || b.kind == kindAbort {
		// A source gap is an abort marker on the destination; both are invisible.
		return (a.gap || a.kind == kindAbort) && (b.gap || b.kind == kindAbort)
	}
	if a.kind != b.kind || a.timestamp != b.timestamp {
		return false
	}
	if a.kind == kindCommit {
		return true
	}
	return bytes.Equal(a.record.Key, b.record.Key) && bytes.Equal(a.record.Value, b.record.Value) &&
		slices.EqualFunc(a.record.Headers, b.record.Headers, func(x, y kmsg.Header) bool {
			return x.Key == y.Key && bytes.Equal(x.Value, y.Value)
		})
}

func recordAt(ctx context.Context, c cluster, topic string, partition int32, offset int64) (offsetContent, error) {
	meta, err := c.metadata(ctx, topic, partition)
	if err != nil {
		return offsetContent{}, err
	}
	f, err := c.fetch(ctx, meta.leader, topic, meta.id, partition, offset, 1<<20)
	if err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) {
			return offsetContent{gap: true}, nil // below the log start: nothing to compare
		}
		return offsetContent{}, err
	}
	for _, b := range f.batches {
		if b.baseOffset() > offset || b.lastOffset() < offset {
			continue
		}
		kind, err := b.kind()
		if err != nil {
			return offsetContent{}, err
		}
		recs, err := b.records()
		if err != nil {
			return offsetContent{}, err
		}
		var hdr kmsg.RecordBatch
		if err := hdr.ReadFrom(b); err != nil {
			return offsetContent{}, err
		}
		for _, rec := range recs {
			if b.baseOffset()+int64(rec.OffsetDelta) == offset {
				return offsetContent{kind: kind, record: rec, timestamp: hdr.FirstTimestamp + rec.TimestampDelta64}, nil
			}
		}
		return offsetContent{gap: true}, nil
	}
	return offsetContent{gap: true}, nil
}

// stop is STOPPING, the failover: abort the replayed transactions still open (the KIP's
// ABORT markers at stop), record the last mirrored offset, make the topic writable. Each
// step is idempotent, so a crash mid-way resumes here.
func (r *runner) stop(ctx context.Context) error {
	e, k := r.e, r.key
	if err := r.abortOpenTxns(ctx); err != nil {
		return err
	}
	_, end, err := e.dst.offsets(ctx, k.topic, k.partition)
	if err != nil {
		return err
	}
	rec, _ := e.store.Mirror(k.mirror)
	tc, _ := e.store.TopicConfig(k.topic)
	lm := LastMirrorRecord{
		LastMirroredOffset: end, LastMirroredEpoch: -1,
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
	prefix := fmt.Sprintf("kafkamirror.%s.%s.%d.", k.mirror, k.topic, k.partition)
	listed, err := e.dst.adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return authErr("destination", "list transactions", err)
	}
	var ids []string
	for id := range listed {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		described, err := e.dst.adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return authErr("destination", "describe transactions", err)
		}
		for _, d := range described {
			if d.Err != nil {
				return d.Err
			}
			if d.State != "Ongoing" {
				continue
			}
			if _, err := e.dst.endTxn(ctx, d.TxnID, producerIdentity{id: d.ProducerID, epoch: d.ProducerEpoch}, false); err != nil {
				return err
			}
			r.log.Info("aborted a replayed transaction still open at failover", "transactional_id", d.TxnID)
		}
	}
	// Markers land asynchronously on real brokers: wait for the last stable offset.
	deadline := time.Now().Add(time.Minute)
	for {
		lso, err := e.dst.adm.ListCommittedOffsets(ctx, k.topic)
		if err != nil {
			return err
		}
		hw, err := e.dst.adm.ListEndOffsets(ctx, k.topic)
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

// readOnlyACL denies WRITE on a mirrored topic to every principal; super users (the
// worker's principal must be one) are not subject to ACLs.
func readOnlyACL(topic string) *kadm.ACLBuilder {
	return kadm.NewACLs().Deny("User:*").DenyHosts("*").Topics(topic).
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite)
}

// enforceReadOnly makes a mirrored topic read-only when the destination has an authorizer;
// without one (SECURITY_DISABLED) the offset check still detects foreign writes.
func (e *Engine) enforceReadOnly(ctx context.Context, topic string) (bool, error) {
	res, err := e.dst.adm.CreateACLs(ctx, readOnlyACL(topic))
	if err == nil {
		for _, r := range res {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if errors.Is(err, kerr.SecurityDisabled) {
		return false, nil
	}
	if err != nil {
		return false, authErr("destination", "make topic "+topic+" read-only (CREATE ACL)", err)
	}
	return true, nil
}

// liftReadOnly removes the read-only ACL; nothing to do without an authorizer.
func (e *Engine) liftReadOnly(ctx context.Context, topic string) error {
	res, err := e.dst.adm.DeleteACLs(ctx, readOnlyACL(topic))
	if err == nil {
		for _, r := range res {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if err != nil && !errors.Is(err, kerr.SecurityDisabled) {
		return authErr("destination", "make topic "+topic+" writable (DELETE ACL)", err)
	}
	return nil
}
