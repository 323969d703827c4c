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
)

// prepare is PREPARING: check the source, create the destination topic when absent, and
// decide whether the destination may be continued from its end: it must be a prefix of the
// source (empty at a first start; a restart, a failback, or a partition whose state record
// was lost continues wherever the destination ends). A destination that diverged is left to
// the topic's divergence policy.
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
	src := kafkareq.NewCluster("source", srcCl)
	id, err := kafkareq.ClusterID(ctx, srcCl)
	if err != nil {
		return fmt.Errorf("reaching the source cluster: %w", err)
	}
	if id != rec.SourceClusterID {
		return permanent(fmt.Errorf("%s: the source cluster now reports cluster id %q, but mirror %q is bound to %q; recreate the mirror if the source really moved",
			kip.CodeSourceClusterIDMismatch, id, k.mirror, rec.SourceClusterID))
	}
	smeta, err := src.Metadata(ctx, k.topic, k.partition)
	if err != nil {
		var unknown *mirrorerr.UnknownTopicError
		if errors.As(err, &unknown) {
			return permanent(fmt.Errorf("source topic %q was deleted", k.topic))
		}
		return err
	}
	if err := e.checkSourceTopicID(ctx, k.topic, smeta.ID); err != nil {
		return err
	}
	// The start command created the topic; PREPARING creates it again only when it
	// vanished since, and leaves the record of its configs to the next start.
	if _, err := e.ensureDestinationTopic(ctx, src, k.mirror, k.topic, smeta.Partitions); err != nil {
		return err
	}
	d, err := e.checkDestination(ctx, k, src)
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

// checkDestination returns how the destination partition diverged from its source, or nil
// when it is a prefix of the source that mirroring may continue from its end. It fails while
// the source cluster still mirrors the topic from this one.
func (e *Engine) checkDestination(ctx context.Context, k partitionKey, src kafkareq.Cluster) (*divergence, error) {
	other, err := mirrorstate.ReadStore(ctx, src.Client, e.cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("reading the source cluster's %s: %w", storeTopic(e.cfg.Store), err)
	}
	if m := mirroringFromUs(other, k.topic, k.partition, e.dstID); m != "" {
		return nil, fmt.Errorf("the source cluster still mirrors topic %q from this cluster (its mirror %q is not stopped); stop it there first", k.topic, m)
	}
	dstStart, dstEnd, err := e.dst.Offsets(ctx, k.topic, k.partition)
	if err != nil {
		return nil, err
	}
	if dstEnd > dstStart {
		if open, err := e.foreignOpenTransaction(ctx, k.topic, k.partition, dstEnd); err != nil || open != nil {
			if err == nil {
				err = open
			}
			return nil, err
		}
	}
	srcStart, srcEnd, err := src.Offsets(ctx, k.topic, k.partition)
	if err != nil {
		return nil, err
	}
	probe := partitionProbe{ctx: ctx, src: src, dst: e.dst, topic: k.topic, partition: k.partition}
	d, err := judgeDestination(logRange{srcStart, srcEnd}, logRange{dstStart, dstEnd}, probe)
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
