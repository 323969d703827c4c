package mirrorengine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// The KIP's commands: each is validated, recorded in __mirror_state, then acted on, one at a
// time (cmdMu).

// CreateClusterMirror validates and records a new mirror. The source must be reachable;
// its cluster id is checked against m.SourceClusterID when given, and bound to the mirror.
func (e *Engine) CreateClusterMirror(ctx context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error) {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if err := partitionstate.ValidateMirrorName(m.Name); err != nil {
		return mirrorstate.MirrorRecord{}, cmdErr(kip.CodeInvalidClusterMirrorName, "%w", err)
	}
	if cerr := e.mirrorProblem(m.Name); cerr != nil {
		return mirrorstate.MirrorRecord{}, cerr
	}
	if old, ok := e.store.Mirror(m.Name); ok {
		// A repeat of the create that made the mirror (a retry whose first answer was lost)
		// is done; anything else is a different mirror under a taken name.
		if sameMirror(old, m) {
			return old, nil
		}
		return mirrorstate.MirrorRecord{}, cmdErr(kip.CodeClusterMirrorAlreadyExists, "cluster mirror %q already exists with other settings", m.Name)
	}
	id, cerr := e.probeSource(ctx, m.Source)
	if cerr != nil {
		return mirrorstate.MirrorRecord{}, cerr
	}
	if m.SourceClusterID != "" && m.SourceClusterID != id {
		return mirrorstate.MirrorRecord{}, cmdErr(kip.CodeSourceClusterIDMismatch, "the source cluster at %s has cluster id %q, not the expected %q", strings.Join(m.Source.BootstrapServers, ","), id, m.SourceClusterID)
	}
	if id == e.dstID {
		return mirrorstate.MirrorRecord{}, cmdErr(kip.CodeInvalidClusterMirrorConfig, "the source cluster is the destination cluster (%s): a cluster cannot mirror itself", id)
	}
	m.SourceClusterID = id
	m.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	if err := e.putMirror(ctx, m); err != nil {
		return mirrorstate.MirrorRecord{}, err
	}
	e.startSyncer(m.Name)
	// Topics still name the mirror when its unreadable record was removed: they resume.
	e.resumeTopics(ctx, m.Name)
	e.log.Info("cluster mirror created", "mirror", m.Name, "source_cluster_id", id)
	return m, nil
}

// sameMirror reports whether a create of req repeats the create that recorded old: the same
// source connection (secrets included), sync and destination topic settings, and no other
// expected source cluster id.
func sameMirror(old, req mirrorstate.MirrorRecord) bool {
	if req.SourceClusterID != "" && req.SourceClusterID != old.SourceClusterID {
		return false
	}
	norm := func(m mirrorstate.MirrorRecord) mirrorstate.MirrorRecord {
		// The store round-trips an empty list as none.
		m.Name, m.SourceClusterID, m.CreatedAt = "", "", time.Time{}
		for _, l := range []*[]string{&m.Source.BootstrapServers, &m.Sync.TopicConfigExcludes, &m.Sync.GroupIncludes, &m.Sync.GroupExcludes} {
			if len(*l) == 0 {
				*l = nil
			}
		}
		return m
	}
	return reflect.DeepEqual(norm(old), norm(req))
}

// putMirror records a mirror; a secret without a key to seal it is the caller's mistake.
func (e *Engine) putMirror(ctx context.Context, m mirrorstate.MirrorRecord) error {
	var noKey error
	cerr := e.record(ctx, "recording the mirror", func(ctx context.Context) error {
		err := e.store.PutMirror(ctx, m)
		if errors.Is(err, mirrorstate.ErrNoSecretKey) {
			noKey = err
			return nil
		}
		return err
	})
	switch {
	case noKey != nil:
		return cmdErr(kip.CodeInvalidClusterMirrorConfig, "%w", noKey)
	case cerr != nil:
		return cerr
	}
	return nil
}

// StoreCommandTimeout bounds how long a command waits for the destination cluster to record
// a change in __mirror_state: during a destination outage a command answers within it,
// saying whether it took effect, instead of waiting for the cluster to come back.
const StoreCommandTimeout = 10 * time.Second

