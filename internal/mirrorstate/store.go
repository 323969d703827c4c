// Package mirrorstate is the engine's durable metadata: the compacted __mirror_state topic on the
// destination cluster (docs/design.md "__mirror_state"). The worker keeps no state
// of its own; OpenStore rebuilds the whole view by reading the topic, and
// every later write goes to the topic first and into the view only once the
// broker acknowledged it (acks=all), so the view never claims more than is
// durable. The workers of a group share the store, each key written by the
// owner of what it describes (a partition's runner, the commands); Refresh
// reads the others' writes.
//
// Loading reads each partition with raw Fetch requests through the engine's
// own client rather than a consumer: a consumer would need a second client
// (and with it a copy of whatever the engine's client is configured with),
// and a consumer cannot tell "nothing left below the end offset" from "not
// yet", which compaction makes a real case.
package mirrorstate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
)

// DefaultStoreTopic is the metadata topic's name, as in the KIP.
const DefaultStoreTopic = kip.StateTopic

// StoreConfig configures OpenStore and ReadStore.
type StoreConfig struct {
	// Topic is the metadata topic; default "__mirror_state".
	Topic string
	// Partitions is the partition count used when the topic is created;
	// default 1. (The KIP uses 50 on real brokers.) Like the KIP's
	// mirror.state.topic.num.partitions it must not change once the topic
	// exists: a record's partition is the hash of its key modulo the count.
	Partitions int32
	// ReplicationFactor is used when the topic is created; 0: Replication
	// decides; -1: the broker's defaults.
	ReplicationFactor int16
	// Replication, when ReplicationFactor is 0, gives the topic's replication
	// factor and min.insync.replicas (0: the broker's) from the destination's
	// broker count when the topic is created; nil: the broker's defaults. The
	// engine replicates it as a DR copy (the durable state of every mirror
	// lives here).
	Replication func(brokers int) (factor int16, minInsync int)
	// Sealer seals secret fields. Nil: mirrors with secrets can be neither
	// stored nor loaded (the error names KAFKAMIRROR_SECRET_KEY).
	Sealer *Sealer
	// Logger receives load warnings (skipped keys, repaired oddities);
	// default slog.Default().
	Logger *slog.Logger
}

