// Package datapath copies one source partition to its destination partition, offset for offset:
// the partition session (fetch, write plan, produce, transaction replay, gap markers), the
// per-broker fetchers and produce pipelines it shares with other partitions, and the pure
// write planner that decides what to write.
package datapath

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// PartitionConfig says which partition to mirror and how.
type PartitionConfig struct {
	Mirror    string // the cluster mirror's name; part of the destination transactional ids
	Topic     string
	Partition int32

	// FirstStart requires the destination partition to be empty. Otherwise (a resume after
	// a restart, a pause or a crash) mirroring continues from the destination end offset.
	FirstStart bool

	// SourceClusterID and SourceTopicID (hex), when set, are checked at every session start:
	// a source that changed under the mirror must never be copied on top of the old one.
	SourceClusterID string
	SourceTopicID   string

	// Source, when set, is asked for the source client at every session start: the
	// mirror's connection can change while it runs (a rotated password, other bootstrap
	// servers), and the client given to NewPartitionMirror is then closed.
	Source func() (*kgo.Client, error)

	MaxInFlight int // produce requests in flight for non-transactional data; default 5
	// ProduceRequestsInFlight bounds the produce requests in flight to one destination
	// broker, each carrying batches of many partitions; default 2. The first partition
	// writing to a broker sets it for all.
	ProduceRequestsInFlight int
	FetchMaxBytes           int32         // of one partition in one fetch answer, at most half FetchBufferBytes; default 2 MiB
	FetchBufferBytes        int           // fetched bytes a partition holds ahead of its writes; default DefaultFetchBufferBytes
	TransactionTimeout      time.Duration // of replayed destination transactions; default 15m
	Logger                  *slog.Logger  // default slog.Default()
	Observer                Observer      // default: discards
	// FetchMemory, shared by a worker's partitions, bounds the fetched bytes they hold
	// together; nil: only each partition's FetchBufferBytes. The first partition fetching
	// from a source broker sets it for all.
	FetchMemory *FetchMemory
}

// defaultProduceRequestsInFlight: a broker reads a connection's next request only once it
// has answered the one before (Kafka mutes the connection meanwhile, through acks=all's wait
// for the followers too), so a second request in flight has the broker start on it at once,
// and a third could only wait there with the batches queued when it was sent: with two, the
// next request is built when the broker starts on the one before it, and carries every batch
// queued meanwhile (Apache Kafka 4.4, 8 partitions: 5.7 batches per request with five in
// flight, 7.9 with two).
const defaultProduceRequestsInFlight = 2

// defaultFetchMaxBytes is a partition's part of one fetch answer unless configured: half
// the default fetch-ahead buffer, so a busy partition is fetched again once its writer took
// half of what it holds. Kafka's consumer and replica fetchers read 1 MiB of a partition per
// fetch, but they fetch all of a broker's partitions each time, while a mirror's partition is
// fetched whenever its buffer has room: with 1 MiB parts the answers carried about 2 MB, and
// the source broker spent 1.5–2.5 ms of CPU per MiB mirrored uncompressed (Apache Kafka 4.4,
// 8 partitions; a consumer's fetches 0.6–1.3), with 2 MiB parts 3.3–5.4 MB and 1.1–1.5 ms.
const defaultFetchMaxBytes = DefaultFetchBufferBytes / 2

// DefaultFetchBufferBytes is a partition's fetch-ahead buffer unless configured: enough for
// the next fetches to be in flight while the session writes, small enough that a worker with
// many busy partitions holds at most about partitions × this much of fetched data.
const DefaultFetchBufferBytes = 4 << 20

func (c *PartitionConfig) defaults() {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 5
	}
	if c.ProduceRequestsInFlight <= 0 {
		c.ProduceRequestsInFlight = defaultProduceRequestsInFlight
	}
	if c.FetchMaxBytes <= 0 {
		c.FetchMaxBytes = defaultFetchMaxBytes
	}
	if c.FetchBufferBytes <= 0 {
		c.FetchBufferBytes = DefaultFetchBufferBytes
	}
	if c.TransactionTimeout <= 0 {
		c.TransactionTimeout = 15 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
}

// Progress is a partition's position, for lag and status reports.
type Progress struct {
	SourceLogStart      int64
	SourceHighWatermark int64
	DestinationEnd      int64 // the last mirrored offset + 1: every offset below it is on the destination
}

// Lag is how many source offsets are not on the destination yet.
func (p Progress) Lag() int64 { return max(0, p.SourceHighWatermark-p.DestinationEnd) }

// PartitionMirror keeps one destination partition identical to its source partition.
//
// The destination log is the checkpoint: every session starts from the destination end
// offset and the transactions the destination coordinator reports as ours, so a crash or a
// restart at any point neither loses nor doubles a record.
type PartitionMirror struct {
	cfg PartitionConfig
	src kafkareq.Cluster
	dst kafkareq.Cluster
	log *slog.Logger

	mu       sync.Mutex
	progress Progress
	// ceiling is the running session's destination end with all it has in flight (produces,
	// a marker being written), -1 between sessions; ceilingSince is when the session read
	// the destination end it started from. A destination end read since then and past the
	// ceiling was written by someone else.
	ceiling      int64
	ceilingSince time.Time

	fillerRecords int // records in a full-size filler batch that fits the destination

	// lastEpoch is the source leader epoch of the newest batch sent to the destination, -1 if
	// unknown: every session checks that the source log of that epoch still reaches the
	// destination end. A batch sent whose answer was lost may or may not have landed; the
	// check holds either way, since the source's epochs only grow with its offsets.
	lastEpoch atomic.Int32

	// draining asks Run to return at the next point where no replayed transaction is open.
	draining atomic.Bool

	markersRefused atomic.Bool // a session fell back to the gap writers (logged once)
}

// errDrained ends a session that reached a point with no replayed transaction open while
// draining.
var errDrained = errors.New("no replayed transaction open")