// record runs a command's write of __mirror_state within StoreCommandTimeout. It first asks
// the destination for the store's offsets: when that gets no answer, nothing is written and
// the command certainly did not take effect (COORDINATOR_NOT_AVAILABLE). A write sent but
// not acknowledged in time may still be appended (REQUEST_TIMED_OUT): the store applies it
// if it is, as a reload would.
func (e *Engine) record(ctx context.Context, what string, write func(context.Context) error) *CommandError {
	ctx, cancel := context.WithTimeout(ctx, StoreCommandTimeout)
	defer cancel()
	if cerr := e.storeAnswers(ctx, what); cerr != nil {
		return cerr
	}
	err := write(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mirrorstate.ErrWriteUnacknowledged):
		return cmdErr(kip.CodeRequestTimedOut, "%s: the destination cluster did not acknowledge the %s record within %v, so the command may or may not have taken effect: "+
			"it did if the destination appended the record, which describe shows once the destination answers again",
			what, e.store.Topic(), StoreCommandTimeout)
	case ctx.Err() != nil:
		// kgo fails an idempotent record on its context only when it was never sent.
		return cmdErr(kip.CodeCoordinatorNotAvailable, "%s: the destination cluster did not take the %s record within %v, so the command did not take effect; send it again once the destination answers: %w",
			what, e.store.Topic(), StoreCommandTimeout, err)
	}
	return cmdErr(kip.CodeUnknownServerError, "%s: %w", what, err)
}

type arrivalKey struct{}

// CommandArrived notes in a command's context when the command arrived. Commands run one at
// a time, so during a destination outage each would wait StoreCommandTimeout behind the
// others; one that arrived before a check found the destination not answering gets that
// answer at once instead.
func CommandArrived(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, at)
}

// storeAnswers checks that the destination answers for __mirror_state before a command
// changes anything, within ctx or StoreCommandTimeout.
func (e *Engine) storeAnswers(ctx context.Context, what string) *CommandError {
	e.mu.Lock()
	down, downAt := e.storeDown, e.storeDownAt
	e.mu.Unlock()
	arrived, ok := ctx.Value(arrivalKey{}).(time.Time)
	if down == "" || !ok || !arrived.Before(downAt) {
		ctx, cancel := context.WithTimeout(ctx, StoreCommandTimeout)
		err := e.store.Ping(ctx)
		cancel()
		down = ""
		if err != nil {
			down = fmt.Sprintf("the destination cluster did not answer for %s within %v, so nothing was recorded and the command did not take effect; send it again once the destination answers: %v",
				e.store.Topic(), StoreCommandTimeout, err)
		}
		e.mu.Lock()
		e.storeDown, e.storeDownAt = down, time.Now()
		e.mu.Unlock()
	}
	if down != "" {
		return cmdErr(kip.CodeCoordinatorNotAvailable, "%s: %s", what, down)
	}
	return nil
}

// storeDown is the error of a topic command that failed on __mirror_state for every topic,
// nil otherwise: such a command as a whole did not (or may not have) take effect, which a
// client retries.
func storeDown(results []TopicResult) error {
	for _, r := range results {
		if r.Err == nil || (r.Err.Code != kip.CodeCoordinatorNotAvailable && r.Err.Code != kip.CodeRequestTimedOut) {
			return nil
		}
	}
	if len(results) == 0 {
		return nil
	}
	return results[0].Err
}

// probeSource connects with the given settings and returns the source cluster's id.
func (e *Engine) probeSource(ctx context.Context, conn mirrorstate.SourceConnection) (string, *CommandError) {
	var id string
	cerr := e.withSourceClient(ctx, conn, func(ctx context.Context, cl *kgo.Client) (err error) {
		if id, err = kafkareq.ClusterID(ctx, cl); err != nil {
			return err
		}
		return kafkareq.CheckBrokerVersions(ctx, cl, "source")
	})
	return id, cerr
}