func (c StoreConfig) withDefaults() StoreConfig {
	if c.Topic == "" {
		c.Topic = DefaultStoreTopic
	}
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ErrReadOnlyStore is returned by every write to a store opened with ReadStore.
var ErrReadOnlyStore = errors.New("read-only snapshot of another cluster's " + DefaultStoreTopic + ": writes are not allowed")

// Store is the in-memory view of __mirror_state plus the client that writes
// it. All methods are safe for concurrent use. Getters return copies.
type Store struct {
	cl       *kgo.Client
	cfg      StoreConfig
	log      *slog.Logger
	readOnly bool

	// wmu is held while records are handed to the client, never while
	// waiting for acknowledgements: records of one key go to one partition
	// in the order of their Produce calls, so seq (taken under wmu) is the
	// order in which the broker appends them.
	wmu sync.Mutex
	seq uint64

	mu sync.RWMutex
	v  storeView
	// records holds every key of the view, and every key whose value does not decode (a bad
	// record), as stored: what an operator inspects and repairs.
	records map[string]StateRecord
	// applied is the seq of the write last applied to the view per key.
	// Acknowledgements of concurrent writes can arrive in any order; an
	// older write must not overwrite a newer one in the view.
	applied map[string]uint64
	// offsets is the store offset of the record last applied per key, tombstones included,
	// and next the offset Refresh reads from per partition: records of one key share a
	// partition, so a lower offset is an older write, whoever wrote it.
	offsets map[string]int64
	next    map[int32]int64

	// testHookAcked, if set, runs after a write's acknowledgements and
	// before the view is updated: tests use it to hold an older write back
	// while a newer one of the same key completes.
	testHookAcked func(seqs []uint64)
}

// storeView is the decoded content of the topic.
type storeView struct {
	mirrors      map[string]MirrorRecord
	topicConfigs map[string]TopicConfigRecord
	partitions   map[storeMirrorTopic]map[int32]PartitionRecord
	lastMirrors  map[string]map[string]map[int32]LastMirrorRecord // topic → mirror → partition
}

type storeMirrorTopic struct{ mirror, topic string }

func newStoreView() storeView {
	return storeView{
		mirrors:      map[string]MirrorRecord{},
		topicConfigs: map[string]TopicConfigRecord{},
		partitions:   map[storeMirrorTopic]map[int32]PartitionRecord{},
		lastMirrors:  map[string]map[string]map[int32]LastMirrorRecord{},
	}
}

// storeEntry is a decoded __mirror_state value, one of the four record types; each puts
// itself into the view under its key.
type storeEntry interface {
	putInto(v *storeView, k RecordKey)
}

func (m MirrorRecord) putInto(v *storeView, k RecordKey) { v.mirrors[k.Mirror] = m }

func (r TopicConfigRecord) putInto(v *storeView, k RecordKey) { v.topicConfigs[k.Topic] = r }

func (r PartitionRecord) putInto(v *storeView, k RecordKey) {
	mt := storeMirrorTopic{k.Mirror, k.Topic}
	if v.partitions[mt] == nil {
		v.partitions[mt] = map[int32]PartitionRecord{}
	}
	v.partitions[mt][k.Partition] = r
}

func (r LastMirrorRecord) putInto(v *storeView, k RecordKey) {
	if v.lastMirrors[k.Topic] == nil {
		v.lastMirrors[k.Topic] = map[string]map[int32]LastMirrorRecord{}
	}
	if v.lastMirrors[k.Topic][k.Mirror] == nil {
		v.lastMirrors[k.Topic][k.Mirror] = map[int32]LastMirrorRecord{}
	}
	v.lastMirrors[k.Topic][k.Mirror][k.Partition] = r
}

// apply puts e under k, or removes k's record when e is nil (a tombstone).
func (v *storeView) apply(k RecordKey, e storeEntry) {
	if e != nil {
		e.putInto(v, k)
		return
	}
	switch k.Kind {
	case KindMirror:
		delete(v.mirrors, k.Mirror)
	case KindTopicConfig:
		delete(v.topicConfigs, k.Topic)
	case KindPartition:
		mt := storeMirrorTopic{k.Mirror, k.Topic}
		if ps := v.partitions[mt]; ps != nil {
			delete(ps, k.Partition)
			if len(ps) == 0 {
				delete(v.partitions, mt)
			}
		}
	case KindLastMirror:
		if byMirror := v.lastMirrors[k.Topic]; byMirror != nil {
			if ps := byMirror[k.Mirror]; ps != nil {
				delete(ps, k.Partition)
				if len(ps) == 0 {
					delete(byMirror, k.Mirror)
				}
			}
			if len(byMirror) == 0 {
				delete(v.lastMirrors, k.Topic)
			}
		}
	}
}

// decodeEntry decodes a stored value for k into the record type of its
// kind; a nil value (tombstone) gives nil.
func decodeEntry(k RecordKey, key string, value []byte, s *Sealer, mode secretMode) (storeEntry, error) {
	if value == nil {
		return nil, nil
	}
	switch k.Kind {
	case KindMirror:
		return decodeMirror(key, k.Mirror, value, s, mode)
	case KindTopicConfig:
		return decodeTopicConfig(key, value)
	case KindPartition:
		return decodePartition(key, value)
	case KindLastMirror:
		return decodeLastMirror(key, value)
	}
	return nil, fmt.Errorf("__mirror_state record %q: unknown kind", key)
}

// OpenStore opens the destination's store for reading and writing: it
// creates the topic if absent (cleanup.policy=compact), refuses an existing
// topic that is not compacted (its records would expire), reads every
// partition from its start to its end offset and builds the view: later
// records of a key win and tombstones delete. Unknown keys are skipped with
// a warning. A value this code cannot decode (garbage, a newer version, a
// secret that does not open) stays out of the view and is kept as a bad
// record (BadRecords), logged as a warning, until a later write of its key;
// only secrets the configured key opens none of fail the load.
//
// cl is used for every request and write. It must produce with acks=all,
// idempotently (or with one request in flight), without a transactional id
// and with a key-hashing partitioner (kgo's default), so that each key's
// records stay in one partition in write order.
func OpenStore(ctx context.Context, cl *kgo.Client, cfg StoreConfig) (*Store, error) {
	if cl == nil {
		return nil, errors.New("mirror state store: no client")
	}
	cfg = cfg.withDefaults()
	if err := checkStoreProducer(cl); err != nil {
		return nil, fmt.Errorf("mirror state store %s: %w", cfg.Topic, err)
	}
	if err := ensureStoreTopic(ctx, cl, cfg); err != nil {
		return nil, err
	}
	return loadStore(ctx, cl, cfg, true, openSecrets)
}

// ReadStore reads a read-only snapshot of ANOTHER cluster's store (the
// source's, at failback). It never creates the topic: a missing topic is an
// empty store, and so is a topic the principal may not read: a mirror needs
// only read access to its source's topics, and a source no worker of ours
// writes has no reverse mirror state. Secrets are not decrypted (the other
// cluster's worker may use another key, and failback needs none of them):
// secret fields come back empty and cfg.Sealer is ignored. A value that does
// not decode fails the read, naming its key. Every write returns
// ErrReadOnlyStore.
func ReadStore(ctx context.Context, cl *kgo.Client, cfg StoreConfig) (*Store, error) {
	if cl == nil {
		return nil, errors.New("mirror state store: no client")
	}
	cfg = cfg.withDefaults()
	cfg.Sealer = nil
	s, err := loadStore(ctx, cl, cfg, false, dropSecrets)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		cfg.Logger.Info("no read access to the other cluster's mirror state: treated as no reverse mirror state", "topic", cfg.Topic)
		return &Store{cl: cl, cfg: cfg, log: cfg.Logger, readOnly: true, v: newStoreView(), records: map[string]StateRecord{}, applied: map[string]uint64{},
			offsets: map[string]int64{}, next: map[int32]int64{}}, nil
	}
	return s, err
}

