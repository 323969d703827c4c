package mirrorengine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/metadatasync"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// MirrorDescription is what DescribeClusterMirrors tells about a mirror; never a secret.
type MirrorDescription struct {
	Name                   string
	SourceBootstrapServers []string
	SourceClusterID        string
	SASLMechanism          string
	SASLUsername           string
	TLS                    bool
	Sync                   mirrorstate.SyncSettings
	DestinationTopics      mirrorstate.DestinationTopicSettings
	SyncStatus             metadatasync.Status
	CreatedAt              time.Time
	Topics                 []string
	// Error is why the mirror cannot be used (its __mirror_state record cannot be read);
	// only Name and Topics are known then.
	Error string
}

// PartitionDescription is one partition's line of the KIP's describe table.
type PartitionDescription struct {
	Partition int32
	State     partitionstate.State
	// SourceOffset is the source high watermark and DestinationOffset the destination end
	// offset, as last read (at SourceOffsetAt and DestinationOffsetAt): from this describe
	// when the cluster answered within describeTimeout, else from an earlier one; -1 and
	// the zero time when never read. Unreachable names the clusters ("source",
	// "destination") that did not answer this describe in time.
	SourceOffset        int64
	SourceOffsetAt      time.Time
	DestinationOffset   int64
	DestinationOffsetAt time.Time
	Unreachable         []string
	Lag                 int64
	LastMirroredOffset  int64 // -1 until the partition was stopped once
	LastMirroredEpoch   int32
	// Error is the failure of a FAILED partition, or why a MIRRORING one is stalled.
	Error        string
	RetryAttempt int16
}

// TopicDescription is a mirrored topic: its mirror.name value and its partitions.
type TopicDescription struct {
	Mirror     string
	Topic      string
	MirrorName string // the mirror.name value, with its .paused / .removed suffix
	Desired    partitionstate.Desired
	Divergence string // the divergence policy of the last start: "fail" or "recreate"
	// ConfigsLeftOut are the source configs the destination topic was created without,
	// each with its reason.
	ConfigsLeftOut []string
	Partitions     []PartitionDescription
}

// describeTimeout bounds what a describe, or a failover's look at the source's partitions,
// waits for a cluster's answer: a cluster that does not answer (an outage, a network
// partition) must not hold them up. A describe then gives the offsets that cluster last
// answered, with their age, and names it.
const describeTimeout = 3 * time.Second

// DefaultStallAfter is how long the data path sessions of a MIRRORING partition may fail
// before describe and metrics call it stalled (Config.StallAfter).
const DefaultStallAfter = 30 * time.Second

