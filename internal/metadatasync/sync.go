// Package metadatasync is a mirror's MirrorMetadataManager (KIP-1279): the topic configs,
// consumer group offsets and ACLs of its MIRRORING topics, the partitions the source gained,
// and the source cluster id, checked every sync interval. It reaches the engine only through
// the small Engine interface.
package metadatasync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/topicconfig"
)

// The kinds of sync errors, named as the KIP's MirrorMetadataManager gauges.
const (
	ErrorTopicConfig         = "TopicConfigSyncError"
	ErrorConsumerGroupOffset = "ConsumerGroupOffsetSyncError"
	ErrorACL                 = "AclSyncError"
	ErrorTopicMetadata       = "TopicMetadataRefreshError"
)

// Status is the outcome of a mirror's last metadata sync cycle.
type Status struct {
	LastCycle time.Time
	// Errors holds the last error of each kind that failed in the last cycle.
	Errors map[string]string
	// SkippedActiveGroups counts groups left alone because they have members on the
	// destination (their own progress there must not be overwritten).
	SkippedActiveGroups int
}

// Engine is what a mirror's sync needs of the engine that runs the mirror.
type Engine interface {
	// Mirror is the mirror's record; false once the mirror is gone.
	Mirror(name string) (mirrorstate.MirrorRecord, bool)
	// Source is a client of the mirror's source cluster.
	Source(mirror string) (*kgo.Client, error)
	// MirroringTopics are the mirror's topics with a partition MIRRORING, in name order.
	MirroringTopics(mirror string) []string
	// SourceReplaced fails the mirror's partitions for good: another cluster answers at
	// the source's address.
	SourceReplaced(mirror, msg string)
	// RecordPartitions records the start of each of the topic's first n partitions that
	// has no record yet: the ones the destination topic just gained, or gained before a
	// crash kept them from being recorded.
	RecordPartitions(ctx context.Context, mirror, topic string, n int) error
	// EnsureRunners starts the topic's partitions that have no runner yet.
	EnsureRunners(ctx context.Context, mirror, topic string) error
}

// Syncer is a mirror's MirrorMetadataManager: every interval (and once at start, and when
// kicked) it copies topic configs, consumer group offsets and ACLs of the MIRRORING topics,
// adds partitions the source gained, and checks the source cluster id. Its errors never stop
// the data path.
type Syncer struct {
	engine Engine
	dst    kafkareq.Cluster
	log    *slog.Logger
	mirror string
	kick   chan struct{}

	mu     sync.Mutex
	status Status
}

// New is the sync of mirror, writing to the destination.
func New(engine Engine, destination *kgo.Client, log *slog.Logger, mirror string) *Syncer {
	return &Syncer{engine: engine, dst: kafkareq.NewCluster("destination", destination), log: log, mirror: mirror, kick: make(chan struct{}, 1)}
}

// Kick asks for a sync cycle now (a topic just started).
func (s *Syncer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Status is the outcome of the last cycle.
func (s *Syncer) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Errors = maps.Clone(s.status.Errors)
	if st.Errors == nil {
		st.Errors = map[string]string{}
	}
	return st
}

// Run syncs until ctx ends.
func (s *Syncer) Run(ctx context.Context) {
	for {
		s.cycle(ctx)
		interval := kip.DefaultSyncInterval
		if rec, ok := s.engine.Mirror(s.mirror); ok && rec.Sync.Interval > 0 {
			interval = rec.Sync.Interval
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-time.After(interval):
		}
	}
}

// cycle runs one sync; each part records its own error and the others still run.
func (s *Syncer) cycle(ctx context.Context) {
	errs := map[string]string{}
	skipped := 0
	defer func() {
		s.mu.Lock()
		s.status = Status{LastCycle: time.Now().UTC(), Errors: errs, SkippedActiveGroups: skipped}
		s.mu.Unlock()
		for kind, msg := range errs {
			s.log.Warn("metadata sync failed", "mirror", s.mirror, "kind", kind, "error", msg)
		}
	}()
	rec, ok := s.engine.Mirror(s.mirror)
	if !ok {
		return
	}
	srcCl, err := s.engine.Source(s.mirror)
	if err != nil {
		errs[ErrorTopicMetadata] = err.Error()
		return
	}
	src := kafkareq.NewCluster("source", srcCl)
	id, err := kafkareq.ClusterID(ctx, srcCl)
	if err != nil {
		errs[ErrorTopicMetadata] = fmt.Sprintf("reaching the source cluster: %v", err)
		return
	}
	if id != rec.SourceClusterID {
		// A replaced source must not feed anything more: halt sync, fail the topics.
		msg := fmt.Sprintf("%s: the source cluster reports cluster id %q, but mirror %q is bound to %q", kip.CodeSourceClusterIDMismatch, id, s.mirror, rec.SourceClusterID)
		errs[ErrorTopicMetadata] = msg
		s.engine.SourceReplaced(s.mirror, msg)
		return
	}
	topics := s.engine.MirroringTopics(s.mirror)
	if len(topics) == 0 {
		return
	}
	if err := s.syncPartitions(ctx, src, topics); err != nil {
		errs[ErrorTopicMetadata] = err.Error()
	}
	if rec.Sync.TopicConfigs {
		if err := s.syncTopicConfigs(ctx, src, topics, rec.Sync.TopicConfigExcludes); err != nil {
			errs[ErrorTopicConfig] = err.Error()
		}
	}
	if rec.Sync.ConsumerGroups {
		n, err := s.SyncGroupOffsets(ctx, src, topics, rec.Sync)
		skipped = n
		if err != nil {
			errs[ErrorConsumerGroupOffset] = err.Error()
		}
	}
	if rec.Sync.ACLs {
		if err := s.syncACLs(ctx, src, topics, rec.Sync); err != nil {
			errs[ErrorACL] = err.Error()
		}
	}
}