// checkStoreProducer refuses client settings under which an acknowledged write
// could be lost, reordered, or sent elsewhere.
func checkStoreProducer(cl *kgo.Client) error {
	if acks, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); ok && acks != kgo.AllISRAcks() {
		return errors.New("the client must produce with acks=all (kgo.RequiredAcks(kgo.AllISRAcks())): an acknowledged state write must survive a broker loss")
	}
	if id, _ := cl.OptValue(kgo.TransactionalID).(string); id != "" {
		return fmt.Errorf("the client has transactional id %q; the store writes outside transactions and needs a non-transactional client", id)
	}
	if always, _ := cl.OptValue(kgo.DefaultProduceTopicAlways).(bool); always {
		return errors.New("the client has DefaultProduceTopicAlways, which would send state records to another topic")
	}
	if noIdem, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); noIdem {
		if n, ok := cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker).(int); ok && n != 1 {
			return errors.New("the client disables idempotent writes with more than one produce request in flight: retries could reorder state records")
		}
	}
	return nil
}

// ensureStoreTopic creates the store topic if it does not exist and checks that
// an existing one is compacted.
func ensureStoreTopic(ctx context.Context, cl *kgo.Client, cfg StoreConfig) error {
	var exists bool
	err := storeRetry(ctx, cfg.Logger, "describe "+cfg.Topic, func() error {
		var err error
		_, _, exists, err = describeStoreTopic(ctx, cl, cfg.Topic, false)
		return err
	})
	if err != nil {
		return fmt.Errorf("mirror state store %s: %w", cfg.Topic, err)
	}
	adm := kadm.NewClient(cl)
	if !exists {
		configs := map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}
		switch {
		case cfg.ReplicationFactor == 0 && cfg.Replication != nil:
			meta, err := adm.Metadata(ctx)
			if err != nil {
				return fmt.Errorf("mirror state store: counting the destination's brokers: %w", err)
			}
			factor, minInsync := cfg.Replication(len(meta.Brokers))
			cfg.ReplicationFactor = factor
			if minInsync > 0 {
				configs["min.insync.replicas"] = kmsg.StringPtr(strconv.Itoa(minInsync))
			}
		case cfg.ReplicationFactor == 0:
			cfg.ReplicationFactor = -1
		}
		resp, err := adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, configs, cfg.Topic)
		if err == nil {
			err = resp.Err
		}
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Created meanwhile (by an operator or a tool): the
			// policy check below decides whether it is usable.
		case err != nil:
			return fmt.Errorf("mirror state store: creating topic %s (%d partitions, replication factor %d, cleanup.policy=compact): %w",
				cfg.Topic, cfg.Partitions, cfg.ReplicationFactor, err)
		default:
			cfg.Logger.Info("created the mirror state topic", "topic", cfg.Topic, "partitions", cfg.Partitions, "replication_factor", cfg.ReplicationFactor)
			return nil
		}
	}
	var policy string
	err = storeRetry(ctx, cfg.Logger, "describe configs of "+cfg.Topic, func() error {
		rcs, err := adm.DescribeTopicConfigs(ctx, cfg.Topic)
		if err != nil {
			return err
		}
		rc, err := rcs.On(cfg.Topic, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			return err
		}
		policy = "delete" // Kafka's default when the broker reports nothing
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mirror state store %s: %w", cfg.Topic, err)
	}
	if policies := strings.Split(policy, ","); !slices.Contains(policies, "compact") || slices.Contains(policies, "delete") {
		return fmt.Errorf("mirror state store: topic %s has cleanup.policy=%q; it must be \"compact\" alone, or mirror state would expire with retention (alter the topic's config)",
			cfg.Topic, policy)
	}
	return nil
}

// errStoreNotReady marks a transient condition seen in a response without an
// error code (a partition without a leader yet, a topic not yet visible).
var errStoreNotReady = errors.New("not ready")

// describeStoreTopic returns the topic's id and the leader of every partition.
// It never lets the request create the topic. With mustExist, an unknown
// topic is errStoreNotReady (just created, not yet visible everywhere); without,
// it is exists=false.
func describeStoreTopic(ctx context.Context, cl *kgo.Client, topic string, mustExist bool) (id [16]byte, leaders map[int32]int32, exists bool, err error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return id, nil, false, err
	}
	if len(resp.Topics) != 1 {
		return id, nil, false, fmt.Errorf("metadata for %s: %d topics in the response: %w", topic, len(resp.Topics), errStoreNotReady)
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) && !mustExist {
			return id, nil, false, nil
		}
		return id, nil, false, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	if len(t.Partitions) == 0 {
		return id, nil, false, fmt.Errorf("metadata for %s: no partitions yet: %w", topic, errStoreNotReady)
	}
	leaders = make(map[int32]int32, len(t.Partitions))
	for _, p := range t.Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
			return id, nil, false, fmt.Errorf("metadata for %s[%d]: %w", topic, p.Partition, err)
		}
		if p.Leader < 0 {
			return id, nil, false, fmt.Errorf("metadata for %s[%d]: no leader: %w", topic, p.Partition, errStoreNotReady)
		}
		leaders[p.Partition] = p.Leader
	}
	return t.TopicID, leaders, true, nil
}