// UpdateClusterMirror replaces a mirror's source connection settings (credentials) and sync
// settings. The source must still be the same cluster. A record without bootstrap servers
// changes only the sync settings and keeps the stored connection.
func (e *Engine) UpdateClusterMirror(ctx context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error) {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	old, cerr := e.lookupMirror(m.Name)
	if cerr != nil {
		return mirrorstate.MirrorRecord{}, cerr
	}
	if len(m.Source.BootstrapServers) == 0 {
		// Only the sync settings change; the stored connection (and its secrets) stays.
		m.Source = old.Source
	} else {
		id, cerr := e.probeSource(ctx, m.Source)
		if cerr != nil {
			return mirrorstate.MirrorRecord{}, cerr
		}
		if id != old.SourceClusterID {
			return mirrorstate.MirrorRecord{}, cmdErr(kip.CodeSourceClusterIDMismatch, "the new settings reach cluster %q, but the mirror is bound to %q", id, old.SourceClusterID)
		}
	}
	m.SourceClusterID, m.CreatedAt = old.SourceClusterID, old.CreatedAt
	if err := e.putMirror(ctx, m); err != nil {
		return mirrorstate.MirrorRecord{}, err
	}
	// Runners pick the new client up at their next session.
	e.dropSource(m.Name)
	return m, nil
}

// DeleteClusterMirror removes a mirror whose topics are all STOPPED. Its topics' last
// mirrored offsets stay, for a later failback.
func (e *Engine) DeleteClusterMirror(ctx context.Context, name string) error {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if _, cerr := e.lookupMirror(name); cerr != nil {
		return cerr
	}
	topics := e.mirrorTopics(name)
	var active []string
	for _, t := range topics {
		if !e.topicStopped(name, t) {
			active = append(active, t)
		}
	}
	if len(active) > 0 {
		return cmdErr(kip.CodeClusterMirrorNotEmpty, "cluster mirror %q still mirrors topics %s: stop them first (failover)", name, strings.Join(active, ", "))
	}
	// Before the runners stop: a destination that does not answer leaves everything as it was.
	if cerr := e.storeAnswers(ctx, "deleting the mirror"); cerr != nil {
		return cerr
	}
	for _, t := range topics {
		e.stopRunners(name, t)
		if cerr := e.record(ctx, fmt.Sprintf("deleting the records of topic %q", t), func(ctx context.Context) error {
			if err := e.store.DeletePartitions(ctx, name, t); err != nil {
				return err
			}
			return e.store.DeleteTopicConfig(ctx, t)
		}); cerr != nil {
			return cerr
		}
	}
	e.stopSyncer(name)
	if cerr := e.record(ctx, "deleting the mirror", func(ctx context.Context) error { return e.store.DeleteMirror(ctx, name) }); cerr != nil {
		return cerr
	}
	e.dropSource(name)
	e.log.Info("cluster mirror deleted", "mirror", name)
	return nil
}

// SourceTopics lists the mirror's source topics whose names match the regular expression
// pattern (all when empty), internal topics excluded, sorted (ListSourceTopics).
func (e *Engine) SourceTopics(ctx context.Context, mirror, pattern string) ([]string, error) {
	m, cerr := e.lookupMirror(mirror)
	if cerr != nil {
		return nil, cerr
	}
	return e.ListSourceTopics(ctx, m.Source, pattern)
}

// TopicResult is one topic's outcome of a topic command; Err is nil on success.
type TopicResult struct {
	Topic string
	Err   *CommandError
	// FinalSync is a stop's group offset sync after the last mirrored record: FinalSyncDone,
	// FinalSyncOff, or why it did not happen. Empty for the other commands.
	FinalSync string
}

