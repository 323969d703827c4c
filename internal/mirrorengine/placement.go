package mirrorengine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// Placement makes an engine one of several workers of one destination, each owning some of
// the work (the worker's group membership decides who owns what). The engine then starts a
// partition's runner and a mirror's metadata sync only inside RunPartition and RunMirrorSync,
// which the owner calls with its ownership context, and it rereads __mirror_state every
// FollowInterval for what the other workers write: new mirrors and topics, desired states.
// Commands keep working on any engine; the caller makes sure one engine applies them at a time.
type Placement interface {
	// UnitsChanged says that Units may answer differently (a mirror or a mirrored partition
	// came or went). It is called with engine locks held: it must only take note.
	UnitsChanged()
}

// DefaultFollowInterval is how often a placed engine rereads __mirror_state.
const DefaultFollowInterval = time.Second

// PartitionID names one mirrored partition.
type PartitionID struct {
	Mirror, Topic string
	Partition     int32
}

// placement is an engine's share of the work; guarded by Engine.mu.
type placement struct {
	known      map[partitionKey]struct{}        // every mirrored partition this engine heard of
	partitions map[partitionKey]context.Context // owned here: the runner's parent context
	syncs      map[string]context.Context       // owned here, by mirror
}

func newPlacement() placement {
	return placement{known: map[partitionKey]struct{}{}, partitions: map[partitionKey]context.Context{}, syncs: map[string]context.Context{}}
}

// partitionOwned returns the parent context of k's runner when k is owned here; otherwise
// it notes k as a unit to assign and returns nil.
func (p *placement) partitionOwned(pl Placement, k partitionKey) context.Context {
	if ctx := p.partitions[k]; ctx != nil {
		return ctx
	}
	if _, ok := p.known[k]; !ok {
		p.known[k] = struct{}{}
		pl.UnitsChanged()
	}
	return nil
}

// syncOwned returns the parent context of the mirror's syncer when it is owned here, or nil.
func (p *placement) syncOwned(pl Placement, mirror string) context.Context {
	if ctx := p.syncs[mirror]; ctx != nil {
		return ctx
	}
	pl.UnitsChanged()
	return nil
}