// syncPartitions adds the partitions a source topic gained to the destination topic and
// starts mirroring them.
func (s *Syncer) syncPartitions(ctx context.Context, src kafkareq.Cluster, topics []string) error {
	var problems []string
	for _, topic := range topics {
		sm, err := src.Metadata(ctx, topic, 0)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		dm, err := s.dst.Metadata(ctx, topic, 0)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if sm.Partitions > dm.Partitions {
			resp, err := s.dst.Admin.UpdatePartitions(ctx, sm.Partitions, topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("adding partitions to %q: %v", topic, err))
				continue
			}
			s.log.Info("destination topic grew with the source", "mirror", s.mirror, "topic", topic, "from", dm.Partitions, "to", sm.Partitions)
		}
		if err := s.engine.RecordPartitions(ctx, s.mirror, topic, sm.Partitions); err != nil {
			problems = append(problems, err.Error())
		}
		if err := s.engine.EnsureRunners(ctx, s.mirror, topic); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return joinProblems(problems)
}

// syncTopicConfigs copies the source topics' explicit overrides (never broker defaults, never
// the KIP's exclude list or the user's) and removes destination overrides the source dropped.
func (s *Syncer) syncTopicConfigs(ctx context.Context, src kafkareq.Cluster, topics, userExcludes []string) error {
	filter, err := topicconfig.NewFilter(userExcludes)
	if err != nil {
		return err
	}
	// Configs that do not travel are neither copied nor removed: the destination's own
	// (the managed timestamp configs among them) stay.
	excluded := func(key string) bool { return filter.Why(key) != "" }
	srcCfgs, err := src.Admin.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return fmt.Errorf("describing source topic configs: %w", err)
	}
	dstCfgs, err := s.dst.Admin.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return fmt.Errorf("describing destination topic configs: %w", err)
	}
	var problems []string
	for _, topic := range topics {
		want, err := topicconfig.Overrides(srcCfgs, topic)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		have, err := topicconfig.Overrides(dstCfgs, topic)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		var alter []kadm.AlterConfig
		for key, v := range want {
			if !excluded(key) && (have[key] == nil || *have[key] != *v) {
				alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: key, Value: v})
			}
		}
		for key := range have {
			if _, ok := want[key]; !ok && !excluded(key) {
				alter = append(alter, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: key})
			}
		}
		if len(alter) == 0 {
			continue
		}
		sort.Slice(alter, func(i, j int) bool { return alter[i].Name < alter[j].Name })
		resp, err := s.dst.Admin.AlterTopicConfigs(ctx, alter, topic)
		if err == nil {
			for _, r := range resp {
				if err = r.Err; err != nil {
					break
				}
			}
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("altering configs of %q: %v", topic, err))
		}
	}
	return joinProblems(problems)
}