// Load retries transient failures with a doubling back-off, for at most
// storeLoadAttempts consecutive attempts (about 20 s) or until ctx ends.
const (
	storeLoadAttempts = 25
	storeBackoffMin   = 20 * time.Millisecond
	storeBackoffMax   = time.Second
)

// retriableStoreErr reports whether a load step may succeed if repeated.
func retriableStoreErr(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, errStoreNotReady) || kerr.IsRetriable(err) {
		return true
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return false // a broker error code that retrying cannot fix (authorization, ...)
	}
	// Anything else comes from the connection (dial, EOF, reset): transient,
	// unless the client itself is gone.
	return !errors.Is(err, kgo.ErrClientClosed)
}

// storeRetry runs op until it succeeds or fails for good.
func storeRetry(ctx context.Context, log *slog.Logger, what string, op func() error) error {
	backoff := storeBackoffMin
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			return nil
		}
		if !retriableStoreErr(err) || attempt >= storeLoadAttempts {
			return fmt.Errorf("%s: %w", what, err)
		}
		log.Debug("mirror state store: retrying", "step", what, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, storeBackoffMax)
	}
}

// storedRecord is the last record of a key in one partition.
type storedRecord struct {
	value     []byte // nil: tombstone
	partition int32
	offset    int64
	timestamp time.Time
}