// owned derives the context of work owned under lease: it ends with the lease or the engine.
func (e *Engine) owned(owner context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(lease.With(owner, owner))
	stop := context.AfterFunc(e.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// RunPartition runs the partition's runner (PREPARING, fetching, STOPPING, retries) while
// lease lasts, or until Close. It returns once the runner has stopped and no write of it is
// in flight. Commands may stop and restart the runner meanwhile (a recreated topic).
func (e *Engine) RunPartition(lease context.Context, id PartitionID) {
	k := partitionKey{id.Mirror, id.Topic, id.Partition}
	ctx, cancel := e.owned(lease)
	defer cancel()
	if err := e.catchUp(ctx, time.Now()); err != nil {
		// Starting from a stale record could undo the previous owner's last step.
		e.log.Warn("cannot reread __mirror_state; the partition waits", "mirror", id.Mirror, "topic", id.Topic, "partition", id.Partition, "error", err)
		for e.catchUp(ctx, time.Now()) != nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	e.mu.Lock()
	e.place.partitions[k] = ctx
	e.mu.Unlock()
	if e.partitionMirrored(k) {
		e.runner(k)
	}
	<-ctx.Done()
	e.mu.Lock()
	delete(e.place.partitions, k)
	r := e.runners[k]
	delete(e.runners, k)
	e.mu.Unlock()
	if r != nil {
		r.close()
	}
}

// RunMirrorSync runs the mirror's metadata sync while lease lasts, or until Close.
func (e *Engine) RunMirrorSync(lease context.Context, mirror string) {
	ctx, cancel := e.owned(lease)
	defer cancel()
	e.mu.Lock()
	e.place.syncs[mirror] = ctx
	e.mu.Unlock()
	if _, ok := e.store.Mirror(mirror); ok {
		e.startSyncer(mirror)
	}
	<-ctx.Done()
	e.mu.Lock()
	delete(e.place.syncs, mirror)
	e.mu.Unlock()
	e.stopSyncer(mirror)
}

// topicStatuses is the status of every partition of the topic: its local runner's when it
// runs here, else the one recorded (by whichever worker runs it).
func (e *Engine) topicStatuses(mirror, topic string) map[int32]partitionstate.Status {
	out := map[int32]partitionstate.Status{}
	for p, rec := range e.store.Partitions(mirror, topic) {
		out[p] = rec.Status
	}
	for _, r := range e.topicRunners(mirror, topic) {
		out[r.key.partition] = r.Status()
	}
	return out
}

// restartElsewhere restarts the STOPPED and FAILED partitions of the topic that run on other
// workers: the start command records their PREPARING itself, and their owner, which follows
// __mirror_state, reloads its runner from that record.
func (e *Engine) restartElsewhere(ctx context.Context, mirror, topic string) error {
	if e.cfg.Placement == nil {
		return nil
	}
	local := map[int32]bool{}
	for _, r := range e.topicRunners(mirror, topic) {
		local[r.key.partition] = true
	}
	for p, rec := range e.store.Partitions(mirror, topic) {
		if local[p] || rec.Status.State != partitionstate.StateStopped && rec.Status.State != partitionstate.StateFailed {
			continue
		}
		next, _, err := partitionstate.Next(rec.Status, partitionstate.DesiredMirroring, partitionstate.Restart{}, e.cfg.Retry)
		if err != nil {
			continue
		}
		if err := e.store.PutPartition(ctx, mirror, topic, p, mirrorstate.PartitionRecord{Status: next, UpdatedAt: time.Now().UTC()}); err != nil {
			return err
		}
	}
	return nil
}

// recordNewPartitions records the PREPARING of the partitions below n of a mirrored topic
// that have no record (the ones it gained, even before a crash), when several workers share
// the destination: a partition's runner on another worker starts from its record, and only
// the worker that runs the mirror's sync has seen the source grow.
func (e *Engine) recordNewPartitions(ctx context.Context, mirror, topic string, n int) error {
	if e.cfg.Placement == nil {
		return nil
	}
	start, _, err := partitionstate.Next(partitionstate.Status{}, partitionstate.DesiredMirroring, partitionstate.Evaluate{}, e.cfg.Retry)
	if err != nil {
		return err
	}
	unrecorded := func(p int32) bool {
		_, ok := e.store.Partition(mirror, topic, p)
		// An unreadable record stays: FAILED until the operator acts.
		return !ok && e.recordProblem(mirrorstate.RecordKey{Kind: mirrorstate.KindPartition, Mirror: mirror, Topic: topic, Partition: p}) == ""
	}
	refreshed := false
	for p := range int32(n) {
		if !unrecorded(p) {
			continue
		}
		// Another worker may have recorded it a moment ago: never write over that.
		if !refreshed {
			if err := e.Refresh(ctx); err != nil {
				return err
			}
			if refreshed = true; !unrecorded(p) {
				continue
			}
		}
		if err := e.store.PutPartition(ctx, mirror, topic, p, mirrorstate.PartitionRecord{Status: start, UpdatedAt: time.Now().UTC()}); err != nil {
			return fmt.Errorf("recording the new partition %s[%d]: %w", topic, p, err)
		}
	}
	return nil
}

// quietElsewhere refuses to quiesce a topic whose partitions run on other workers and are
// not quiet: this engine cannot stop them, and deleting the topic under them would let
// them write into its successor.
func (e *Engine) quietElsewhere(mirror, topic string, local []*runner) error {
	if e.cfg.Placement == nil {
		return nil
	}
	here := map[int32]bool{}
	for _, r := range local {
		here[r.key.partition] = true
	}
	statuses := e.topicStatuses(mirror, topic)
	var busy []string
	for _, p := range slices.Sorted(maps.Keys(statuses)) {
		if !here[p] && !quiet(statuses[p]) {
			busy = append(busy, fmt.Sprintf("%d (%s)", p, statuses[p].State))
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("partitions %s of topic %q run on other workers of the group and are not stopped, so the destination topic was not deleted; stop the topic first, then start it again",
			strings.Join(busy, ", "), topic)
	}
	return nil
}

// catchUp rereads __mirror_state unless a reread began after since: a unit handed over
// here starts from its previous owner's last records, all acknowledged before the handover.
func (e *Engine) catchUp(ctx context.Context, since time.Time) error {
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	if e.lastRefresh.After(since) {
		return nil
	}
	e.lastRefresh = time.Now()
	return e.Refresh(ctx)
}

// partitionMirrored reports whether k's topic is in k's mirror and the mirror exists.
func (e *Engine) partitionMirrored(k partitionKey) bool {
	tc, ok := e.store.TopicConfig(k.topic)
	if m, _ := partitionstate.ParseMirrorName(tc.MirrorName); !ok || m != k.mirror {
		return false
	}
	_, ok = e.store.Mirror(k.mirror)
	return ok
}

// Units lists the work to share out: every mirrored partition and every mirror (its
// metadata sync), sorted.
func (e *Engine) Units() (partitions []PartitionID, mirrors []string) {
	for _, m := range e.store.Mirrors() {
		mirrors = append(mirrors, m.Name)
	}
	set := map[partitionKey]struct{}{}
	for topic, tc := range e.store.TopicConfigs() {
		m, _ := partitionstate.ParseMirrorName(tc.MirrorName)
		for p := range e.store.Partitions(m, topic) {
			set[partitionKey{m, topic, p}] = struct{}{}
		}
	}
	e.mu.Lock()
	for k := range e.place.known {
		set[k] = struct{}{}
	}
	e.mu.Unlock()
	for k := range set {
		if e.partitionMirrored(k) {
			partitions = append(partitions, PartitionID{k.mirror, k.topic, k.partition})
		}
	}
	slices.SortFunc(partitions, func(a, b PartitionID) int {
		return cmp.Or(cmp.Compare(a.Mirror, b.Mirror), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return partitions, mirrors
}

// follow rereads __mirror_state for the other workers' writes until Close.
func (e *Engine) follow() {
	defer e.wg.Done()
	interval := cmp.Or(e.cfg.FollowInterval, DefaultFollowInterval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		if err := e.Refresh(ctx); err != nil && e.ctx.Err() == nil {
			e.log.Warn("rereading __mirror_state failed; retrying", "error", err)
		}
		cancel()
	}
}

// Refresh rereads __mirror_state now and acts on what the other workers wrote (a new owner
// of the commands reads its predecessor's last writes before applying one).
func (e *Engine) Refresh(ctx context.Context) error {
	changed, err := e.store.Refresh(ctx)
	if e.cfg.Placement != nil {
		e.followed(ctx, changed)
	}
	return err
}

// RefreshForCommand rereads __mirror_state before a command (another worker may have written
// it last) within StoreCommandTimeout. A destination that does not answer fails the command
// with COORDINATOR_NOT_AVAILABLE, nothing changed — at once for a command that arrived
// before the last check found the destination not answering.
func (e *Engine) RefreshForCommand(ctx context.Context) *CommandError {
	ctx, cancel := context.WithTimeout(ctx, StoreCommandTimeout)
	defer cancel()
	what := "rereading " + e.store.Topic() + " before the command"
	if cerr := e.storeAnswers(ctx, what); cerr != nil {
		return cerr
	}
	if err := e.Refresh(ctx); err != nil {
		return cmdErr(kip.CodeCoordinatorNotAvailable, "%s: the destination cluster did not answer within %v, so the command did not take effect; send it again once the destination answers: %w",
			what, StoreCommandTimeout, err)
	}
	return nil
}

// followed acts on records another worker wrote: a new or changed mirror (its source
// client is rebuilt, its topics become units), a topic's mirror.name (its partitions become
// units; the runners here evaluate the new desired state).
func (e *Engine) followed(ctx context.Context, changed []mirrorstate.RecordKey) {
	units := false // partitions new to this engine ask for a rebalance themselves (runner)
	for _, k := range changed {
		switch k.Kind {
		case mirrorstate.KindMirror:
			units = true
			e.dropSource(k.Mirror)
			if _, ok := e.store.Mirror(k.Mirror); ok {
				e.resumeTopics(ctx, k.Mirror)
				// Its sync unit may have come here before its record did (RunMirrorSync).
				e.startSyncer(k.Mirror)
			}
		case mirrorstate.KindTopicConfig:
			units = true
			tc, ok := e.store.TopicConfig(k.Topic)
			if m, _ := partitionstate.ParseMirrorName(tc.MirrorName); ok && e.partitionMirrored(partitionKey{mirror: m, topic: k.Topic}) {
				if err := e.ensureRunners(ctx, m, k.Topic); err != nil {
					e.log.Warn("cannot list the source partitions of a mirrored topic yet", "mirror", m, "topic", k.Topic, "error", err)
				}
			}
			for _, r := range e.allRunners() {
				if r.key.topic == k.Topic {
					r.send(partitionstate.Evaluate{})
				}
			}
		case mirrorstate.KindPartition:
			// Another worker wrote it: the start command's restart, or the tombstones of a
			// deletion. A runner here starts over from the record.
			pk := partitionKey{k.Mirror, k.Topic, k.Partition}
			e.mu.Lock()
			_, local := e.runners[pk]
			e.mu.Unlock()
			switch {
			case local:
				e.reloadRunner(pk)
			case e.partitionMirrored(pk):
				e.runner(pk)
			}
		}
	}
	if units {
		e.cfg.Placement.UnitsChanged()
	}
}
