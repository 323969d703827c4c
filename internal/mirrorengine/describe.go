package mirrorengine

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// MirrorDescription is what DescribeClusterMirrors tells about a mirror; never a secret.
type MirrorDescription struct {
	Name                   string
	SourceBootstrapServers []string
	SourceClusterID        string
	SASLMechanism          string
	SASLUsername           string
	TLS                    bool
	Sync                   SyncSettings
	DestinationTopics      DestinationTopicSettings
	SyncStatus             SyncStatus
	CreatedAt              time.Time
	Topics                 []string
}

// PartitionDescription is one partition's line of the KIP's describe table.
type PartitionDescription struct {
	Partition          int32
	State              State
	SourceOffset       int64 // source high watermark; -1 when the source cannot be asked
	DestinationOffset  int64 // destination end offset; -1 when unknown
	Lag                int64
	LastMirroredOffset int64 // -1 until the partition was stopped once
	LastMirroredEpoch  int32
	Error              string
	RetryAttempt       int16
}

// TopicDescription is a mirrored topic: its mirror.name value and its partitions.
type TopicDescription struct {
	Mirror     string
	Topic      string
	MirrorName string // the mirror.name value, with its .paused / .removed suffix
	Desired    Desired
	Divergence string // the divergence policy of the last start: "fail" or "recreate"
	Partitions []PartitionDescription
}

// ListClusterMirrors describes every mirror, sorted by name.
func (e *Engine) ListClusterMirrors() []MirrorDescription {
	var out []MirrorDescription
	for _, m := range e.store.Mirrors() {
		out = append(out, e.describeMirror(m))
	}
	return out
}

// DescribeClusterMirror describes one mirror.
func (e *Engine) DescribeClusterMirror(name string) (MirrorDescription, error) {
	m, ok := e.store.Mirror(name)
	if !ok {
		return MirrorDescription{}, cmdErr(CodeUnknownClusterMirror, "cluster mirror %q does not exist", name)
	}
	return e.describeMirror(m), nil
}

func (e *Engine) describeMirror(m MirrorRecord) MirrorDescription {
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

// DescribeMirrorTopics describes every topic of a mirror.
func (e *Engine) DescribeMirrorTopics(ctx context.Context, mirror string) ([]TopicDescription, error) {
	if _, ok := e.store.Mirror(mirror); !ok {
		return nil, cmdErr(CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	var out []TopicDescription
	for _, t := range e.mirrorTopics(mirror) {
		d, err := e.DescribeMirrorTopic(ctx, mirror, t)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DescribeMirrorTopic describes one mirrored topic with live offsets of both clusters.
func (e *Engine) DescribeMirrorTopic(ctx context.Context, mirror, topic string) (TopicDescription, error) {
	if _, ok := e.store.Mirror(mirror); !ok {
		return TopicDescription{}, cmdErr(CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	tc, ok := e.store.TopicConfig(topic)
	owner, desired := ParseMirrorName(tc.MirrorName)
	if !ok || owner != mirror {
		return TopicDescription{}, cmdErr(CodeTopicNotInClusterMirror, "topic %q is not in cluster mirror %q", topic, mirror)
	}
	d := TopicDescription{Mirror: mirror, Topic: topic, MirrorName: tc.MirrorName, Desired: desired, Divergence: tc.Divergence}
	if d.Divergence == "" {
		d.Divergence = "fail"
	}

	srcEnds := kadm.ListedOffsets{}
	if src, err := e.source(mirror); err == nil {
		if ends, err := kadm.NewClient(src).ListEndOffsets(ctx, topic); err == nil {
			srcEnds = ends
		}
	}
	dstEnds, _ := e.dst.adm.ListEndOffsets(ctx, topic)

	statuses := map[int32]Status{}
	for p, rec := range e.store.Partitions(mirror, topic) {
		statuses[p] = rec.Status
	}
	for _, r := range e.topicRunners(mirror, topic) {
		statuses[r.key.partition] = r.Status()
	}
	for p := range int32(len(statuses)) {
		s := statuses[p]
		pd := PartitionDescription{
			Partition: p, State: s.State, SourceOffset: -1, DestinationOffset: -1, LastMirroredOffset: -1, LastMirroredEpoch: -1,
			Error: s.Error, RetryAttempt: s.RetryAttempt,
		}
		if o, ok := srcEnds.Lookup(topic, p); ok && o.Err == nil {
			pd.SourceOffset = o.Offset
		}
		if o, ok := dstEnds.Lookup(topic, p); ok && o.Err == nil {
			pd.DestinationOffset = o.Offset
		}
		if pd.SourceOffset >= 0 && pd.DestinationOffset >= 0 {
			pd.Lag = max(0, pd.SourceOffset-pd.DestinationOffset)
		}
		if lm, ok := e.store.LastMirror(mirror, topic, p); ok {
			pd.LastMirroredOffset, pd.LastMirroredEpoch = lm.LastMirroredOffset, lm.LastMirroredEpoch
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d, nil
}

// PartitionStates counts the mirrored partitions in each state (the KIP's per-state gauges);
// it asks no cluster.
func (e *Engine) PartitionStates() map[State]int {
	e.mu.Lock()
	runners := make([]*runner, 0, len(e.runners))
	for _, r := range e.runners {
		runners = append(runners, r)
	}
	e.mu.Unlock()
	out := map[State]int{}
	for _, r := range runners {
		out[r.Status().State]++
	}
	return out
}