// loadStore reads the whole topic and builds a Store. mustExist is false only
// for ReadStore, where a missing topic is an empty store.
func loadStore(ctx context.Context, cl *kgo.Client, cfg StoreConfig, mustExist bool, mode secretMode) (*Store, error) {
	// Only OpenStore's store (whose topic must exist) is writable.
	s := &Store{cl: cl, cfg: cfg, log: cfg.Logger, readOnly: !mustExist, v: newStoreView(), records: map[string]StateRecord{}, applied: map[string]uint64{},
		offsets: map[string]int64{}, next: map[int32]int64{}}
	var (
		id      [16]byte
		leaders map[int32]int32
		exists  bool
	)
	err := storeRetry(ctx, s.log, "describe "+cfg.Topic, func() error {
		var err error
		id, leaders, exists, err = describeStoreTopic(ctx, cl, cfg.Topic, mustExist)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mirror state store %s: %w", cfg.Topic, err)
	}
	if !exists {
		return s, nil
	}
	starts, ends, err := listStoreOffsets(ctx, cl, cfg.Topic, s.log)
	if err != nil {
		return nil, fmt.Errorf("mirror state store %s: %w", cfg.Topic, err)
	}

	// Partitions are read concurrently (a few at a time: the KIP's 50
	// partitions would otherwise cost 50 sequential round trips at start),
	// each into its own key → last-record map.
	parts := slices.Sorted(maps.Keys(leaders))
	for _, p := range parts {
		if _, ok := starts[p]; !ok {
			return nil, fmt.Errorf("mirror state store %s: no start offset listed for partition %d", cfg.Topic, p)
		}
		if _, ok := ends[p]; !ok {
			return nil, fmt.Errorf("mirror state store %s: no end offset listed for partition %d", cfg.Topic, p)
		}
	}
	perPart := make([]map[string]storedRecord, len(parts))
	errs := make([]error, len(parts))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, p := range parts {
		start, end := starts[p], ends[p]
		if start >= end {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			perPart[i], errs[i] = readStorePartition(ctx, cl, cfg.Topic, id, p, leaders[p], start, end, s.log)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mirror state store %s: %w", cfg.Topic, err)
	}

	latest := mergeStorePartitions(parts, perPart, s.log)
	for p, end := range ends {
		s.next[p] = end
	}
	for key, rec := range latest {
		s.offsets[key] = rec.offset
	}
	var (
		bad     []error // values that do not decode, by key
		keyErrs []error // secrets the configured key did not open
		opened  bool    // whether it opened any
	)
	for _, key := range slices.Sorted(maps.Keys(latest)) {
		rec := latest[key]
		k, err := ParseKey(key)
		if err != nil {
			// A newer kafkamirror's record kind, or a stray write: not
			// ours to interpret, and not a reason to refuse to start.
			s.log.Warn("mirror state store: skipping a record with an unknown key", "topic", cfg.Topic, "key", key, "reason", err)
			continue
		}
		if rec.value == nil {
			continue // a tombstone that compaction has not removed yet
		}
		sr := newStateRecord(k, rec.value, rec.partition, rec.offset)
		val, err := decodeEntry(k, key, rec.value, cfg.Sealer, mode)
		if err != nil {
			sr.Problem = err.Error()
			bad = append(bad, err)
			if errors.Is(err, ErrNoSecretKey) || errors.Is(err, ErrSecretKeyMismatch) {
				keyErrs = append(keyErrs, err)
			}
		} else {
			s.v.apply(k, val)
			if m, ok := val.(MirrorRecord); ok && m.hasSecret() {
				opened = true
			}
		}
		s.records[key] = sr
	}
	// A secret that no configured key opens is the worker's configuration, not one bad
	// record: treating every such mirror as broken would invite an operator to remove them.
	// Only when the key opened another secret is a failure that record's corruption.
	if len(keyErrs) > 0 && !opened {
		return nil, fmt.Errorf("mirror state store %s: %w", cfg.Topic, errors.Join(keyErrs...))
	}
	if s.readOnly && len(bad) > 0 {
		// Another cluster's state decides whether a topic is still mirrored from here; a
		// guess could let two mirrors write one topic, so its reader takes all or nothing.
		return nil, fmt.Errorf("mirror state store %s: %w", cfg.Topic, errors.Join(bad...))
	}
	for _, r := range s.BadRecords() {
		s.log.Warn("mirror state store: a record cannot be read; what it describes waits for the operator (kafkamirror-worker state bad-records)",
			"topic", cfg.Topic, "key", r.Key, "partition", r.StatePartition, "offset", r.Offset, "reason", r.Problem)
	}
	return s, nil
}

// listStoreOffsets returns every partition's log start and end (high watermark).
func listStoreOffsets(ctx context.Context, cl *kgo.Client, topic string, log *slog.Logger) (starts, ends map[int32]int64, err error) {
	adm := kadm.NewClient(cl)
	list := func(fn func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		var out map[int32]int64
		err := storeRetry(ctx, log, "list offsets of "+topic, func() error {
			lo, err := fn(ctx, topic)
			if err == nil {
				err = lo.Error()
			}
			if err != nil {
				return err
			}
			out = map[int32]int64{}
			for p, o := range lo[topic] {
				out[p] = o.Offset
			}
			return nil
		})
		return out, err
	}
	if starts, err = list(adm.ListStartOffsets); err != nil {
		return nil, nil, err
	}
	if ends, err = list(adm.ListEndOffsets); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}

// Fetch sizes: the store is small; these only bound one response.
const (
	storeFetchMaxBytes = 16 << 20
	storeFetchMaxWait  = 100 // ms; data below the end offset is there already
)

// readStorePartition reads one partition from start up to end and returns the
// last record of every key in it.
func readStorePartition(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, partition, leader int32, start, end int64, log *slog.Logger) (map[string]storedRecord, error) {
	out := map[string]storedRecord{}
	next := start
	decompressor := kgo.DefaultDecompressor()
	step := func() error {
		for next < end {
			rp, throttled, err := fetchStorePartition(ctx, cl, topic, id, partition, leader, next)
			if err != nil {
				return err
			}
			fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         next,
				IsolationLevel: kgo.ReadUncommitted(), // store writes are never transactional
				Topic:          topic,
				Partition:      partition,
			}, rp, decompressor, nil)
			if fp.Err != nil {
				if errors.Is(fp.Err, kerr.OffsetOutOfRange) && rp.LogStartOffset > next {
					// Records were deleted below the log start (DeleteRecords
					// on the store topic): nothing is there to read.
					log.Warn("mirror state store: partition starts past the offset being read; records below it were deleted",
						"topic", topic, "partition", partition, "offset", next, "log_start", rp.LogStartOffset)
					next = rp.LogStartOffset
					continue
				}
				return fmt.Errorf("fetch %s[%d] at offset %d: %w", topic, partition, next, fp.Err)
			}
			for _, r := range fp.Records {
				if r.Key == nil {
					log.Warn("mirror state store: skipping a record without a key", "topic", topic, "partition", partition, "offset", r.Offset)
					continue
				}
				out[string(r.Key)] = storedRecord{value: r.Value, partition: partition, offset: r.Offset, timestamp: r.Timestamp}
			}
			switch {
			case after > next:
				next = after
			case throttled:
				return fmt.Errorf("fetch %s[%d]: throttled: %w", topic, partition, errStoreNotReady)
			case rp.HighWatermark <= next:
				// This leader has not caught up with the end listed
				// earlier (a leader change): ask again.
				return fmt.Errorf("fetch %s[%d]: high watermark %d not past offset %d yet: %w", topic, partition, rp.HighWatermark, next, errStoreNotReady)
			case len(rp.RecordBatches) == 0:
				// The leader has nothing readable between next and
				// its high watermark: compaction removed the rest.
				next = end
			default:
				return fmt.Errorf("fetch %s[%d] at offset %d: no complete record batch in %d bytes: %w", topic, partition, next, len(rp.RecordBatches), errStoreNotReady)
			}
		}
		return nil
	}
	err := storeRetry(ctx, log, fmt.Sprintf("read %s[%d]", topic, partition), func() error {
		err := step()
		if err != nil {
			// The leader may have moved: look again before the retry.
			if _, leaders, _, merr := describeStoreTopic(ctx, cl, topic, true); merr == nil {
				if l, ok := leaders[partition]; ok {
					leader = l
				}
			}
		}
		return err
	})
	return out, err
}

