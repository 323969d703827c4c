package mirrorengine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/rounds"
)

// prepare is PREPARING: check the source, create the destination topic when absent, and
// decide whether the destination may be continued from its end: it must be a prefix of the
// source (empty at a first start; a restart, a failback, or a partition whose state record
// was lost continues wherever the destination ends). A destination that diverged is left to
// the topic's divergence policy. What it reads of the topic is read once for all its
// partitions that prepare at the same time (lookAt).
func (r *runner) prepare(ctx context.Context) error {
	e, k := r.e, r.key
	look, err := e.lookAt(ctx, k)
	if err != nil {
		return err
	}
	if look.err != nil {
		return look.err
	}
	tp := kafkareq.TopicPartition{Topic: k.topic, Partition: k.partition}
	d, err := e.judge(ctx, k, look.src, look.other, look.dst[tp], look.srcOffsets[tp])
	if err != nil || d == nil {
		return err
	}
	if tc, _ := e.store.TopicConfig(k.topic); tc.Divergence == "recreate" {
		// Only the start command recreates, once every partition stopped writing; this
		// destination diverged after it looked.
		return permanent(fmt.Errorf("%s; start the topic again to recreate the destination topic", d))
	}
	return permanent(fmt.Errorf("%s; divergence policy \"fail\" keeps them: divergence = \"recreate\" would discard %d records and copy the source again", d, d.records()))
}

// topicLook is what PREPARING reads of one mirrored topic for the partitions that asked:
// the source checked, the destination topic ensured, the source's mirror state, and both
// logs' offsets. err is the failure of every partition.
type topicLook struct {
	src             kafkareq.Cluster
	other           *mirrorstate.Store
	dst, srcOffsets map[kafkareq.TopicPartition]kafkareq.PartitionOffsets
	err             error
}

// lookAt returns a look at k's topic that began after this call: partitions that prepare
// together (a started topic's) share one, a few requests for the whole topic instead of a
// dozen per partition.
func (e *Engine) lookAt(ctx context.Context, k partitionKey) (*topicLook, error) {
	key := partitionKey{mirror: k.mirror, topic: k.topic}
	e.mu.Lock()
	rs := e.looks[key]
	if rs == nil {
		rs = &rounds.Rounds[int32, *topicLook]{
			Run:   func(ps []int32) *topicLook { return e.look(e.ctx, key.mirror, key.topic, ps) },
			Spawn: e.spawnRound,
		}
		e.looks[key] = rs
	}
	e.mu.Unlock()
	return rs.Ask(ctx, k.partition)
}

// look reads what prepare needs of a topic's partitions ps, in the order a single
// partition's PREPARING always read it: the source's identity, the destination topic, the
// source's mirror state, then the destination's offsets before the source's (so that a
// prefix of the source is not taken for a divergence while the source grows).
func (e *Engine) look(ctx context.Context, mirror, topic string, ps []int32) *topicLook {
	l := &topicLook{}
	rec, ok := e.store.Mirror(mirror)
	if !ok {
		l.err = permanent(fmt.Errorf("cluster mirror %q no longer exists", mirror))
		return l
	}
	srcCl, err := e.source(mirror)
	if err != nil {
		l.err = err
		return l
	}
	l.src = kafkareq.NewCluster("source", srcCl)
	id, err := kafkareq.ClusterID(ctx, srcCl)
	if err != nil {
		l.err = fmt.Errorf("reaching the source cluster: %w", err)
		return l
	}
	if id != rec.SourceClusterID {
		l.err = permanent(fmt.Errorf("%s: the source cluster now reports cluster id %q, but mirror %q is bound to %q; recreate the mirror if the source really moved",
			kip.CodeSourceClusterIDMismatch, id, mirror, rec.SourceClusterID))
		return l
	}
	smeta, err := l.src.Metadata(ctx, topic, ps[0])
	if err != nil {
		var unknown *mirrorerr.UnknownTopicError
		if errors.As(err, &unknown) {
			err = permanent(fmt.Errorf("source topic %q was deleted", topic))
		}
		l.err = err
		return l
	}
	if err := e.checkSourceTopicID(ctx, topic, smeta.ID); err != nil {
		l.err = err
		return l
	}
	// The start command created the topic; PREPARING creates it again only when it
	// vanished since, and leaves the record of its configs to the next start.
	if _, err := e.ensureDestinationTopic(ctx, l.src, mirror, topic, smeta.Partitions); err != nil {
		l.err = err
		return l
	}
	if l.other, err = mirrorstate.ReadStore(ctx, l.src.Client, e.cfg.Store); err != nil {
		l.err = fmt.Errorf("reading the source cluster's %s: %w", storeTopic(e.cfg.Store), err)
		return l
	}
	tps := make([]kafkareq.TopicPartition, len(ps))
	for i, p := range ps {
		tps[i] = kafkareq.TopicPartition{Topic: topic, Partition: p}
	}
	l.dst = e.dst.LogOffsets(ctx, tps)
	l.srcOffsets = l.src.LogOffsets(ctx, tps)
	return l
}

