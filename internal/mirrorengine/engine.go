package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/rounds"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/topicconfig"
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
	Observer   datapath.Observer // default: discards
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
	// FetchBufferBytes bounds the fetched bytes each partition holds ahead of its writes;
	// default datapath.DefaultFetchBufferBytes.
	FetchBufferBytes int
	// FetchMemory bounds the fetched bytes all partitions hold together; default a bound of
	// datapath.DefaultFetchMemoryBytes. Engines of one process may share one.
	FetchMemory *datapath.FetchMemory
}

// Engine is the control plane: it validates and applies the KIP's commands, records them
// in __mirror_state before acknowledging them, and runs one runner per mirrored partition.
// It holds no durable state of its own: Open on the same destination rebuilds it.
type Engine struct {
	cfg   Config
	log   *slog.Logger
	dst   kafkareq.Cluster
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
	syncers map[string]*runningSync                            // by mirror name
	looks   map[partitionKey]*rounds.Rounds[int32, *topicLook] // PREPARING's looks, by mirror and topic (partition 0)
	// stoppedLooks are the topics (partition 0) whose read-only ACL a new runner of a STOPPED
	// partition is checking.
	stoppedLooks map[partitionKey]bool
	// readOnly creates the read-only ACLs of the topics whose partitions start fetching.
	readOnly rounds.Rounds[string, map[string]error]
	// storeDown is why the destination did not answer a command's check of __mirror_state
	// at storeDownAt; empty when it answered.
	storeDown   string
	storeDownAt time.Time
	place       placement // with a Placement only
}

// spawnRound runs the loop of a round of requests that serves runners. Close waits for a
// round under way: it may open the source client. The asker is a runner, so the wait group
// is above zero here.
func (e *Engine) spawnRound(f func()) { e.wg.Go(f) }

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
		cfg.Observer = datapath.NopObserver{}
	}
	if cfg.FetchMemory == nil {
		cfg.FetchMemory = datapath.NewFetchMemory(datapath.DefaultFetchMemoryBytes)
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
	dstID, err := kafkareq.ClusterID(ctx, cfg.Destination)
	if err != nil {
		return nil, fmt.Errorf("reaching the destination cluster: %w", err)
	}
	if err := kafkareq.CheckBrokerVersions(ctx, cfg.Destination, "destination"); err != nil {
		return nil, err
	}
	if cfg.Store.Replication == nil {
		// __mirror_state is replicated as a destination topic of a source with 3 replicas.
		cfg.Store.Replication = func(brokers int) (int16, int) {
			r := topicconfig.ReplicationFor(3, 0, 3, 0, brokers)
			return r.Factor, r.MinInsync
		}
	}
	store, err := mirrorstate.OpenStore(ctx, cfg.Destination, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", storeTopic(cfg.Store), err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		cfg: cfg, log: cfg.Logger, dst: kafkareq.NewCluster("destination", cfg.Destination), dstID: dstID, store: store,
		ctx: runCtx, cancel: cancel, sources: map[string]*kgo.Client{}, runners: map[partitionKey]*runner{},
		syncers: map[string]*runningSync{}, looks: map[partitionKey]*rounds.Rounds[int32, *topicLook]{}, place: newPlacement(),
		stoppedLooks: map[partitionKey]bool{},
	}
	e.readOnly.Run, e.readOnly.Spawn = e.createReadOnlyACLs, e.spawnRound
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
		return nil, cmdErr(kip.CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
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
	stopped := r.status.State == partitionstate.StateStopped // read before run() may change it
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		r.run()
	}()
	// A worker that crashed after the last partitions of a topic recorded STOPPED but before
	// one of them lifted the read-only ACL (afterStopped) left the failed-over topic
	// read-only: whoever runs a STOPPED partition of it next looks again, once per topic.
	if topic := (partitionKey{k.mirror, k.topic, 0}); stopped && !e.stoppedLooks[topic] {
		e.stoppedLooks[topic] = true
		e.wg.Go(func() {
			r.liftOnceStopped()
			e.mu.Lock()
			delete(e.stoppedLooks, topic)
			e.mu.Unlock()
		})
	}
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
	meta, err := kafkareq.NewCluster("source", src).Metadata(ctx, topic, 0)
	if err != nil {
		return err
	}
	for p := range int32(meta.Partitions) {
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
		return cmdErr(kip.CodeTopicNotInClusterMirror, "topic %q is not in any cluster mirror", topic)
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