// fetchStorePartition sends one single-partition Fetch to the leader. One partition
// per request keeps "no records" meaningful: in a multi-partition response
// a partition can come back empty only because the response was full.
func fetchStorePartition(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, partition, leader int32, offset int64) (rp *kmsg.FetchResponseTopicPartition, throttled bool, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = storeFetchMaxWait
	req.MinBytes = 1
	req.MaxBytes = storeFetchMaxBytes
	req.IsolationLevel = 0
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id // the version decides which one is sent
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition = partition
	p.FetchOffset = offset
	p.PartitionMaxBytes = storeFetchMaxBytes
	p.CurrentLeaderEpoch = -1
	p.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, p)
	req.Topics = append(req.Topics, rt)

	kresp, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, false, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, false, err
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].Partition == partition {
				return &resp.Topics[i].Partitions[j], resp.ThrottleMillis > 0, nil
			}
		}
	}
	if resp.ThrottleMillis > 0 {
		return nil, true, fmt.Errorf("fetch %s[%d]: throttled: %w", topic, partition, errStoreNotReady)
	}
	return nil, false, fmt.Errorf("fetch %s[%d]: partition missing from the response: %w", topic, partition, errStoreNotReady)
}

// mergeStorePartitions picks each key's winning record. Within a partition the
// later offset wins (readStorePartition already kept only the last). A key found
// in several partitions can only come from a changed partition count or a
// client whose partitioner does not hash keys; their relative order is then
// unknown, so the newest record timestamp wins (the single writer's clock)
// and a warning says so.
func mergeStorePartitions(parts []int32, perPart []map[string]storedRecord, log *slog.Logger) map[string]storedRecord {
	latest := map[string]storedRecord{}
	var split []string
	for i := range parts {
		for key, rec := range perPart[i] {
			cur, ok := latest[key]
			if !ok {
				latest[key] = rec
				continue
			}
			split = append(split, key)
			if rec.timestamp.After(cur.timestamp) {
				latest[key] = rec
			}
		}
	}
	slices.Sort(split)
	for _, key := range slices.Compact(split) {
		log.Warn("mirror state store: a key has records in more than one partition (partition count changed, or a non-hashing partitioner); the newest by timestamp wins",
			"key", key, "chosen_partition", latest[key].partition)
	}
	return latest
}

// ---- reads ----

// Mirrors returns every mirror, sorted by name.
func (s *Store) Mirrors() []MirrorRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]MirrorRecord, 0, len(s.v.mirrors))
	for _, m := range s.v.mirrors {
		out = append(out, m.clone())
	}
	slices.SortFunc(out, func(a, b MirrorRecord) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Mirror returns the named mirror.
func (s *Store) Mirror(name string) (MirrorRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.v.mirrors[name]
	return m.clone(), ok
}

// TopicConfigs returns a copy of every topic config, by topic.
func (s *Store) TopicConfigs() map[string]TopicConfigRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.v.topicConfigs)
}

// TopicConfig returns the config of topic.
func (s *Store) TopicConfig(topic string) (TopicConfigRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.v.topicConfigs[topic]
	return r, ok
}

// Partition returns one partition's record.
func (s *Store) Partition(mirror, topic string, partition int32) (PartitionRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.v.partitions[storeMirrorTopic{mirror, topic}][partition]
	return r, ok
}

// Partitions returns a copy of the partition records of a mirrored topic,
// by partition; an empty (non-nil) map when there are none.
func (s *Store) Partitions(mirror, topic string) map[int32]PartitionRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := maps.Clone(s.v.partitions[storeMirrorTopic{mirror, topic}])
	if out == nil {
		out = map[int32]PartitionRecord{}
	}
	return out
}

// LastMirror returns one partition's last-mirror record.
func (s *Store) LastMirror(mirror, topic string, partition int32) (LastMirrorRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.v.lastMirrors[topic][mirror][partition]
	return r, ok
}

// StateRecord is one key of __mirror_state as stored, for an operator's inspection and
// repair.
type StateRecord struct {
	Key string
	// Kind is the key's first part: "mirror", "topicconfig", "partition" or "lastmirror".
	// Mirror, Topic and Partition are its other parts: "" or -1 where the kind has none.
	Kind      string
	Mirror    string
	Topic     string
	Partition int32
	// Value is the stored value (never a tombstone: a deleted key has no record).
	Value []byte
	// StatePartition and Offset locate the record in the store topic.
	StatePartition int32
	Offset         int64
	// Problem is why the value does not decode; "" for a record of the view.
	Problem string
}