// StartMirrorTopics starts mirroring topics: a first start, a restart after a stop or of
// FAILED partitions, or failback when the source was mirrored from this cluster before.
// Every partition continues from wherever its destination ends when that is a prefix of the
// source. divergence is "fail" or "recreate" and decides what happens to a destination that
// diverged (records written here since a failover, or never mirrored): its partitions FAIL,
// or the destination topic is recreated once no partition of it writes any more.
func (e *Engine) StartMirrorTopics(ctx context.Context, mirror string, topics []string, divergence string) ([]TopicResult, error) {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if _, cerr := e.lookupMirror(mirror); cerr != nil {
		return nil, cerr
	}
	switch divergence {
	case "":
		divergence = "fail"
	case "fail", "recreate":
	default:
		return nil, cmdErr(kip.CodeInvalidRequest, "divergence must be \"fail\" or \"recreate\", not %q", divergence)
	}
	src, err := e.source(mirror)
	if err != nil {
		return nil, err
	}
	results := e.eachTopic(topics, func(topic string) *CommandError {
		if p := kip.TopicNameProblem(topic); p != "" {
			return cmdErr(kip.CodeInvalidTopic, "topic name %q %s", topic, p)
		}
		if cerr := e.topicProblem(topic); cerr != nil {
			return cerr
		}
		tc, exists := e.store.TopicConfig(topic)
		if exists {
			other, d := partitionstate.ParseMirrorName(tc.MirrorName)
			switch {
			case d != partitionstate.DesiredStopped && other != mirror:
				return cmdErr(kip.CodeTopicAlreadyInClusterMirror, "topic %q is in cluster mirror %q (%s); stop it there first", topic, other, d)
			case d == partitionstate.DesiredMirroring && tc.Divergence == divergence && !e.topicFailed(mirror, topic):
				// A repeat of the start (a retry whose first answer was lost) is done.
				return nil
			case d != partitionstate.DesiredStopped && !e.topicFailed(mirror, topic):
				// Starting a FAILED topic again is the operator's recovery; a paused topic
				// resumes, and another divergence policy is a different start.
				return cmdErr(kip.CodeTopicAlreadyInClusterMirror, "topic %q is already %s in cluster mirror %q (divergence %q)", topic, d, mirror, tc.Divergence)
			case d == partitionstate.DesiredStopped && other != mirror:
				// Stopped in another mirror: that mirror's records of it are history now.
				if cerr := e.record(ctx, fmt.Sprintf("deleting the partition records of %q in cluster mirror %q", topic, other), func(ctx context.Context) error {
					return e.store.DeletePartitions(ctx, other, topic)
				}); cerr != nil {
					return cerr
				}
				e.stopRunners(other, topic)
				tc = mirrorstate.TopicConfigRecord{}
			}
		}
		smeta, err := kafkareq.NewCluster("source", src).Metadata(ctx, topic, 0)
		if err != nil {
			var unknown *mirrorerr.UnknownTopicError
			if errors.As(err, &unknown) {
				return cmdErr(kip.CodeUnknownTopicOrPartition, "topic %q does not exist on the source cluster", topic)
			}
			return cmdErr(kip.CodeSourceClusterUnreachable, "describing topic %q on the source: %w", topic, err)
		}
		if divergence == "recreate" {
			if err := e.recreateIfDiverged(ctx, mirror, topic, smeta.Partitions); err != nil {
				return cmdErr(kip.CodeUnknownServerError, "divergence = \"recreate\" on topic %q: %w", topic, err)
			}
		}
		// The command creates the destination topic, so that the record of the configs it
		// was created without is written with the command's other writes of the topic's
		// record (PREPARING on another worker would write it from a view up to a second
		// old, over a pause given meanwhile). A failure is PREPARING's to report.
		if left, err := e.ensureDestinationTopic(ctx, kafkareq.NewCluster("source", src), mirror, topic, smeta.Partitions); err != nil {
			e.log.Warn("the start could not create the destination topic; PREPARING will", "mirror", mirror, "topic", topic, "error", err)
		} else if left != nil {
			tc.ConfigsLeftOut = left
		}
		// Bind the topic to the source topic as it is now; PREPARING's divergence check
		// guards the destination's existing records against a source recreated meanwhile.
		tc.MirrorName, tc.Divergence, tc.SourceTopicID = partitionstate.FormatMirrorName(mirror, partitionstate.DesiredMirroring), divergence, hex.EncodeToString(smeta.ID[:])
		if cerr := e.putTopicConfig(ctx, topic, tc); cerr != nil {
			return cerr
		}
		if err := e.ensureRunners(ctx, mirror, topic); err != nil {
			return cmdErr(kip.CodeSourceClusterUnreachable, "%w", err)
		}
		for _, r := range e.topicRunners(mirror, topic) {
			if s := r.Status().State; s == partitionstate.StateStopped || s == partitionstate.StateFailed {
				r.send(partitionstate.Restart{}) // through PREPARING, which continues a destination that is a prefix of the source
			} else {
				r.send(partitionstate.Evaluate{})
			}
		}
		if err := e.restartElsewhere(ctx, mirror, topic); err != nil {
			return cmdErr(kip.CodeUnknownServerError, "restarting the partitions of %q: %w", topic, err)
		}
		e.kickSyncer(mirror)
		e.log.Info("mirror topic started", "mirror", mirror, "topic", topic, "divergence", divergence)
		return nil
	})
	if err := storeDown(results); err != nil {
		return nil, err
	}
	return results, nil
}