// SyncGroupOffsets copies committed offsets of the mirrored topics as they are (offsets are
// identical on both clusters), clamped to the destination's valid range and committed with
// leader epoch -1. Groups with members on the destination are skipped and counted, and a
// destination offset is never moved backwards.
func (s *Syncer) SyncGroupOffsets(ctx context.Context, src kafkareq.Cluster, topics []string, cfg mirrorstate.SyncSettings) (skipped int, err error) {
	include, exclude, err := groupFilters(cfg)
	if err != nil {
		return 0, err
	}
	listed, err := src.Admin.ListGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing source groups: %w", err)
	}
	var groups []string
	for _, g := range listed.Groups() {
		if matchesAny(include, g, true) && !matchesAny(exclude, g, false) {
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		return 0, nil
	}
	sort.Strings(groups)
	described, err := s.dst.Admin.DescribeGroups(ctx, groups...)
	if err != nil {
		return 0, fmt.Errorf("describing destination groups: %w", err)
	}
	starts, err := s.dst.Admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("listing destination log starts: %w", err)
	}
	ends, err := s.dst.Admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("listing destination end offsets: %w", err)
	}
	var problems []string
	for _, g := range groups {
		if d, ok := described[g]; ok && len(d.Members) > 0 {
			skipped++
			s.log.Debug("group has members on the destination; its offsets are not synced", "mirror", s.mirror, "group", g)
			continue
		}
		srcOffsets, err := src.Admin.FetchOffsetsForTopics(ctx, g, topics...)
		if err == nil {
			err = srcOffsets.Error()
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("group %q on the source: %v", g, err))
			continue
		}
		dstOffsets, err := s.dst.Admin.FetchOffsetsForTopics(ctx, g, topics...)
		if errors.Is(err, kerr.GroupIDNotFound) {
			dstOffsets, err = kadm.OffsetResponses{}, nil // a group new to the destination
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("group %q on the destination: %v", g, err))
			continue
		}
		commit := kadm.Offsets{}
		srcOffsets.Each(func(o kadm.OffsetResponse) {
			if o.At < 0 {
				return
			}
			start, ok1 := starts.Lookup(o.Topic, o.Partition)
			end, ok2 := ends.Lookup(o.Topic, o.Partition)
			if !ok1 || !ok2 || start.Err != nil || end.Err != nil {
				return
			}
			at := max(start.Offset, min(end.Offset, o.At))
			if cur, ok := dstOffsets.Lookup(o.Topic, o.Partition); ok && cur.Err == nil && cur.At >= at {
				return // never backwards, and nothing to do when equal
			}
			commit.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: at, LeaderEpoch: -1, Metadata: o.Metadata})
		})
		if len(commit) == 0 {
			continue
		}
		resp, err := s.dst.Admin.CommitOffsets(ctx, g, commit)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("committing offsets of group %q: %v", g, err))
		}
	}
	return skipped, joinProblems(problems)
}

func groupFilters(cfg mirrorstate.SyncSettings) (include, exclude []*regexp.Regexp, err error) {
	compile := func(patterns []string) ([]*regexp.Regexp, error) {
		var out []*regexp.Regexp
		for _, p := range patterns {
			re, err := regexp.Compile("^(?:" + p + ")$")
			if err != nil {
				return nil, fmt.Errorf("group filter %q: %w", p, err)
			}
			out = append(out, re)
		}
		return out, nil
	}
	if include, err = compile(cfg.GroupIncludes); err != nil {
		return nil, nil, err
	}
	exclude, err = compile(cfg.GroupExcludes)
	return include, exclude, err
}

func matchesAny(res []*regexp.Regexp, s string, emptyMatches bool) bool {
	if len(res) == 0 {
		return emptyMatches
	}
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// syncACLs creates on the destination the source ACLs of the mirrored topics and of the
// synced groups. It deletes nothing: the destination's own ACLs (read-only enforcement, the
// worker's, other mirrors') must survive.
func (s *Syncer) syncACLs(ctx context.Context, src kafkareq.Cluster, topics []string, cfg mirrorstate.SyncSettings) error {
	results, err := src.Admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().
		ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err == nil {
		for _, r := range results {
			if err = r.Err; err != nil {
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("describing source ACLs: %w", err)
	}
	include, exclude, err := groupFilters(cfg)
	if err != nil {
		return err
	}
	var problems []string
	for _, r := range results {
		for _, acl := range r.Described {
			switch acl.Type {
			case kmsg.ACLResourceTypeTopic:
				if acl.Pattern != kadm.ACLPatternLiteral || !slices.Contains(topics, acl.Name) {
					continue
				}
			case kmsg.ACLResourceTypeGroup:
				if acl.Pattern != kadm.ACLPatternLiteral || !matchesAny(include, acl.Name, true) || matchesAny(exclude, acl.Name, false) {
					continue
				}
			default:
				continue
			}
			b := kadm.NewACLs().ResourcePatternType(acl.Pattern).Operations(acl.Operation)
			if acl.Type == kmsg.ACLResourceTypeTopic {
				b.Topics(acl.Name)
			} else {
				b.Groups(acl.Name)
			}
			if acl.Permission == kmsg.ACLPermissionTypeAllow {
				b.Allow(acl.Principal).AllowHosts(acl.Host)
			} else {
				b.Deny(acl.Principal).DenyHosts(acl.Host)
			}
			// Creating an ACL that exists is a no-op on the broker.
			res, err := s.dst.Admin.CreateACLs(ctx, b)
			if err == nil {
				for _, c := range res {
					if err = c.Err; err != nil {
						break
					}
				}
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("creating ACL %s %s on %s %q: %v", acl.Principal, acl.Operation, acl.Type, acl.Name, err))
			}
		}
	}
	return joinProblems(problems)
}

func joinProblems(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(problems, "; "))
}
