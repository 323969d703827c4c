package mirrorengine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// Config configures an Engine.
type Config struct {
	// Destination is a client of the destination cluster, the cluster this engine mirrors
	// into and whose __mirror_state holds everything durable.
	Destination *kgo.Client
	Store       mirrorstate.StoreConfig
	// Retry is the back-off for FAILED partitions; the zero value means the KIP's defaults
	// (100 ms doubling to 5 min, 20 attempts, full jitter).
	Retry partitionstate.RetryPolicy
	// SourceOpts are added to every source client (for example timeouts).
	SourceOpts []kgo.Opt
	Logger     *slog.Logger
	Observer   Observer // default: discards
	// StallAfter is how long the sessions of a MIRRORING partition may fail before it is
	// reported stalled; default DefaultStallAfter.
	StallAfter time.Duration
	// Placement, when set, makes the engine one of several workers of the destination: it
	// runs only the partitions and metadata syncs it is given (see Placement). Nil: it runs
	// everything itself.
	Placement Placement
	// FollowInterval is how often a placed engine rereads __mirror_state for the other
	// workers' writes; default DefaultFollowInterval.
	FollowInterval time.Duration
}

// Engine is the control plane: it validates and applies the KIP's commands, records them
// in __mirror_state before acknowledging them, and runs one runner per mirrored partition.
// It holds no durable state of its own: Open on the same destination rebuilds it.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	dst   cluster
	dstID string
	store *mirrorstate.Store

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	cmdMu   sync.Mutex // commands run one at a time
	topicMu sync.Mutex // destination topic creation and recreation

	offsets offsetCache // the end offsets describes read last

	refreshMu   sync.Mutex // one reread of __mirror_state at a time (catchUp)
	lastRefresh time.Time

	mu      sync.Mutex
	sources map[string]*kgo.Client // by mirror name
	runners map[partitionKey]*runner
	syncers map[string]*syncer                          // by mirror name
	looks   map[partitionKey]*rounds[int32, *topicLook] // PREPARING's looks, by mirror and topic (partition 0)
	// storeDown is why the destination did not answer a command's check of __mirror_state
	// at storeDownAt; empty when it answered.
	storeDown   string
	storeDownAt time.Time
	place       placement // with a Placement only
}

type partitionKey struct {
	mirror, topic string
	partition     int32
}

// Open loads the destination's __mirror_state (creating it if absent) and resumes every
// mirrored partition where the records say it was.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Destination == nil {
		return nil, errors.New("mirrorengine: no destination client")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = DefaultStallAfter
	}
	if cfg.Retry.Initial == 0 && cfg.Retry.Max == 0 && cfg.Retry.MaxAttempts == 0 {
		cfg.Retry = partitionstate.RetryPolicy{Initial: kip.RetryInitialBackoff, Max: kip.RetryMaxBackoff, MaxAttempts: kip.RetryMaxAttempts, Jitter: cfg.Retry.Jitter}
	}
	if cfg.Retry.Jitter == nil {
		cfg.Retry.Jitter = func(d time.Duration) time.Duration { return rand.N(d + 1) }
	}
	dstID, err := clusterID(ctx, cfg.Destination)
	if err != nil {
		return nil, fmt.Errorf("reaching the destination cluster: %w", err)
	}
	if err := checkBrokerVersions(ctx, cfg.Destination, "destination"); err != nil {
		return nil, err
	}
	if cfg.Store.Replication == nil {
		// __mirror_state is replicated as a destination topic of a source with 3 replicas.
		cfg.Store.Replication = func(brokers int) (int16, int) {
			r := replicationFor(3, 0, 3, 0, brokers)
			return r.factor, r.minInsync
		}
	}
	store, err := mirrorstate.OpenStore(ctx, cfg.Destination, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", storeTopic(cfg.Store), err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		cfg: cfg, log: cfg.Logger, dst: newCluster("destination", cfg.Destination), dstID: dstID, store: store,
		ctx: runCtx, cancel: cancel, sources: map[string]*kgo.Client{}, runners: map[partitionKey]*runner{},
		syncers: map[string]*syncer{}, looks: map[partitionKey]*rounds[int32, *topicLook]{}, place: newPlacement(),
	}
	for _, m := range store.Mirrors() {
		e.startSyncer(m.Name)
		e.resumeTopics(ctx, m.Name)
	}
	if cfg.Placement != nil {
		e.wg.Add(1)
		go e.follow()
	}
	return e, nil
}