// Drain asks Run to return nil as soon as no replayed transaction is open on the
// destination: a paused partition must not hold one open, since the destination's
// coordinator aborts it after its timeout, at an offset the source uses otherwise.
func (m *PartitionMirror) Drain() { m.draining.Store(true) }

// NewPartitionMirror returns a mirror of cfg's partition from source to destination.
func NewPartitionMirror(source, destination *kgo.Client, cfg PartitionConfig) *PartitionMirror {
	cfg.defaults()
	m := &PartitionMirror{
		cfg: cfg,
		src: kafkareq.NewCluster("source", source),
		dst: kafkareq.NewCluster("destination", destination),
		log: cfg.Logger.With("mirror", cfg.Mirror, "topic", cfg.Topic, "partition", cfg.Partition),
	}
	m.ceiling = -1
	m.lastEpoch.Store(-1)
	return m
}

// LastMirroredEpoch is the source leader epoch of the newest batch sent to the destination
// (the last batch copied once its answer came, as at a drain), -1 if unknown.
func (m *PartitionMirror) LastMirroredEpoch() int32 { return m.lastEpoch.Load() }

// SetLastMirroredEpoch hands a new mirror of the partition the source leader epoch of the
// last batch an earlier one copied, so its first session checks the source's lineage.
func (m *PartitionMirror) SetLastMirroredEpoch(epoch int32) { m.lastEpoch.Store(epoch) }

// Progress returns the latest known position.
func (m *PartitionMirror) Progress() Progress {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.progress
}

func (m *PartitionMirror) setProgress(fn func(*Progress)) {
	m.mu.Lock()
	fn(&m.progress)
	m.mu.Unlock()
}

// mayReach raises the destination end the running session may have reached to end.
func (m *PartitionMirror) mayReach(end int64) {
	m.mu.Lock()
	m.ceiling = max(m.ceiling, end)
	m.mu.Unlock()
}

// CheckDestinationEnd returns a *ForeignWriteError when end, the destination partition's end
// offset read by a request sent at asked, is past everything the running session wrote or
// has in flight. A read from before the session started proves nothing.
func (m *PartitionMirror) CheckDestinationEnd(end int64, asked time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ceiling < 0 || asked.Before(m.ceilingSince) || end <= m.ceiling {
		return nil
	}
	return &mirrorerr.ForeignWriteError{Topic: m.cfg.Topic, Partition: m.cfg.Partition, DestinationEnd: end, Mirrored: m.ceiling, SourceHighWatermark: m.progress.SourceHighWatermark}
}

// Run mirrors until ctx is done (returning nil) or a failure that retrying cannot fix, which
// it returns. Transient failures (leader moves, dropped connections, coordinator loads)
// restart the session from the destination's state after a jittered back-off.
func (m *PartitionMirror) Run(ctx context.Context) error {
	backoff := initialBackoff
	for {
		progressed, err := m.session(ctx)
		if ctx.Err() != nil || errors.Is(err, errDrained) {
			return nil
		}
		if mirrorerr.Classify(err) != mirrorerr.SessionRetries {
			err = m.explainMismatch(ctx, err)
			m.log.Error("partition mirror stopped", "error", err)
			return err
		}
		if errors.Is(err, kerr.OutOfOrderSequenceNumber) {
			continue // a reordered pipeline, not a broker in trouble: restart at once
		}
		m.cfg.Observer.SessionFailed(m.cfg.Mirror, m.cfg.Topic, m.cfg.Partition, err)
		var wait time.Duration
		wait, backoff = retryBackoff(backoff, progressed)
		m.log.Warn("partition mirror session failed; retrying", "error", err, "backoff", wait)
		if kafkareq.Sleep(ctx, wait/2+rand.N(wait/2+1)) != nil {
			return nil
		}
	}
}

const (
	initialBackoff = 20 * time.Millisecond
	maxBackoff     = 2 * time.Second
)

// retryBackoff returns the back-off before the next session and the one after that. A
// session that mirrored something failed on a new incident, not on the next attempt of a
// failing series: its back-off starts over.
func retryBackoff(backoff time.Duration, progressed bool) (now, next time.Duration) {
	if progressed {
		backoff = initialBackoff
	}
	return backoff, min(2*backoff, maxBackoff)
}

// session is one run from the destination's state until an error.
type session struct {
	m    *PartitionMirror
	cfg  *PartitionConfig
	src  kafkareq.TopicMeta
	dst  kafkareq.TopicMeta
	next int64 // the next source offset to copy == the destination end offset once in-flight produces land

	dstLogStart int64
	alignTo     int64 // a source log start the destination must move to once it reaches it
	fillerKey   []byte
	dstTopic    kafkareq.DestinationTopic

	txnTimeout time.Duration // of replayed transactions: the configured one, capped by the destination's maximum

	idem recordbatch.Producer
	txns map[int64]*replayTxn // by source producer id
	gaps []*replayTxn         // write lone markers; gaps[i] has suffix gapSuffix(i), nil until used
	// markers is the producer of the partition's WriteTxnMarkers markers, nil until used;
	// markersRefused: the destination refused them, the gap writers write the rest.
	markers        *recordbatch.Producer
	markersRefused bool
	// uncheckedMarkers counts the lone markers written last whose offsets no answer has
	// confirmed yet: the answer to a produce sent after them does, else checkMarkers.
	uncheckedMarkers int64
	pending          []*inflight
	feed             *feed           // the partition's subscription to its source leader's fetcher, from the first copyOnce
	answer           uint64          // the number of the fetched answer the session writes (feed.taking)
	producer         *brokerProducer // the destination leader's pipeline, from the first non-transactional batch
	markerPipe       *markerWriter   // the destination leader's marker pipeline, from the first WriteTxnMarkers markers
}

// txnOpen tells whether a replayed transaction is open on the destination.
func (s *session) txnOpen() bool {
	for _, t := range s.txns {
		if t.open {
			return true
		}
	}
	for _, t := range s.gaps {
		if t != nil && t.open {
			return true
		}
	}
	return false
}