// PauseMirrorTopics stops fetching; the topics stay read-only.
func (e *Engine) PauseMirrorTopics(ctx context.Context, mirror string, topics []string) ([]TopicResult, error) {
	return e.changeDesired(ctx, mirror, topics, partitionstate.DesiredPaused)
}

// ResumeMirrorTopics continues paused topics from the destination end.
func (e *Engine) ResumeMirrorTopics(ctx context.Context, mirror string, topics []string) ([]TopicResult, error) {
	return e.changeDesired(ctx, mirror, topics, partitionstate.DesiredMirroring)
}

func (e *Engine) changeDesired(ctx context.Context, mirror string, topics []string, to partitionstate.Desired) ([]TopicResult, error) {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if _, cerr := e.lookupMirror(mirror); cerr != nil {
		return nil, cerr
	}
	results := e.eachTopic(topics, func(topic string) *CommandError {
		if cerr := e.topicProblem(topic); cerr != nil {
			return cerr
		}
		tc, ok := e.store.TopicConfig(topic)
		current, from := partitionstate.ParseMirrorName(tc.MirrorName)
		if !ok || current != mirror {
			return cmdErr(kip.CodeTopicNotInClusterMirror, "topic %q is not in cluster mirror %q", topic, mirror)
		}
		switch {
		case from == partitionstate.DesiredStopped && to == partitionstate.DesiredStopped:
			return cmdErr(kip.CodeMirrorTopicAlreadyStopped, "topic %q is already stopped", topic)
		case from == partitionstate.DesiredStopped:
			return cmdErr(kip.CodeInvalidMirrorPartitionState, "topic %q is stopped; start it again instead of a %s", topic, kip.CommandTo(to.String()))
		}
		if from == to {
			return nil
		}
		tc.MirrorName = partitionstate.FormatMirrorName(mirror, to)
		if cerr := e.putTopicConfig(ctx, topic, tc); cerr != nil {
			return cerr
		}
		// Runners exist already but for partitions the source added since: a source that
		// does not answer must not hold a failover up.
		lctx, cancel := context.WithTimeout(ctx, describeTimeout)
		_ = e.ensureRunners(lctx, mirror, topic)
		cancel()
		for _, r := range e.topicRunners(mirror, topic) {
			r.send(partitionstate.Evaluate{})
		}
		e.log.Info("mirror topic desired state changed", "mirror", mirror, "topic", topic, "from", from, "to", to)
		return nil
	})
	if err := storeDown(results); err != nil {
		return nil, err
	}
	return results, nil
}

// putTopicConfig records a command's change of a topic's mirror.name.
func (e *Engine) putTopicConfig(ctx context.Context, topic string, tc mirrorstate.TopicConfigRecord) *CommandError {
	return e.record(ctx, fmt.Sprintf("recording mirror.name of %q", topic), func(ctx context.Context) error {
		return e.store.PutTopicConfig(ctx, topic, tc)
	})
}

// eachTopic runs fn for every topic. Once one could not be recorded (the destination does
// not answer), the rest are not attempted: each would wait StoreCommandTimeout again.
func (e *Engine) eachTopic(topics []string, fn func(string) *CommandError) []TopicResult {
	out := make([]TopicResult, 0, len(topics))
	var down *CommandError
	for _, t := range topics {
		if down != nil {
			out = append(out, TopicResult{Topic: t, Err: cmdErr(kip.CodeCoordinatorNotAvailable,
				"not attempted, so it did not take effect: an earlier topic of the command could not be recorded (%s)", down.Message)})
			continue
		}
		err := fn(t)
		if err != nil && (err.Code == kip.CodeCoordinatorNotAvailable || err.Code == kip.CodeRequestTimedOut) {
			down = err
		}
		out = append(out, TopicResult{Topic: t, Err: err})
	}
	return out
}