// resumeTopics starts a runner for every partition of the mirror's topics, where its record
// says it was.
func (e *Engine) resumeTopics(ctx context.Context, mirror string) {
	for _, topic := range e.mirrorTopics(mirror) {
		for p := range e.store.Partitions(mirror, topic) {
			e.runner(partitionKey{mirror, topic, p})
		}
		for _, b := range e.store.BadRecords() {
			if b.Kind == mirrorstate.KindName(mirrorstate.KindPartition) && b.Mirror == mirror && b.Topic == topic {
				e.runner(partitionKey{mirror, topic, b.Partition}) // FAILED until the operator acts
			}
		}
		// Partitions without a record yet (a crash right after the start was recorded).
		if err := e.ensureRunners(ctx, mirror, topic); err != nil {
			e.log.Warn("cannot list the source partitions of a mirrored topic yet", "mirror", mirror, "topic", topic, "error", err)
		}
	}
}

func storeTopic(c mirrorstate.StoreConfig) string {
	if c.Topic == "" {
		return mirrorstate.DefaultStoreTopic
	}
	return c.Topic
}

// Close stops every runner (fetching stops; nothing is failed over) and the source clients.
func (e *Engine) Close() {
	e.cancel()
	e.wg.Wait()
	e.mu.Lock()
	mirrors := make([]string, 0, len(e.syncers))
	for m := range e.syncers {
		mirrors = append(mirrors, m)
	}
	e.mu.Unlock()
	for _, m := range mirrors {
		e.stopSyncer(m)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cl := range e.sources {
		cl.Close()
	}
	e.sources = map[string]*kgo.Client{}
}

// DestinationClusterID is the id of the cluster this engine mirrors into.
func (e *Engine) DestinationClusterID() string { return e.dstID }

// source returns the mirror's source client, creating it on first use.
func (e *Engine) source(mirror string) (*kgo.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cl := e.sources[mirror]; cl != nil {
		return cl, nil
	}
	rec, ok := e.store.Mirror(mirror)
	if !ok {
		return nil, cmdErr(CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	opts, err := kafkaconn.Opts(rec.Source)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, e.cfg.SourceOpts...)...)
	if err != nil {
		return nil, err
	}
	e.sources[mirror] = cl
	return cl, nil
}

func (e *Engine) dropSource(mirror string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cl := e.sources[mirror]; cl != nil {
		cl.Close()
		delete(e.sources, mirror)
	}
}

// runner returns the partition's runner, starting it if needed; with a Placement, only
// while this engine owns the partition (nil otherwise).
func (e *Engine) runner(k partitionKey) *runner {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.runners[k]; r != nil {
		return r
	}
	parent := e.ctx
	if e.cfg.Placement != nil {
		if parent = e.place.partitionOwned(e.cfg.Placement, k); parent == nil {
			return nil // runs where it is owned
		}
	}
	r := newRunner(parent, e, k)
	e.runners[k] = r
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		r.run()
	}()
	return r
}

// topicRunners returns the runners of a mirror's topic, by partition.
func (e *Engine) topicRunners(mirror, topic string) []*runner {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*runner
	for k, r := range e.runners {
		if k.mirror == mirror && k.topic == topic {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key.partition < out[j].key.partition })
	return out
}

// ensureRunners starts a runner for every source partition of the topic.
func (e *Engine) ensureRunners(ctx context.Context, mirror, topic string) error {
	src, err := e.source(mirror)
	if err != nil {
		return err
	}
	meta, err := newCluster("source", src).metadata(ctx, topic, 0)
	if err != nil {
		return err
	}
	for p := range int32(meta.partitions) {
		e.runner(partitionKey{mirror, topic, p})
	}
	return nil
}