// replayTxn is the destination transactional producer replaying one source producer's
// transactions on this partition.
type replayTxn struct {
	id       string
	producer recordbatch.Producer
	open     bool
}

// inflight is a produced batch whose answer has not been checked yet.
type inflight struct {
	batch    []byte
	answer   uint64 // the number of the fetched answer it comes from (feed.taking)
	expected int64  // the base offset the destination must assign
	end      int64  // offset after the batch
	done     chan produced
}

// session mirrors until an error; progressed tells whether the destination end advanced.
func (m *PartitionMirror) session(ctx context.Context) (progressed bool, err error) {
	s := &session{m: m, cfg: &m.cfg, txns: map[int64]*replayTxn{}, gaps: make([]*replayTxn, gapWriters)}
	defer func() {
		// Never leave produces running into the next session: it reads the destination end.
		for _, p := range s.pending {
			<-p.done
		}
		if s.producer != nil {
			s.producer.release()
		}
		if s.markerPipe != nil {
			s.markerPipe.release()
		}
		if s.feed != nil {
			s.feed.close()
		}
		m.mu.Lock()
		m.ceiling = -1
		m.mu.Unlock()
	}()
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	m.cfg.Observer.SessionStarted(m.cfg.Mirror, m.cfg.Topic, m.cfg.Partition)
	start := s.next
	m.cfg.FirstStart = false
	for err == nil {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case m.draining.Load() && !s.txnOpen():
			if err = s.flush(); err == nil {
				err = errDrained
			}
		default:
			err = s.copyOnce(ctx)
		}
	}
	return m.Progress().DestinationEnd > start, err
}