// checkDestination returns how the destination partition diverged from its source, or nil
// when it is a prefix of the source that mirroring may continue from its end. It fails while
// the source cluster still mirrors the topic from this one.
func (e *Engine) checkDestination(ctx context.Context, k partitionKey, src kafkareq.Cluster) (*divergence, error) {
	other, err := mirrorstate.ReadStore(ctx, src.Client, e.cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("reading the source cluster's %s: %w", storeTopic(e.cfg.Store), err)
	}
	tps := []kafkareq.TopicPartition{{Topic: k.topic, Partition: k.partition}}
	dst := e.dst.LogOffsets(ctx, tps)[tps[0]]
	return e.judge(ctx, k, src, other, dst, src.LogOffsets(ctx, tps)[tps[0]])
}

// judge is checkDestination on what was read: other, the source cluster's mirror state, and
// both logs' offsets.
func (e *Engine) judge(ctx context.Context, k partitionKey, src kafkareq.Cluster, other *mirrorstate.Store, dst, srcOffsets kafkareq.PartitionOffsets) (*divergence, error) {
	if m := mirroringFromUs(other, k.topic, k.partition, e.dstID); m != "" {
		return nil, fmt.Errorf("the source cluster still mirrors topic %q from this cluster (its mirror %q is not stopped); stop it there first", k.topic, m)
	}
	for _, o := range []kafkareq.ListedOffset{dst.Start, dst.End, srcOffsets.Start, srcOffsets.End} {
		if o.Err != nil {
			return nil, o.Err
		}
	}
	dstStart, dstEnd := dst.Start.Offset, dst.End.Offset
	if dstEnd > dstStart {
		if open, err := e.foreignOpenTransaction(ctx, k.topic, k.partition, dstEnd); err != nil || open != nil {
			if err == nil {
				err = open
			}
			return nil, err
		}
	}
	if srcEnd := srcOffsets.End.Offset; dstEnd > srcEnd {
		// Not a divergence while the source leader's log holds the destination's end: a
		// leader elected a moment ago answers a high watermark below it for a while.
		meta, err := src.Metadata(ctx, k.topic, k.partition)
		if err != nil {
			return nil, err
		}
		if behind, err := src.HighWatermarkBehind(ctx, meta, k.topic, k.partition, dstEnd, srcEnd); err != nil || behind != nil {
			if err == nil {
				err = behind
			}
			return nil, err
		}
	}
	probe := partitionProbe{ctx: ctx, src: src, dst: e.dst, topic: k.topic, partition: k.partition}
	d, err := judgeDestination(logRange{srcOffsets.Start.Offset, srcOffsets.End.Offset}, logRange{dstStart, dstEnd}, probe)
	if d != nil {
		d.topic, d.partition = k.topic, k.partition
	}
	return d, err
}

// mirroringFromUs returns the name of a mirror in another cluster's store that still
// mirrors the partition from cluster id us (not yet STOPPED, even if a stop is requested:
// its last mirrored offset is written only at the end of STOPPING), or "".
func mirroringFromUs(other *mirrorstate.Store, topic string, partition int32, us string) string {
	tc, ok := other.TopicConfig(topic)
	if !ok {
		return ""
	}
	mirror, d := partitionstate.ParseMirrorName(tc.MirrorName)
	if m, ok := other.Mirror(mirror); !ok || m.SourceClusterID != us {
		return ""
	}
	if rec, ok := other.Partition(mirror, topic, partition); d == partitionstate.DesiredStopped && ok && rec.Status.State == partitionstate.StateStopped {
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