// stopRunners ends the topic's runners and forgets them.
func (e *Engine) stopRunners(mirror, topic string) {
	for _, r := range e.topicRunners(mirror, topic) {
		r.close()
		e.mu.Lock()
		delete(e.runners, r.key)
		e.mu.Unlock()
	}
}

// quiesceTimeout bounds how long recreating a topic waits for its partitions to stop writing.
var quiesceTimeout = 30 * time.Second

// quiesceTopic makes sure no partition of the topic writes to the destination any more: each
// one that is not quiet goes to a FAILED that waits for the operator (so no retry restarts
// it), and once all are quiet their runners end, which waits for in-flight produces. It
// returns the stopped runners' keys for the caller to start again. When a partition does
// not settle within quiesceTimeout (a slow PREPARING or STOPPING), nothing is stopped.
func (e *Engine) quiesceTopic(ctx context.Context, mirror, topic, reason string) ([]partitionKey, error) {
	runners := e.topicRunners(mirror, topic)
	if err := e.quietElsewhere(mirror, topic, runners); err != nil {
		return nil, err
	}
	for _, r := range runners {
		if !quiet(r.Status()) {
			r.send(partitionstate.Fail{Err: reason, Retryable: false, Now: time.Now()})
		}
	}
	deadline := time.Now().Add(quiesceTimeout)
	for {
		var busy []string
		for _, r := range runners {
			if s := r.Status(); !quiet(s) {
				busy = append(busy, fmt.Sprintf("%d (%s)", r.key.partition, s.State))
			}
		}
		if len(busy) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("partitions %s of topic %q did not stop within %s, so the destination topic was not deleted; start the topic again to retry",
				strings.Join(busy, ", "), topic, quiesceTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	e.stopRunners(mirror, topic)
	keys := make([]partitionKey, len(runners))
	for i, r := range runners {
		keys[i] = r.key
	}
	return keys, nil
}

// quiet reports whether a partition in status s neither writes nor starts to by itself.
func quiet(s partitionstate.Status) bool {
	return s.State == partitionstate.StateStopped || s.State == partitionstate.StateFailed && s.RetryAttempt < 0
}

// CreateClusterMirror validates and records a new mirror. The source must be reachable;
// its cluster id is checked against m.SourceClusterID when given, and bound to the mirror.
func (e *Engine) CreateClusterMirror(ctx context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error) {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	if err := partitionstate.ValidateMirrorName(m.Name); err != nil {
		return mirrorstate.MirrorRecord{}, cmdErr(CodeInvalidClusterMirrorName, "%w", err)
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
		return mirrorstate.MirrorRecord{}, cmdErr(CodeClusterMirrorAlreadyExists, "cluster mirror %q already exists with other settings", m.Name)
	}
	id, cerr := e.probeSource(ctx, m.Source)
	if cerr != nil {
		return mirrorstate.MirrorRecord{}, cerr
	}
	if m.SourceClusterID != "" && m.SourceClusterID != id {
		return mirrorstate.MirrorRecord{}, cmdErr(CodeSourceClusterIDMismatch, "the source cluster at %s has cluster id %q, not the expected %q", strings.Join(m.Source.BootstrapServers, ","), id, m.SourceClusterID)
	}
	if id == e.dstID {
		return mirrorstate.MirrorRecord{}, cmdErr(CodeInvalidClusterMirrorConfig, "the source cluster is the destination cluster (%s): a cluster cannot mirror itself", id)
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
		return cmdErr(CodeInvalidClusterMirrorConfig, "%w", noKey)
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
		return cmdErr(CodeRequestTimedOut, "%s: the destination cluster did not acknowledge the %s record within %v, so the command may or may not have taken effect: "+
			"it did if the destination appended the record, which describe shows once the destination answers again",
			what, e.store.Topic(), StoreCommandTimeout)
	case ctx.Err() != nil:
		// kgo fails an idempotent record on its context only when it was never sent.
		return cmdErr(CodeCoordinatorNotAvailable, "%s: the destination cluster did not take the %s record within %v, so the command did not take effect; send it again once the destination answers: %w",
			what, e.store.Topic(), StoreCommandTimeout, err)
	}
	return cmdErr(CodeUnknownServerError, "%s: %w", what, err)
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
		return cmdErr(CodeCoordinatorNotAvailable, "%s: %s", what, down)
	}
	return nil
}

// storeDown is the error of a topic command that failed on __mirror_state for every topic,
// nil otherwise: such a command as a whole did not (or may not have) take effect, which a
// client retries.
func storeDown(results []TopicResult) error {
	for _, r := range results {
		if r.Err == nil || (r.Err.Code != CodeCoordinatorNotAvailable && r.Err.Code != CodeRequestTimedOut) {
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
		if id, err = clusterID(ctx, cl); err != nil {
			return err
		}
		return checkBrokerVersions(ctx, cl, "source")
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
			return mirrorstate.MirrorRecord{}, cmdErr(CodeSourceClusterIDMismatch, "the new settings reach cluster %q, but the mirror is bound to %q", id, old.SourceClusterID)
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
		return cmdErr(CodeClusterMirrorNotEmpty, "cluster mirror %q still mirrors topics %s: stop them first (failover)", name, strings.Join(active, ", "))
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

// mirrorTopics lists the topics whose mirror.name names the mirror, sorted.
func (e *Engine) mirrorTopics(mirror string) []string {
	var out []string
	for topic, tc := range e.store.TopicConfigs() {
		if m, _ := partitionstate.ParseMirrorName(tc.MirrorName); m == mirror {
			out = append(out, topic)
		}
	}
	slices.Sort(out)
	return out
}

// topicStopped reports whether every known partition of the topic is STOPPED.
func (e *Engine) topicStopped(mirror, topic string) bool {
	for _, r := range e.topicRunners(mirror, topic) {
		if r.Status().State != partitionstate.StateStopped {
			return false
		}
	}
	for _, rec := range e.store.Partitions(mirror, topic) {
		if rec.Status.State != partitionstate.StateStopped {
			return false
		}
	}
	return true
}

// topicFailed reports whether any partition of the topic is FAILED.
func (e *Engine) topicFailed(mirror, topic string) bool {
	for _, s := range e.topicStatuses(mirror, topic) {
		if s.State == partitionstate.StateFailed {
			return true
		}
	}
	return false
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
		return nil, cmdErr(CodeInvalidRequest, "divergence must be \"fail\" or \"recreate\", not %q", divergence)
	}
	src, err := e.source(mirror)
	if err != nil {
		return nil, err
	}
	results := e.eachTopic(topics, func(topic string) *CommandError {
		if p := kip.TopicNameProblem(topic); p != "" {
			return cmdErr(CodeInvalidTopic, "topic name %q %s", topic, p)
		}
		if cerr := e.topicProblem(topic); cerr != nil {
			return cerr
		}
		tc, exists := e.store.TopicConfig(topic)
		if exists {
			other, d := partitionstate.ParseMirrorName(tc.MirrorName)
			switch {
			case d != partitionstate.DesiredStopped && other != mirror:
				return cmdErr(CodeTopicAlreadyInClusterMirror, "topic %q is in cluster mirror %q (%s); stop it there first", topic, other, d)
			case d == partitionstate.DesiredMirroring && tc.Divergence == divergence && !e.topicFailed(mirror, topic):
				// A repeat of the start (a retry whose first answer was lost) is done.
				return nil
			case d != partitionstate.DesiredStopped && !e.topicFailed(mirror, topic):
				// Starting a FAILED topic again is the operator's recovery; a paused topic
				// resumes, and another divergence policy is a different start.
				return cmdErr(CodeTopicAlreadyInClusterMirror, "topic %q is already %s in cluster mirror %q (divergence %q)", topic, d, mirror, tc.Divergence)
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
		smeta, err := newCluster("source", src).metadata(ctx, topic, 0)
		if err != nil {
			var unknown *UnknownTopicError
			if errors.As(err, &unknown) {
				return cmdErr(CodeUnknownTopicOrPartition, "topic %q does not exist on the source cluster", topic)
			}
			return cmdErr(CodeSourceClusterUnreachable, "describing topic %q on the source: %w", topic, err)
		}
		if divergence == "recreate" {
			if err := e.recreateIfDiverged(ctx, mirror, topic, smeta.partitions); err != nil {
				return cmdErr(CodeUnknownServerError, "divergence = \"recreate\" on topic %q: %w", topic, err)
			}
		}
		// The command creates the destination topic, so that the record of the configs it
		// was created without is written with the command's other writes of the topic's
		// record (PREPARING on another worker would write it from a view up to a second
		// old, over a pause given meanwhile). A failure is PREPARING's to report.
		if left, err := e.ensureDestinationTopic(ctx, newCluster("source", src), mirror, topic, smeta.partitions); err != nil {
			e.log.Warn("the start could not create the destination topic; PREPARING will", "mirror", mirror, "topic", topic, "error", err)
		} else if left != nil {
			tc.ConfigsLeftOut = left
		}
		// Bind the topic to the source topic as it is now; PREPARING's divergence check
		// guards the destination's existing records against a source recreated meanwhile.
		tc.MirrorName, tc.Divergence, tc.SourceTopicID = partitionstate.FormatMirrorName(mirror, partitionstate.DesiredMirroring), divergence, hex.EncodeToString(smeta.id[:])
		if cerr := e.putTopicConfig(ctx, topic, tc); cerr != nil {
			return cerr
		}
		if err := e.ensureRunners(ctx, mirror, topic); err != nil {
			return cmdErr(CodeSourceClusterUnreachable, "%w", err)
		}
		for _, r := range e.topicRunners(mirror, topic) {
			if s := r.Status().State; s == partitionstate.StateStopped || s == partitionstate.StateFailed {
				r.send(partitionstate.Restart{}) // through PREPARING, which continues a destination that is a prefix of the source
			} else {
				r.send(partitionstate.Evaluate{})
			}
		}
		if err := e.restartElsewhere(ctx, mirror, topic); err != nil {
			return cmdErr(CodeUnknownServerError, "restarting the partitions of %q: %w", topic, err)
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
			return cmdErr(CodeTopicNotInClusterMirror, "topic %q is not in cluster mirror %q", topic, mirror)
		}
		switch {
		case from == partitionstate.DesiredStopped && to == partitionstate.DesiredStopped:
			return cmdErr(CodeMirrorTopicAlreadyStopped, "topic %q is already stopped", topic)
		case from == partitionstate.DesiredStopped:
			return cmdErr(CodeInvalidMirrorPartitionState, "topic %q is stopped; start it again instead of a %s", topic, kip.CommandTo(to.String()))
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
			out = append(out, TopicResult{Topic: t, Err: cmdErr(CodeCoordinatorNotAvailable,
				"not attempted, so it did not take effect: an earlier topic of the command could not be recorded (%s)", down.Message)})
			continue
		}
		err := fn(t)
		if err != nil && (err.Code == CodeCoordinatorNotAvailable || err.Code == CodeRequestTimedOut) {
			down = err
		}
		out = append(out, TopicResult{Topic: t, Err: err})
	}
	return out
}

// TopicOwner returns the owner recorded in the topic's config ("" when none) and whether
// the topic has a config at all.
func (e *Engine) TopicOwner(topic string) (owner string, ok bool) {
	tc, ok := e.store.TopicConfig(topic)
	return tc.Owner, ok
}

// SetTopicOwner records the owner of a topic that has a config; "" releases it. Commands
// and PREPARING rewrite the same record, so it takes their locks (in their order): no write
// of theirs is lost, nor this one.
func (e *Engine) SetTopicOwner(ctx context.Context, topic, owner string) error {
	e.cmdMu.Lock()
	defer e.cmdMu.Unlock()
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	tc, ok := e.store.TopicConfig(topic)
	if !ok {
		return cmdErr(CodeTopicNotInClusterMirror, "topic %q is not in any cluster mirror", topic)
	}
	if tc.Owner == owner {
		return nil
	}
	tc.Owner = owner
	if cerr := e.record(ctx, fmt.Sprintf("recording the owner of %q", topic), func(ctx context.Context) error {
		return e.store.PutTopicConfig(ctx, topic, tc)
	}); cerr != nil {
		return cerr
	}
	return nil
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