// begin starts a session from where the destination stands: it checks the source is still
// the mirrored one, adopts the partition's destination producers and open transactions,
// checks the destination still lines up with the source, and sets where copying continues.
func (s *session) begin(ctx context.Context) error {
	m, cfg := s.m, s.cfg
	if cfg.Source != nil {
		cl, err := cfg.Source()
		if err != nil {
			return err
		}
		m.src = kafkareq.NewCluster("source", cl)
	}
	srcTopic, err := topicMetadata.ask(ctx, m.src, cfg.Topic)
	if err != nil {
		return err
	}
	dstTopic, err := topicMetadata.ask(ctx, m.dst, cfg.Topic)
	if err != nil {
		return err
	}
	s.src, s.dst = srcTopic.Of(cfg.Partition), dstTopic.Of(cfg.Partition)
	if err := s.checkSource(ctx); err != nil {
		return err
	}
	if s.src.Partitions != s.dst.Partitions {
		return &mirrorerr.PartitionCountMismatchError{Topic: cfg.Topic, Source: s.src.Partitions, Destination: s.dst.Partitions}
	}
	if int(cfg.Partition) >= s.src.Partitions || cfg.Partition < 0 {
		return fmt.Errorf("%w: partition %d of %q does not exist (%d partitions)", mirrorerr.ErrInvariant, cfg.Partition, cfg.Topic, s.src.Partitions)
	}
	if s.src.Leader < 0 || s.dst.Leader < 0 {
		return kerr.LeaderNotAvailable
	}
	if s.dstTopic, err = topicConfigs.ask(ctx, m.dst, cfg.Topic); err != nil {
		return err
	}
	if s.dstTopic.Compacted {
		s.fillerKey = []byte("kafkamirror-filler")
	}
	// A replayed transaction may not ask for more than the destination allows
	// (INVALID_TRANSACTION_TIMEOUT would stop the partition for good).
	s.txnTimeout = s.cfg.TransactionTimeout
	if max, err := maxTxnTimeouts.ask(ctx, m.dst, s.dst.Leader); err != nil {
		return err
	} else if max > 0 && max < s.txnTimeout {
		s.txnTimeout = max
	}
	// Transactions first: pending markers must land before the end offset means anything.
	producers, err := s.recoverProducers(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	tp := kafkareq.TopicPartition{Topic: cfg.Topic, Partition: cfg.Partition}
	dstOffsets, err := logOffsets.ask(ctx, m.dst, tp)
	if err != nil {
		return err
	}
	dstStart, dstEnd := dstOffsets[0], dstOffsets[1]
	if err := s.checkProducersSettled(ctx, producers); err != nil {
		return err
	}
	if cfg.FirstStart && dstEnd > 0 {
		return &mirrorerr.DestinationNotEmptyError{Topic: cfg.Topic, Partition: cfg.Partition, EndOffset: dstEnd}
	}
	srcOffsets, err := logOffsets.ask(ctx, m.src, tp)
	if err != nil {
		return err
	}
	srcStart, srcEnd := srcOffsets[0], srcOffsets[1]
	if dstEnd > srcEnd {
		return s.aheadOfSource(ctx, dstEnd, srcEnd)
	}
	if lastEpoch := m.lastEpoch.Load(); lastEpoch >= 0 && dstEnd > 0 {
		epochEnd, err := m.src.EpochEnd(ctx, s.src, cfg.Topic, cfg.Partition, lastEpoch)
		if err != nil {
			return err
		}
		if err := checkLineage(lastEpoch, epochEnd, dstEnd); err != nil {
			return err
		}
	}
	if dstEnd > max(dstStart, srcStart) {
		if err := s.checkLastEntry(ctx, dstEnd-1); err != nil {
			return err
		}
	}
	s.next, s.dstLogStart = dstEnd, dstStart
	if dstEnd < srcStart {
		// Known now: the first fetch need not be refused first.
		s.alignToLogStart(srcStart)
	}
	m.setProgress(func(p *Progress) {
		*p = Progress{SourceLogStart: srcStart, SourceHighWatermark: srcEnd, DestinationEnd: dstEnd}
		m.ceiling, m.ceilingSince = dstEnd, began
	})
	m.log.Debug("partition mirror session started", "destination_end", dstEnd, "source_log_start", srcStart, "source_high_watermark", srcEnd)
	return nil
}

func (s *session) checkSource(ctx context.Context) error {
	// The cluster first: another cluster at the address also has other topic ids.
	if want := s.cfg.SourceClusterID; want != "" {
		got, err := clusterIDs.ask(ctx, s.m.src, struct{}{})
		if err != nil {
			return err
		}
		if got != want {
			return &mirrorerr.SourceChangedError{What: "cluster id", Expected: want, Actual: got}
		}
	}
	if want := s.cfg.SourceTopicID; want != "" {
		if got := hex.EncodeToString(s.src.ID[:]); got != want {
			return &mirrorerr.SourceChangedError{What: "topic id of " + s.cfg.Topic, Expected: want, Actual: got}
		}
	}
	return nil
}

// TxnIDPrefix starts every destination transactional id the data path uses.
const TxnIDPrefix = "kafkamirror."

// PartitionTxnPrefix starts every destination transactional id of one mirrored partition:
// its replayed transactions (…<source pid>) and its lone markers (…gap).
func PartitionTxnPrefix(mirror, topic string, partition int32) string {
	return fmt.Sprintf("%s%s.%s.%d.", TxnIDPrefix, mirror, topic, partition)
}

// txnPrefix is the prefix of every destination transactional id of this partition.
func (s *session) txnPrefix() string {
	return PartitionTxnPrefix(s.cfg.Mirror, s.cfg.Topic, s.cfg.Partition)
}

// The partition's destination transactional ids end in the source producer id of a replayed
// transaction, in markerTxnSuffix (the producer id of WriteTxnMarkers markers), in
// gapTxnSuffix (lone markers through transactions; "gap", "gap.1", … "gap.7": see
// gapWriters) or in dataTxnSuffix (plain data).
const (
	gapTxnSuffix  = "gap"
	dataTxnSuffix = "data"
)

// gapWriters is how many transactional ids write the abort markers of one run of source
// offsets without a record at once. The markers of such a run are all alike, so it does not
// matter which one lands at which offset; a heavily compacted topic has long runs.
const gapWriters = 8

// gapSuffix is the suffix of gap writer i's transactional id.
func gapSuffix(i int) string {
	if i == 0 {
		return gapTxnSuffix
	}
	return gapTxnSuffix + "." + strconv.Itoa(i)
}

// gapIndex is the gap writer of a transactional id suffix, or -1.
func gapIndex(suffix string) int {
	for i := range gapWriters {
		if suffix == gapSuffix(i) {
			return i
		}
	}
	return -1
}

// recoverProducers adopts the destination producers an earlier session left — of this
// worker or of one that died — and returns the destination partition's producer state it
// read. An open replayed transaction continues (re-initializing its id would abort it and
// write a marker the source does not have). Plain data is written non-transactionally under
// the producer id of the partition's data transactional id. While the destination partition
// knows that producer, every session continues its epoch and sequence, so a batch an earlier
// session sent without an answer (a timeout, a dropped connection, a killed worker) is
// deduplicated against the same batch sent again, or rejected as out of sequence, whenever
// it lands — never appended twice (ProducerStateManager). Otherwise the session bumps its
// epoch (InitProducerId), and the partition rejects the old epoch once the new one landed.
func (s *session) recoverProducers(ctx context.Context) (map[int64]kadm.DescribedProducer, error) {
	s.idem = recordbatch.Producer{ID: -1}
	described, err := partitionTxns.ask(ctx, s.m.dst, s.txnPrefix())
	if err != nil || len(described) == 0 {
		return nil, err
	}
	producers, err := s.describeProducers(ctx)
	if err != nil {
		return nil, err
	}
	bumps, err := epochBumps.ask(ctx, s.m.dst, struct{}{})
	if err != nil {
		return nil, err
	}
	prefix := s.txnPrefix()
	for _, d := range described {
		if d.Err != nil {
			return nil, mirrorerr.WrapAuth("destination", "describe transaction "+d.TxnID, d.Err)
		}
		switch d.State {
		case "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
			return nil, fmt.Errorf("transaction %s is completing (%s): %w", d.TxnID, d.State, kerr.ConcurrentTransactions)
		case "Dead":
			continue
		}
		t := &replayTxn{id: d.TxnID, producer: recordbatch.Producer{ID: d.ProducerID, Epoch: d.ProducerEpoch}}
		if _, ok := d.Topics[s.cfg.Topic][s.cfg.Partition]; ok && d.State == "Ongoing" {
			t.open = true
		}
		p, known := producers[d.ProducerID]
		known = known && p.ProducerEpoch == d.ProducerEpoch
		switch suffix := strings.TrimPrefix(d.TxnID, prefix); {
		case suffix == markerTxnSuffix:
			continue // never in a transaction; each session initializes it anew
		case gapIndex(suffix) >= 0:
			s.gaps[gapIndex(suffix)] = t
		case suffix == dataTxnSuffix:
			// The data producer never ends a transaction: its sequence continues where
			// the partition has it.
			if known {
				s.idem = t.producer
				s.idem.Sequence = nextSequence(p.LastSequence, 1)
			}
			continue
		default:
			pid, err := strconv.ParseInt(suffix, 10, 64)
			if err != nil {
				continue // not one of ours after all (a topic name sharing the prefix)
			}
			s.txns[pid] = t
		}
		if known && (p.CurrentTxnStartOffset >= 0 || !bumps) {
			// The producer's sequence continues, unless its epoch was bumped at the last
			// EndTxn (KIP-890) and it has written nothing on this partition since.
			t.producer.Sequence = nextSequence(p.LastSequence, 1)
		}
	}
	return producers, nil
}

// describeProducers returns the producers the destination partition knows, read after the
// call.
func (s *session) describeProducers(ctx context.Context) (map[int64]kadm.DescribedProducer, error) {
	described, err := producers.ask(ctx, s.m.dst, kafkareq.TopicPartition{Topic: s.cfg.Topic, Partition: s.cfg.Partition})
	if err != nil {
		return nil, err
	}
	byID := map[int64]kadm.DescribedProducer{}
	for _, p := range described {
		byID[p.ProducerID] = p
	}
	return byID, nil
}

// errProducersMoved: a batch an earlier session sent landed between reading the producers'
// sequences and the destination end, so the two do not describe the same log.
var errProducersMoved = fmt.Errorf("a batch of an earlier session landed while the session started: %w", kerr.OutOfOrderSequenceNumber)

// checkProducersSettled reads the producer state again after the destination end: only if
// nothing moved do the adopted sequences continue exactly at that end.
func (s *session) checkProducersSettled(ctx context.Context, before map[int64]kadm.DescribedProducer) error {
	if before == nil {
		return nil
	}
	after, err := s.describeProducers(ctx)
	if err != nil {
		return err
	}
	for id, a := range after {
		if b, ok := before[id]; !ok || b.ProducerEpoch != a.ProducerEpoch || b.LastSequence != a.LastSequence {
			return errProducersMoved
		}
	}
	return nil
}

// copyOnce copies what one fetch returns: the planner decides, the session writes.
func (s *session) copyOnce(ctx context.Context) error {
	m, cfg := s.m, s.cfg
	offset := max(s.next, s.alignTo)
	if s.feed == nil {
		s.feed = subscribe(m.src, s.src, cfg, offset)
	}
	if err := s.awaitSource(ctx, offset); err != nil {
		return err
	}
	// The answers whose writes are all answered keep no memory alive any more.
	if len(s.pending) > 0 {
		s.feed.doneWith(s.pending[0].answer)
	} else {
		s.feed.doneWith(math.MaxUint64)
	}
	f, err := s.feed.next(ctx, offset)
	s.answer = s.feed.taking()
	if errors.Is(err, kerr.OffsetOutOfRange) {
		return s.outOfRange(ctx, offset)
	}
	if err != nil {
		return err
	}
	m.setProgress(func(p *Progress) {
		p.SourceHighWatermark, p.SourceLogStart = f.HighWatermark, f.LogStartOffset
	})
	open := map[int64]bool{}
	for pid, t := range s.txns {
		open[pid] = t.open
	}
	continuing, err := s.continuingTxns(ctx, open)
	if err != nil {
		return err
	}
	p := planFetch(planInput{next: s.next, alignTo: s.alignTo, open: open, continuing: continuing, maxSize: s.dstTopic.MaxMessageBytes, fetched: f})
	// Before the writes, whose answers may be lost while they land: the next session checks
	// the lineage with the epoch of the newest batch the destination may hold. An older one
	// ends where the next began, below the landed batches: a truncation that never was.
	// (Read before too since forwarding rewrites a batch's header in place.)
	for _, w := range slices.Backward(p.writes) {
		if w.batch != nil {
			m.lastEpoch.Store(w.batch.LeaderEpoch())
			break
		}
	}
	for _, w := range p.writes {
		if err := s.execute(ctx, w); err != nil {
			return err
		}
	}
	if p.err != nil || p.retry > 0 {
		// What the answer held up to its error or the retry lands first.
		if err := s.flush(); err != nil {
			return err
		}
	}
	if err := s.checkMarkers(ctx); err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	if err := s.moveLogStart(ctx, f.LogStartOffset); err != nil {
		return err
	}
	if p.retry > 0 {
		return kafkareq.Sleep(ctx, p.retry)
	}
	return s.reap()
}

// continuingTxns returns, while the destination must move to a source log start above its
// end with replayed transactions open, the source producers whose transaction is still open
// at the source from below the destination end: their markers were not deleted with the
// offsets below the log start, so their replayed transactions stay open. Nil when that is
// not the case or the source cannot tell (DescribeProducers came in Kafka 2.8).
func (s *session) continuingTxns(ctx context.Context, open map[int64]bool) (map[int64]bool, error) {
	if s.alignTo <= s.next || !slices.Contains(slices.Collect(maps.Values(open)), true) {
		return nil, nil
	}
	if ok, err := s.m.src.Supports(ctx, s.src.Leader, kmsg.DescribeProducers); err != nil || !ok {
		return nil, err
	}
	began, err := s.m.src.OpenTransactions(ctx, s.cfg.Topic, s.cfg.Partition)
	if err != nil {
		return nil, err
	}
	continuing := map[int64]bool{}
	for pid, at := range began {
		continuing[pid] = at < s.next
	}
	return continuing, nil
}

// execute performs one write of a plan.
func (s *session) execute(ctx context.Context, w write) error {
	if w.at != s.next {
		return fmt.Errorf("%w: a %s write planned at offset %d, but the destination end is %d", mirrorerr.ErrInvariant, w.kind, w.at, s.next)
	}
	switch w.kind {
	case writeFiller:
		return s.sendFiller(ctx, w.n)
	case writeGap:
		return s.gapMarkers(ctx, w.n)
	case writeEndTxn:
		return s.endTxn(ctx, s.txns[w.pid], w.commit)
	case writeLoneMarker:
		return s.loneMarker(ctx, w.commit)
	}
	if !w.txn {
		if err := s.initDataProducer(ctx); err != nil {
			return err
		}
		batch, err := s.encode(w, s.idem)
		if err != nil {
			return err
		}
		return s.sendIdempotent(ctx, batch, int32(w.n))
	}
	t, err := s.txn(ctx, w.pid)
	if err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	if !t.open {
		if err := s.m.dst.AddPartitionToTxn(ctx, t.id, t.producer, s.cfg.Topic, s.cfg.Partition); err != nil {
			return err
		}
		t.open = true
	}
	batch, err := s.encode(w, t.producer)
	if err != nil {
		return err
	}
	return s.sendTxn(ctx, t, batch, int32(w.n))
}

// encode returns a forward or run write's batch; a re-encoded run must fit the destination
// as its source batch did.
func (s *session) encode(w write, as recordbatch.Producer) ([]byte, error) {
	batch, err := w.encode(as)
	if limit := s.dstTopic.MaxMessageBytes; err == nil && limit > 0 && len(batch) > limit {
		return nil, &mirrorerr.BatchTooLargeError{Offset: w.at, Size: len(batch), MaxMessageBytes: limit}
	}
	return batch, err
}

// outOfRange handles a fetch below the source log start (retention or DeleteRecords moved
// it past us: align the destination) or above its end (the logs diverged).
func (s *session) outOfRange(ctx context.Context, offset int64) error {
	start, end, err := s.m.src.Offsets(ctx, s.cfg.Topic, s.cfg.Partition)
	if err != nil {
		return err
	}
	switch {
	case offset > end:
		return s.aheadOfSource(ctx, s.next, end)
	case offset < start:
		s.alignToLogStart(start)
		return nil
	}
	// The log holds offset after all: the fetch met a log start or end since moved, as a
	// source leader replaced meanwhile does (a follower's log start follows its leader's only
	// through its own fetches: ReplicaFetcherThread). Not wrapping OFFSET_OUT_OF_RANGE, which
	// would fail the partition: a new session asks again.
	return fmt.Errorf("the fetch of %s[%d] from offset %d was answered OFFSET_OUT_OF_RANGE, but the source log now spans offsets %d to %d", s.cfg.Topic, s.cfg.Partition, offset, start, end)
}

// aheadOfSource explains a destination end past the source high watermark hw: the source's
// log ends below it (the logs diverged), or a source leader elected a moment ago has not
// learnt its predecessor's high watermark yet (kafkareq's HighWatermarkBehind), which the
// session waits for. Once the high watermark is back, the lineage and last-entry checks of
// the session start compare what both hold.
func (s *session) aheadOfSource(ctx context.Context, dstEnd, hw int64) error {
	behind, err := s.m.src.HighWatermarkBehind(ctx, s.src, s.cfg.Topic, s.cfg.Partition, dstEnd, hw)
	if err != nil {
		return err
	}
	if behind != nil {
		return behind
	}
	return &mirrorerr.DestinationAheadError{Topic: s.cfg.Topic, Partition: s.cfg.Partition, DestinationEnd: dstEnd, SourceHighWatermark: hw}
}

// alignToLogStart has the destination move to the source log start, above its end: what lies
// between was deleted at the source before it was mirrored.
func (s *session) alignToLogStart(start int64) {
	if s.next > 0 {
		s.m.log.Warn("source log start moved past the destination end: records were deleted at the source before they were mirrored",
			"destination_end", s.next, "source_log_start", start)
	}
	s.alignTo = start
}

// moveLogStart propagates the source log start to the destination (DeleteRecords), once the
// destination holds the offsets up to it.
func (s *session) moveLogStart(ctx context.Context, srcLogStart int64) error {
	target := max(srcLogStart, s.alignTo)
	if target <= s.dstLogStart || target > s.next {
		return nil
	}
	if err := s.flush(); err != nil { // the destination's high watermark must be at target
		return err
	}
	if err := s.m.dst.DeleteRecords(ctx, s.cfg.Topic, s.cfg.Partition, target); err != nil {
		return err
	}
	s.dstLogStart = target
	if s.alignTo <= target {
		s.alignTo = 0
	}
	return nil
}

// fillerBatchRecords is the size of a full filler batch. The destination broker's cost is
// per record, whatever the batch size (kafka-protocol-notes.md), and requests are
// pipelined; the worker compresses one full batch's records once per process: ~25 ms of
// CPU for 250,000 records, ~90–170 ms for a million (BenchmarkFillerEncoding).
const fillerBatchRecords = 250_000

func (s *session) sendFiller(ctx context.Context, n int64) error {
	if err := s.initDataProducer(ctx); err != nil {
		return err
	}
	for n > 0 {
		batch, err := s.fillerFor(n)
		if err != nil {
			return err
		}
		size := recordbatch.Batch(batch).RecordCount()
		if err := s.sendIdempotent(ctx, batch, size); err != nil {
			return err
		}
		n -= int64(size)
	}
	return nil
}

// fillerFor returns a filler batch for up to n offsets, in the codec the destination topic
// keeps (a recompressed batch is checked against max.message.bytes again) and with as many
// records as its max.message.bytes allows.
func (s *session) fillerFor(n int64) ([]byte, error) {
	m, codec, limit := s.m, s.dstTopic.FillerCodec(), s.dstTopic.MaxMessageBytes
	if m.fillerRecords == 0 {
		m.fillerRecords = fillerBatchRecords
	}
	for {
		size := int(min(n, int64(m.fillerRecords)))
		batch, err := recordbatch.Filler(size, s.fillerKey, codec, time.Now().UnixMilli(), s.idem)
		if err != nil {
			return nil, err
		}
		if limit <= 0 || len(batch) <= limit {
			return batch, nil
		}
		if size == 1 {
			return nil, &mirrorerr.BatchTooLargeError{Offset: s.next, Size: len(batch), MaxMessageBytes: limit}
		}
		// Shrink in proportion, with a margin for compression that does not scale linearly.
		m.fillerRecords = max(1, int(int64(size)*int64(limit)/int64(len(batch))*9/10))
	}
}

// initDataProducer gives the session the producer id of its plain data unless it adopted an
// earlier session's, on its first write of plain data rather than at the start: a partition
// with nothing to copy starts without a round trip to the transaction coordinator, and a
// thousand partitions starting at once do not queue behind one another there.
func (s *session) initDataProducer(ctx context.Context) error {
	if s.idem.ID >= 0 {
		return nil
	}
	id := s.txnPrefix() + dataTxnSuffix
	p, err := s.m.dst.InitProducerID(ctx, &id, int32(s.txnTimeout.Milliseconds()))
	if err != nil {
		return err
	}
	s.idem = p
	return nil
}

// sendIdempotent pipelines a batch produced with the session's idempotent producer id:
// the broker deduplicates and orders by sequence, so several requests may be in flight.
func (s *session) sendIdempotent(ctx context.Context, batch []byte, records int32) error {
	first := s.idem.Sequence == 0
	if err := s.send(ctx, batch, records, nil); err != nil {
		return err
	}
	s.idem.Sequence = nextSequence(s.idem.Sequence, records)
	if first {
		// A broker accepts any sequence as a new producer id's first batch on a partition
		// that has data (KIP-360): a later batch overtaking the first would be appended at
		// the first one's offsets. So the first batch goes alone.
		return s.flush()
	}
	return nil
}

// sendTxn produces a batch inside a replayed transaction and waits for it.
func (s *session) sendTxn(ctx context.Context, t *replayTxn, batch []byte, records int32) error {
	if err := s.send(ctx, batch, records, &t.id); err != nil {
		return err
	}
	t.producer.Sequence = nextSequence(t.producer.Sequence, records)
	return s.flush()
}

func (s *session) send(ctx context.Context, batch []byte, records int32, txnID *string) error {
	if len(s.pending) >= s.cfg.MaxInFlight {
		if err := s.awaitOldest(); err != nil {
			return err
		}
	}
	p := &inflight{batch: batch, answer: s.answer, expected: s.next, end: s.next + int64(records), done: make(chan produced, 1)}
	// Before the batch can land: a describe that reads the destination end past the ceiling
	// fails the partition for a foreign write.
	s.m.mayReach(p.end)
	if txnID == nil {
		if s.producer == nil {
			s.producer = acquireProducer(s.m.dst, s.dst.Leader, s.cfg)
		}
		s.producer.enqueue(ctx, s.cfg.Topic, s.dst.ID, s.cfg.Partition, batch, p.done)
	} else {
		// A replayed transaction's batch names its transactional id in the request, so it
		// goes alone; it is the only one in flight (execute flushes around it).
		go func() {
			began := time.Now()
			base, err := s.m.dst.Produce(ctx, s.dst.Leader, s.cfg.Topic, s.dst.ID, s.cfg.Partition, batch, txnID)
			s.cfg.Observer.ProduceLatency(time.Since(began))
			if err == nil {
				s.cfg.Observer.DestinationProduce(s.dst.Leader, 1, int64(len(batch)))
			}
			p.done <- produced{base, err}
		}()
	}
	s.pending = append(s.pending, p)
	s.next = p.end
	return nil
}

// check maps a batch's answer to the session's errors: the destination must have assigned
// the offset the source has.
func (s *session) check(p *inflight, r produced) error {
	if errors.Is(r.err, kerr.MessageTooLarge) || errors.Is(r.err, kerr.RecordListTooLarge) {
		// Forwarded batches were checked against max.message.bytes: this one grew when the
		// broker recompressed it to the topic's compression.type.
		tooLarge := &mirrorerr.BatchTooLargeError{Offset: p.expected, Size: len(p.batch), MaxMessageBytes: s.dstTopic.MaxMessageBytes}
		if !s.dstTopic.Keeps(recordbatch.Batch(p.batch).Codec()) {
			tooLarge.Compression = s.dstTopic.Compression
		}
		return tooLarge
	}
	if r.err == nil && r.base != p.expected {
		return &mirrorerr.OffsetMismatchError{Topic: s.cfg.Topic, Partition: s.cfg.Partition, Expected: p.expected, Actual: r.base}
	}
	return r.err
}

// awaitSource waits until the feed holds the answer from offset while writes are in flight,
// checking their answers as they come. Writes stay in flight from one fetched answer into the
// next, so the destination is never idle between answers; nor do the next answer's writes
// wait for the last answers of the one before (a stream of small batches, one per answer,
// otherwise waited out a produce round trip at each: fetched to handed over took p90
// 19–63 ms on Apache Kafka 4.4, 0.2–1.4 ms since).
// Progress becomes visible as the answers come.
func (s *session) awaitSource(ctx context.Context, offset int64) error {
	for len(s.pending) > 0 && !s.feed.holds(offset) {
		select {
		case r := <-s.pending[0].done:
			if err := s.settleOldest(r); err != nil {
				return err
			}
		case <-s.feed.arrived():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// awaitOldest waits for the oldest write in flight to be answered, and checks the answer.
func (s *session) awaitOldest() error {
	return s.settleOldest(<-s.pending[0].done)
}

// settleOldest checks r, the answer to the oldest write in flight.
func (s *session) settleOldest(r produced) error {
	p := s.pending[0]
	s.pending[0] = nil // its batch must not keep the answer it came from alive
	s.pending = s.pending[1:]
	// An OUT_OF_ORDER_SEQUENCE_NUMBER (a request overtook its predecessor) ends the session
	// like any other error: the next one starts from the destination's end offset, which is
	// the only position that is certain.
	if err := s.check(p, r); err != nil {
		return err
	}
	s.cfg.Observer.Mirrored(s.cfg.Mirror, s.cfg.Topic, s.cfg.Partition, p.end-p.expected, int64(len(p.batch)))
	s.m.setProgress(func(pr *Progress) { pr.DestinationEnd = p.end })
	s.uncheckedMarkers = 0 // sent after them: its offset confirms theirs
	return nil
}

// reap checks the in-flight produces already answered, oldest first, without waiting: their
// progress becomes visible while later ones are still in flight.
func (s *session) reap() error {
	for len(s.pending) > 0 && len(s.pending[0].done) > 0 {
		if err := s.awaitOldest(); err != nil {
			return err
		}
	}
	return nil
}

// flush waits for every in-flight produce.
func (s *session) flush() error {
	for len(s.pending) > 0 {
		if err := s.awaitOldest(); err != nil {
			return err
		}
	}
	return nil
}

// txn returns the replayed transaction for a source producer id, initializing its
// destination transactional id on first use.
func (s *session) txn(ctx context.Context, srcPID int64) (*replayTxn, error) {
	if t := s.txns[srcPID]; t != nil {
		return t, nil
	}
	t, err := s.initTxn(ctx, s.txnPrefix()+strconv.FormatInt(srcPID, 10))
	if err != nil {
		return nil, err
	}
	s.txns[srcPID] = t
	return t, nil
}

func (s *session) initTxn(ctx context.Context, id string) (*replayTxn, error) {
	p, err := s.m.dst.InitProducerID(ctx, &id, int32(s.txnTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	return &replayTxn{id: id, producer: p}, nil
}

// endTxn commits or aborts a replayed transaction; its marker must land at the destination
// end, exactly where the source has it, so every produce in flight lands first.
func (s *session) endTxn(ctx context.Context, t *replayTxn, commit bool) error {
	if err := s.flush(); err != nil {
		return err
	}
	at := s.next
	s.m.mayReach(at + 1)
	if err := s.finishTxn(ctx, t, commit); err != nil {
		return err
	}
	if err := s.awaitMarker(ctx, at, 1); err != nil {
		return err
	}
	s.mirroredMarkers(1)
	return nil
}

// mirroredMarkers counts n markers written as mirrored offsets: each takes one.
func (s *session) mirroredMarkers(n int64) {
	s.cfg.Observer.Mirrored(s.cfg.Mirror, s.cfg.Topic, s.cfg.Partition, n, 0)
}

// finishTxn ends t (EndTxn), which makes its coordinator write the marker, and moves t to the
// producer epoch the coordinator answers with.
func (s *session) finishTxn(ctx context.Context, t *replayTxn, commit bool) error {
	p, err := s.m.dst.EndTxn(ctx, t.id, t.producer, commit)
	if err != nil {
		return err
	}
	if p.Epoch != t.producer.Epoch || p.ID != t.producer.ID {
		p.Sequence = 0 // a new epoch starts its sequences over
	} else {
		p.Sequence = t.producer.Sequence
	}
	t.producer, t.open = p, false
	return nil
}

// gapWriter returns gap writer i, with the partition in a transaction of it.
func (s *session) gapWriter(ctx context.Context, i int) (*replayTxn, error) {
	t := s.gaps[i]
	if t == nil {
		var err error
		if t, err = s.initTxn(ctx, s.txnPrefix()+gapSuffix(i)); err != nil {
			return nil, err
		}
		s.gaps[i] = t
	}
	if !t.open {
		if err := s.m.dst.AddPartitionToTxn(ctx, t.id, t.producer, s.cfg.Topic, s.cfg.Partition); err != nil {
			return nil, err
		}
		t.open = true
	}
	return t, nil
}

// loneMarker writes one commit or abort marker with no transaction data before it: with
// WriteTxnMarkers, or through an empty transaction of the partition's first gap writer.
func (s *session) loneMarker(ctx context.Context, commit bool) error {
	if err := s.flush(); err != nil {
		return err
	}
	if written, err := s.writeLoneMarkers(ctx, 1, commit); written == 1 || err != nil {
		return err
	}
	t, err := s.gapWriter(ctx, 0)
	if err != nil {
		return err
	}
	if err := s.endTxn(ctx, t, commit); err != nil {
		return err
	}
	s.cfg.Observer.LoneMarkers(MarkersByEndTxn, 1)
	return nil
}

// gapMarkers fills n offsets without a source record with abort markers: with
// WriteTxnMarkers, or through the gap writers, up to gapWriters of them at once (their order
// does not matter: they are alike), waiting until all of a round landed before the next:
// nothing else may take their offsets.
func (s *session) gapMarkers(ctx context.Context, n int64) error {
	if err := s.flush(); err != nil {
		return err
	}
	written, err := s.writeLoneMarkers(ctx, n, false)
	if err != nil {
		return err
	}
	for n -= written; n > 0; {
		round := int(min(n, gapWriters))
		writers := make([]*replayTxn, round)
		for i := range writers {
			t, err := s.gapWriter(ctx, i)
			if err != nil {
				return err
			}
			writers[i] = t
		}
		at := s.next
		s.m.mayReach(at + int64(round))
		errs := make([]error, round)
		var wg sync.WaitGroup
		for i, t := range writers {
			wg.Go(func() { errs[i] = s.finishTxn(ctx, t, false) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if err := s.awaitMarker(ctx, at, int64(round)); err != nil {
			return err
		}
		s.cfg.Observer.LoneMarkers(MarkersByEndTxn, int64(round))
		s.mirroredMarkers(int64(round))
		n -= int64(round)
	}
	return nil
}

// markerLandTimeout bounds the wait for a marker. An EndTxn can succeed without writing one:
// a session that adopted a transaction as open while an earlier session's EndTxn for it was
// still on its way ends it a second time, and the coordinator answers that retry with success.
// The next session reads the destination again.
const markerLandTimeout = 30 * time.Second

// awaitMarker waits until the n markers written from offset `at` are in the destination log:
// real brokers write markers after EndTxn returns, and anything appended before they land
// would take their offsets.
func (s *session) awaitMarker(ctx context.Context, at, n int64) error {
	wait := time.Millisecond
	deadline := time.Now().Add(markerLandTimeout)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("the transaction markers for destination offsets %d to %d did not all land within %v", at, at+n-1, markerLandTimeout)
		}
		end, err := s.m.dst.ListOffset(ctx, s.cfg.Topic, s.cfg.Partition, -1)
		if err != nil {
			return err
		}
		switch {
		case end == at+n:
			s.next, s.uncheckedMarkers = end, 0
			s.m.setProgress(func(p *Progress) { p.DestinationEnd = end })
			return nil
		case end > at+n:
			return &mirrorerr.OffsetMismatchError{Topic: s.cfg.Topic, Partition: s.cfg.Partition, Expected: at + n - 1, Actual: end - 1}
		}
		if err := kafkareq.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// nextSequence advances a producer sequence by n; sequences wrap to 0 after MaxInt32.
func nextSequence(seq, n int32) int32 {
	return int32((int64(seq) + int64(n)) % (1 << 31))
}