// ListClusterMirrors describes every mirror, sorted by name, those whose record cannot be
// read included (with their Error).
func (e *Engine) ListClusterMirrors() []MirrorDescription {
	var out []MirrorDescription
	for _, m := range e.store.Mirrors() {
		out = append(out, e.describeMirror(m))
	}
	for _, b := range e.store.BadRecords() {
		if b.Kind == mirrorstate.KindName(mirrorstate.KindMirror) {
			d, _ := e.DescribeClusterMirror(b.Mirror)
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b MirrorDescription) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// DescribeClusterMirror describes one mirror.
func (e *Engine) DescribeClusterMirror(name string) (MirrorDescription, error) {
	if cerr := e.mirrorProblem(name); cerr != nil {
		return MirrorDescription{Name: name, Topics: e.mirrorTopics(name), Error: cerr.Message}, nil
	}
	m, ok := e.store.Mirror(name)
	if !ok {
		return MirrorDescription{}, cmdErr(kip.CodeUnknownClusterMirror, "cluster mirror %q does not exist", name)
	}
	return e.describeMirror(m), nil
}

func (e *Engine) describeMirror(m mirrorstate.MirrorRecord) MirrorDescription {
	d := MirrorDescription{
		Name: m.Name, SourceBootstrapServers: m.Source.BootstrapServers, SourceClusterID: m.SourceClusterID,
		TLS: m.Source.TLS != nil, Sync: m.Sync, CreatedAt: m.CreatedAt, Topics: e.mirrorTopics(m.Name),
		DestinationTopics: m.DestinationTopics,
	}
	if m.Source.SASL != nil {
		d.SASLMechanism, d.SASLUsername = m.Source.SASL.Mechanism, m.Source.SASL.Username
	}
	d.SyncStatus, _ = e.SyncStatus(m.Name)
	return d
}

// describableMirror returns, for a describe, why the mirror's partitions do not run (its
// record cannot be read), or an error when there is no such mirror.
func (e *Engine) describableMirror(mirror string) (broken *CommandError, err error) {
	if broken = e.mirrorProblem(mirror); broken != nil {
		return broken, nil
	}
	if _, ok := e.store.Mirror(mirror); !ok {
		return nil, cmdErr(kip.CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	return nil, nil
}

// DescribeMirrorTopics describes every topic of a mirror, asking each cluster once for all
// of them (within describeTimeout).
func (e *Engine) DescribeMirrorTopics(ctx context.Context, mirror string) ([]TopicDescription, error) {
	broken, err := e.describableMirror(mirror)
	if err != nil {
		return nil, err
	}
	topics := e.mirrorTopics(mirror)
	obs := e.observeEnds(ctx, mirror, topics, broken == nil)
	var out []TopicDescription
	for _, t := range topics {
		d, err := e.describeTopic(mirror, t, broken, obs)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DescribeMirrorTopic describes one mirrored topic with the offsets of both clusters, asked
// within describeTimeout. The partitions of a mirror whose record cannot be read are FAILED
// with that problem.
func (e *Engine) DescribeMirrorTopic(ctx context.Context, mirror, topic string) (TopicDescription, error) {
	broken, err := e.describableMirror(mirror)
	if err != nil {
		return TopicDescription{}, err
	}
	if _, err := e.topicOf(mirror, topic); err != nil {
		return TopicDescription{}, err
	}
	return e.describeTopic(mirror, topic, broken, e.observeEnds(ctx, mirror, []string{topic}, broken == nil))
}

// topicOf returns the config of a topic of the mirror.
func (e *Engine) topicOf(mirror, topic string) (mirrorstate.TopicConfigRecord, error) {
	if cerr := e.topicProblem(topic); cerr != nil {
		return mirrorstate.TopicConfigRecord{}, cerr
	}
	tc, ok := e.store.TopicConfig(topic)
	if owner, _ := partitionstate.ParseMirrorName(tc.MirrorName); !ok || owner != mirror {
		return mirrorstate.TopicConfigRecord{}, cmdErr(kip.CodeTopicNotInClusterMirror, "topic %q is not in cluster mirror %q", topic, mirror)
	}
	return tc, nil
}

func (e *Engine) describeTopic(mirror, topic string, broken *CommandError, obs observation) (TopicDescription, error) {
	tc, err := e.topicOf(mirror, topic)
	if err != nil {
		return TopicDescription{}, err
	}
	_, desired := partitionstate.ParseMirrorName(tc.MirrorName)
	d := TopicDescription{Mirror: mirror, Topic: topic, MirrorName: tc.MirrorName, Desired: desired, Divergence: tc.Divergence, ConfigsLeftOut: tc.ConfigsLeftOut}
	if d.Divergence == "" {
		d.Divergence = "fail"
	}
	statuses := e.topicStatuses(mirror, topic)
	runners := map[int32]*runner{}
	for _, r := range e.topicRunners(mirror, topic) {
		runners[r.key.partition] = r
	}
	now := time.Now()
	for _, p := range slices.Sorted(maps.Keys(statuses)) {
		s := statuses[p]
		if broken != nil {
			s = partitionstate.Status{State: partitionstate.StateFailed, RetryAttempt: -1, Error: broken.Message}
		}
		pd := PartitionDescription{
			Partition: p, State: s.State, LastMirroredOffset: -1, LastMirroredEpoch: -1, Error: s.Error, RetryAttempt: s.RetryAttempt,
		}
		src, dst := offsetKey{sideSource, mirror, topic, p}, offsetKey{sideDestination, "", topic, p}
		pd.SourceOffset, pd.SourceOffsetAt = e.offsets.get(src)
		pd.DestinationOffset, pd.DestinationOffsetAt = e.offsets.get(dst)
		for _, k := range []offsetKey{src, dst} {
			if obs.down(k) {
				pd.Unreachable = append(pd.Unreachable, k.side)
			}
		}
		if pd.SourceOffset >= 0 && pd.DestinationOffset >= 0 {
			pd.Lag = max(0, pd.SourceOffset-pd.DestinationOffset)
		}
		if lm, ok := e.store.LastMirror(mirror, topic, p); ok {
			pd.LastMirroredOffset, pd.LastMirroredEpoch = lm.LastMirroredOffset, lm.LastMirroredEpoch
		}
		if r := runners[p]; r != nil && s.State == partitionstate.StateMirroring {
			if since, last, ok := r.stalled(now, e.cfg.StallAfter); ok {
				pd.Error = stalledDetail(now.Sub(since), pd.Unreachable, last)
			}
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d, nil
}

// stalledDetail is a stalled partition's state detail.
func stalledDetail(d time.Duration, unreachable []string, lastErr string) string {
	what := "stalled"
	if len(unreachable) > 0 {
		what += ": " + strings.Join(unreachable, " and ") + " unreachable"
	}
	return fmt.Sprintf("%s, mirroring sessions failing for %s: %s", what, d.Round(time.Second), lastErr)
}

// The clusters an offset is read from.
const (
	sideSource      = "source"
	sideDestination = "destination"
)

// offsetKey is one partition's end offset on one cluster; mirror is set for the source only
// (its mirror names the cluster).
type offsetKey struct {
	side, mirror, topic string
	partition           int32
}

type observedOffset struct {
	offset int64
	at     time.Time
}

// offsetCache keeps the end offset each cluster last answered, so that a describe can say
// what was known, and since when, of a cluster that no longer answers.
type offsetCache struct {
	mu   sync.Mutex
	ends map[offsetKey]observedOffset
}

func (c *offsetCache) get(k offsetKey) (int64, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.ends[k]; ok {
		return o.offset, o.at
	}
	return -1, time.Time{}
}

func (c *offsetCache) put(k offsetKey, offset int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ends == nil {
		c.ends = map[offsetKey]observedOffset{}
	}
	c.ends[k] = observedOffset{offset, at}
}

// observation is which of one describe's requests went unanswered: a whole cluster, or a
// partition whose leader did not answer.
type observation struct {
	sides      map[string]bool
	partitions map[offsetKey]bool
}

func (o observation) down(k offsetKey) bool { return o.sides[k.side] || o.partitions[k] }

// observeEnds asks the destination, and the mirror's source when withSource, for the topics'
// end offsets, both at once and each within describeTimeout, and caches what they answered:
// each leader once, so that a partition a leader does not yet serve (a new topic's, while the
// broker creates its log) does not keep its neighbours' offsets from the answer.
func (e *Engine) observeEnds(ctx context.Context, mirror string, topics []string, withSource bool) observation {
	obs := observation{sides: map[string]bool{}, partitions: map[offsetKey]bool{}}
	if len(topics) == 0 {
		return obs
	}
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	type answer struct {
		side string
		ends map[kafkareq.TopicPartition]kafkareq.ListedOffset
		err  error
	}
	answers := make(chan answer, 2)
	ask := func(side string, c kafkareq.Cluster) {
		ends, err := c.EndOffsetsOnce(ctx, topics)
		answers <- answer{side, ends, err}
	}
	asked, dstAsked := 1, time.Now()
	go ask(sideDestination, e.dst)
	if withSource {
		if src, err := e.source(mirror); err != nil {
			obs.sides[sideSource] = true
		} else {
			asked++
			go ask(sideSource, kafkareq.NewCluster(sideSource, src))
		}
	}
	for range asked {
		a := <-answers
		if a.err != nil {
			obs.sides[a.side] = true
			continue
		}
		at := time.Now()
		for tp, o := range a.ends {
			k := offsetKey{side: a.side, topic: tp.Topic, partition: tp.Partition}
			if a.side == sideSource {
				k.mirror = mirror
			}
			var ke *kerr.Error
			switch {
			case o.Err == nil:
				e.offsets.put(k, o.Offset, at)
				if a.side == sideDestination {
					e.checkDestinationEnd(ctx, partitionKey{mirror, tp.Topic, tp.Partition}, o.Offset, dstAsked)
				}
			case !errors.As(o.Err, &ke):
				obs.partitions[k] = true // the leader's broker did not answer (a Kafka error is an answer)
			}
		}
	}
	return obs
}

// checkDestinationEnd has the partition's runner, if any, check a destination end offset
// against what it wrote.
func (e *Engine) checkDestinationEnd(ctx context.Context, k partitionKey, end int64, asked time.Time) {
	e.mu.Lock()
	r := e.runners[k]
	e.mu.Unlock()
	if r != nil {
		r.checkDestinationEnd(ctx, end, asked)
	}
}

// allRunners returns every runner.
func (e *Engine) allRunners() []*runner {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Values(e.runners))
}

// PartitionStates counts the mirrored partitions in each state (the KIP's per-state gauges);
// it asks no cluster.
func (e *Engine) PartitionStates() map[partitionstate.State]int {
	out := map[partitionstate.State]int{}
	for _, r := range e.allRunners() {
		out[r.Status().State]++
	}
	return out
}

// StalledPartition is a MIRRORING partition whose data path sessions have failed for
// Config.StallAfter or longer: since Since, the latest with Err.
type StalledPartition struct {
	Mirror, Topic string
	Partition     int32
	Since         time.Time
	Err           string
}

// StalledPartitions lists the stalled partitions; it asks no cluster.
func (e *Engine) StalledPartitions() []StalledPartition {
	var out []StalledPartition
	now := time.Now()
	for _, r := range e.allRunners() {
		if r.Status().State != partitionstate.StateMirroring {
			continue
		}
		if since, last, ok := r.stalled(now, e.cfg.StallAfter); ok {
			out = append(out, StalledPartition{Mirror: r.key.mirror, Topic: r.key.topic, Partition: r.key.partition, Since: since, Err: last})
		}
	}
	return out
}