// kindName is a kind's name, as in its keys.
func KindName(k Kind) string {
	name, _, _ := strings.Cut(RecordKey{Kind: k}.String(), "/")
	return name
}

func newStateRecord(k RecordKey, value []byte, partition int32, offset int64) StateRecord {
	r := StateRecord{Key: k.String(), Kind: KindName(k.Kind), Mirror: k.Mirror, Topic: k.Topic, Partition: -1, Value: value, StatePartition: partition, Offset: offset}
	if k.Kind == KindPartition || k.Kind == KindLastMirror {
		r.Partition = k.Partition
	}
	return r
}

func (r StateRecord) clone() StateRecord {
	r.Value = slices.Clone(r.Value)
	return r
}

// hasSecret reports whether the mirror has a secret field, which the store keeps sealed.
func (m MirrorRecord) hasSecret() bool {
	return m.Source.SASL != nil && m.Source.SASL.Password != "" || m.Source.TLS != nil && m.Source.TLS.ClientKeyPEM != ""
}

// BadRecords returns the records whose value does not decode, sorted by key.
func (s *Store) BadRecords() []StateRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []StateRecord
	for _, r := range s.records {
		if r.Problem != "" {
			out = append(out, r.clone())
		}
	}
	slices.SortFunc(out, func(a, b StateRecord) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// Record returns the record stored under key, readable or not.
func (s *Store) Record(key string) (StateRecord, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.records[key]
	return r.clone(), ok
}

// Topic is the store's topic on the destination.
func (s *Store) Topic() string { return s.cfg.Topic }

// Ping asks the destination for the store topic's offsets: whether it answers
// for the store now.
func (s *Store) Ping(ctx context.Context) error {
	_, _, err := listStoreOffsets(ctx, s.cl, s.cfg.Topic, s.log)
	return err
}

// ---- writes ----

// pendingWrite is one record to produce and the view change it makes once acknowledged.
type pendingWrite struct {
	key   RecordKey
	value []byte     // nil: tombstone
	entry storeEntry // the decoded value, nil for a tombstone
}

// PutMirror stores a mirror definition under its name. Secrets are sealed
// before writing (an error naming KAFKAMIRROR_SECRET_KEY without a Sealer);
// the view keeps them plain.
func (s *Store) PutMirror(ctx context.Context, m MirrorRecord) error {
	k := RecordKey{Kind: KindMirror, Mirror: m.Name}
	if err := k.validate(); err != nil {
		return fmt.Errorf("put mirror: %w", err)
	}
	value, err := encodeMirror(m, s.cfg.Sealer)
	if err != nil {
		return fmt.Errorf("put mirror: %w", err)
	}
	return s.put(ctx, k, value)
}

// DeleteMirror writes the mirror's tombstone. Its topic configs, partition
// and last-mirror records are left alone: the engine decides what else a
// deletion removes.
func (s *Store) DeleteMirror(ctx context.Context, name string) error {
	return s.del(ctx, RecordKey{Kind: KindMirror, Mirror: name})
}

// PutTopicConfig stores a topic's mirror config. r.MirrorName must not be
// empty (delete the record instead).
func (s *Store) PutTopicConfig(ctx context.Context, topic string, r TopicConfigRecord) error {
	k := RecordKey{Kind: KindTopicConfig, Topic: topic}
	if err := k.validate(); err != nil {
		return fmt.Errorf("put topic config: %w", err)
	}
	value, err := encodeTopicConfig(r)
	if err != nil {
		return fmt.Errorf("put topic config of %q: %w", topic, err)
	}
	return s.put(ctx, k, value)
}

// DeleteTopicConfig writes the topic config's tombstone.
func (s *Store) DeleteTopicConfig(ctx context.Context, topic string) error {
	return s.del(ctx, RecordKey{Kind: KindTopicConfig, Topic: topic})
}

// PutPartition stores a partition's state.
func (s *Store) PutPartition(ctx context.Context, mirror, topic string, partition int32, r PartitionRecord) error {
	k := RecordKey{Kind: KindPartition, Mirror: mirror, Topic: topic, Partition: partition}
	if err := k.validate(); err != nil {
		return fmt.Errorf("put partition state: %w", err)
	}
	value, err := encodePartition(r)
	if err != nil {
		return fmt.Errorf("put partition state of %s: %w", k, err)
	}
	return s.put(ctx, k, value)
}

// DeletePartitions writes tombstones for every partition record of the
// mirror's topic, bad ones included, in one round of requests.
func (s *Store) DeletePartitions(ctx context.Context, mirror, topic string) error {
	s.mu.RLock()
	var ws []pendingWrite
	for _, r := range s.records {
		if r.Kind == KindName(KindPartition) && r.Mirror == mirror && r.Topic == topic {
			ws = append(ws, pendingWrite{key: RecordKey{Kind: KindPartition, Mirror: mirror, Topic: topic, Partition: r.Partition}})
		}
	}
	s.mu.RUnlock()
	return s.write(ctx, ws)
}

// DeleteKey writes the tombstone of a stored key, whatever its value.
func (s *Store) DeleteKey(ctx context.Context, key string) error {
	k, err := ParseKey(key)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	return s.del(ctx, k)
}

// PutLastMirror stores a partition's last-mirror record (at STOPPING).
func (s *Store) PutLastMirror(ctx context.Context, mirror, topic string, partition int32, r LastMirrorRecord) error {
	k := RecordKey{Kind: KindLastMirror, Mirror: mirror, Topic: topic, Partition: partition}
	if err := k.validate(); err != nil {
		return fmt.Errorf("put last mirror: %w", err)
	}
	value, err := encodeLastMirror(r)
	if err != nil {
		return fmt.Errorf("put last mirror of %s: %w", k, err)
	}
	return s.put(ctx, k, value)
}

// put decodes the encoded value before writing it, so the view receives
// exactly what a reload would produce (UTC times, nil-or-empty lists, opened
// secrets), and a value that would not load is never written.
func (s *Store) put(ctx context.Context, k RecordKey, value []byte) error {
	key := k.String()
	entry, err := decodeEntry(k, key, value, s.cfg.Sealer, openSecrets)
	if err != nil {
		return fmt.Errorf("%s does not decode back (a bug): %w", key, err)
	}
	return s.write(ctx, []pendingWrite{{key: k, value: value, entry: entry}})
}

func (s *Store) del(ctx context.Context, k RecordKey) error {
	if err := k.validate(); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	// A tombstone is written even when the view has no such key: it is
	// harmless, and it orders correctly after a concurrent put still in
	// flight, which skipping the write would not.
	return s.write(ctx, []pendingWrite{{key: k}})
}

// write produces ws (all handed to the client before any is awaited, so a
// batch costs one round trip) and applies each acknowledged one to the view.
// A write that fails is not applied; it may or may not have reached the
// log, so the caller retries it (every write is idempotent: it sets a value).
// When ctx ends before the acknowledgements, write returns
// errWriteUnacknowledged at once and applies them when they come.
func (s *Store) write(ctx context.Context, ws []pendingWrite) error {
	if s.readOnly {
		return ErrReadOnlyStore
	}
	if err := lease.Err(ctx); err != nil {
		return err // a partition's state is recorded only by its owner
	}
	if len(ws) == 0 {
		return nil
	}
	seqs := make([]uint64, len(ws))
	errs := make([]error, len(ws))
	written := make([]*kgo.Record, len(ws))
	var wg sync.WaitGroup
	wg.Add(len(ws))
	s.wmu.Lock()
	// The timestamp is taken under wmu too, so timestamps follow write
	// order: the load falls back on them for a key found in two partitions.
	now := time.Now()
	for i, w := range ws {
		s.seq++
		seqs[i] = s.seq
		rec := &kgo.Record{Topic: s.cfg.Topic, Key: []byte(w.key.String()), Value: w.value, Timestamp: now}
		s.cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			errs[i], written[i] = err, r
			wg.Done()
		})
	}
	s.wmu.Unlock()
	// kgo calls every promise, but an idempotent client fails a record that
	// was sent only once the destination answers: that can take an outage.
	// The acknowledgements are applied whenever they come, so the view
	// matches the log even when ctx ends first.
	done := make(chan struct{})
	var failed error
	go func() {
		defer close(done)
		wg.Wait()
		if s.testHookAcked != nil {
			s.testHookAcked(seqs)
		}
		failed = s.apply(ws, seqs, errs, written)
	}()
	select {
	case <-done:
		return failed
	case <-ctx.Done():
		select {
		case <-done:
			return failed
		default:
		}
		return fmt.Errorf("%w: %v", ErrWriteUnacknowledged, ctx.Err())
	}
}

// errWriteUnacknowledged: a write was not acknowledged before its context
// ended. It may still be appended, and is then applied to the view.
var ErrWriteUnacknowledged = errors.New("not acknowledged by the destination in time")

// apply applies the acknowledged writes of ws to the view and returns the
// failures.
func (s *Store) apply(ws []pendingWrite, seqs []uint64, errs []error, written []*kgo.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var failed []error
	for i, w := range ws {
		key := w.key.String()
		if errs[i] != nil {
			failed = append(failed, fmt.Errorf("writing %s to %s: %w", key, s.cfg.Topic, errs[i]))
			continue
		}
		if seqs[i] < s.applied[key] {
			continue // a later write of this key was acknowledged first
		}
		if written[i].Offset < s.offsets[key] {
			continue // Refresh applied a later write of another worker
		}
		s.applied[key], s.offsets[key] = seqs[i], written[i].Offset
		s.v.apply(w.key, w.entry)
		// A good value, or a tombstone, replaces a bad record of the key.
		if w.value == nil {
			delete(s.records, key)
		} else {
			s.records[key] = newStateRecord(w.key, w.value, written[i].Partition, written[i].Offset)
		}
	}
	return errors.Join(failed...)
}
