package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/topicconfig"
)

// The kinds of sync errors, named as the KIP's MirrorMetadataManager gauges.
const (
	SyncErrorTopicConfig         = "TopicConfigSyncError"
	SyncErrorConsumerGroupOffset = "ConsumerGroupOffsetSyncError"
	SyncErrorACL                 = "AclSyncError"
	SyncErrorTopicMetadata       = "TopicMetadataRefreshError"
)

// SyncStatus is the outcome of a mirror's last metadata sync cycle.
type SyncStatus struct {
	LastCycle time.Time
	// Errors holds the last error of each kind that failed in the last cycle.
	Errors map[string]string
	// SkippedActiveGroups counts groups left alone because they have members on the
	// destination (their own progress there must not be overwritten).
	SkippedActiveGroups int
}

// syncer is a mirror's MirrorMetadataManager: every interval (and once at start) it copies
// topic configs, consumer group offsets and ACLs of the MIRRORING topics, adds partitions
// the source gained, and checks the source cluster id. Its errors never stop the data path.
type syncer struct {
	e      *Engine
	mirror string
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{}

	mu     sync.Mutex
	status SyncStatus
}

func (e *Engine) startSyncer(mirror string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.syncers[mirror] != nil {
		return
	}
	parent := e.ctx
	if e.cfg.Placement != nil {
		if parent = e.place.syncOwned(e.cfg.Placement, mirror); parent == nil {
			return // runs where it is owned
		}
	}
	ctx, cancel := context.WithCancel(parent)
	s := &syncer{e: e, mirror: mirror, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	e.syncers[mirror] = s
	go s.run(ctx)
}

func (e *Engine) stopSyncer(mirror string) {
	e.mu.Lock()
	s := e.syncers[mirror]
	delete(e.syncers, mirror)
	e.mu.Unlock()
	if s != nil {
		s.cancel()
		<-s.done
	}
}

// kickSyncer asks for a sync cycle now (a topic just started).
func (e *Engine) kickSyncer(mirror string) {
	e.mu.Lock()
	s := e.syncers[mirror]
	e.mu.Unlock()
	if s != nil {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// SyncStatus returns the last sync outcome of a mirror.
func (e *Engine) SyncStatus(mirror string) (SyncStatus, error) {
	e.mu.Lock()
	s := e.syncers[mirror]
	e.mu.Unlock()
	if s == nil {
		return SyncStatus{}, cmdErr(CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Errors = make(map[string]string, len(s.status.Errors))
	for k, v := range s.status.Errors {
		st.Errors[k] = v
	}
	return st, nil
}

func (s *syncer) run(ctx context.Context) {
	defer close(s.done)
	for {
		s.cycle(ctx)
		interval := kip.DefaultSyncInterval
		if rec, ok := s.e.store.Mirror(s.mirror); ok && rec.Sync.Interval > 0 {
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
func (s *syncer) cycle(ctx context.Context) {
	errs := map[string]string{}
	skipped := 0
	defer func() {
		s.mu.Lock()
		s.status = SyncStatus{LastCycle: time.Now().UTC(), Errors: errs, SkippedActiveGroups: skipped}
		s.mu.Unlock()
		for kind, msg := range errs {
			s.e.log.Warn("metadata sync failed", "mirror", s.mirror, "kind", kind, "error", msg)
		}
	}()
	e := s.e
	rec, ok := e.store.Mirror(s.mirror)
	if !ok {
		return
	}
	srcCl, err := e.source(s.mirror)
	if err != nil {
		errs[SyncErrorTopicMetadata] = err.Error()
		return
	}
	src := kafkareq.NewCluster("source", srcCl)
	id, err := kafkareq.ClusterID(ctx, srcCl)
	if err != nil {
		errs[SyncErrorTopicMetadata] = fmt.Sprintf("reaching the source cluster: %v", err)
		return
	}
	if id != rec.SourceClusterID {
		// A replaced source must not feed anything more: halt sync, fail the topics.
		msg := fmt.Sprintf("%s: the source cluster reports cluster id %q, but mirror %q is bound to %q", CodeSourceClusterIDMismatch, id, s.mirror, rec.SourceClusterID)
		errs[SyncErrorTopicMetadata] = msg
		for _, topic := range e.mirrorTopics(s.mirror) {
			for _, r := range e.topicRunners(s.mirror, topic) {
				if st := r.Status().State; st != partitionstate.StateStopped && st != partitionstate.StateFailed {
					r.send(partitionstate.Fail{Err: msg, Retryable: false, Now: time.Now()})
				}
			}
		}
		return
	}
	topics := s.mirroringTopics()
	if len(topics) == 0 {
		return
	}
	if err := s.syncPartitions(ctx, src, topics); err != nil {
		errs[SyncErrorTopicMetadata] = err.Error()
	}
	if rec.Sync.TopicConfigs {
		if err := s.syncTopicConfigs(ctx, src, topics, rec.Sync.TopicConfigExcludes); err != nil {
			errs[SyncErrorTopicConfig] = err.Error()
		}
	}
	if rec.Sync.ConsumerGroups {
		n, err := s.syncGroupOffsets(ctx, src, topics, rec.Sync)
		skipped = n
		if err != nil {
			errs[SyncErrorConsumerGroupOffset] = err.Error()
		}
	}
	if rec.Sync.ACLs {
		if err := s.syncACLs(ctx, src, topics, rec.Sync); err != nil {
			errs[SyncErrorACL] = err.Error()
		}
	}
}

// mirroringTopics are the mirror's topics with a partition MIRRORING; paused and stopped
// topics are never synced.
func (s *syncer) mirroringTopics() []string {
	var out []string
	for _, topic := range s.e.mirrorTopics(s.mirror) {
		for _, st := range s.e.topicStatuses(s.mirror, topic) {
			if st.State == partitionstate.StateMirroring {
				out = append(out, topic)
				break
			}
		}
	}
	return out
}

// syncPartitions adds the partitions a source topic gained to the destination topic and
// starts mirroring them.
func (s *syncer) syncPartitions(ctx context.Context, src kafkareq.Cluster, topics []string) error {
	var problems []string
	for _, topic := range topics {
		sm, err := src.Metadata(ctx, topic, 0)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		dm, err := s.e.dst.Metadata(ctx, topic, 0)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if sm.Partitions > dm.Partitions {
			resp, err := s.e.dst.Admin.UpdatePartitions(ctx, sm.Partitions, topic)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("adding partitions to %q: %v", topic, err))
				continue
			}
			s.e.log.Info("destination topic grew with the source", "mirror", s.mirror, "topic", topic, "from", dm.Partitions, "to", sm.Partitions)
			if err := s.e.recordNewPartitions(ctx, s.mirror, topic, dm.Partitions, sm.Partitions); err != nil {
				problems = append(problems, err.Error())
			}
		}
		if err := s.e.ensureRunners(ctx, s.mirror, topic); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return joinProblems(problems)
}

// syncTopicConfigs copies the source topics' explicit overrides (never broker defaults, never
// the KIP's exclude list or the user's) and removes destination overrides the source dropped.
func (s *syncer) syncTopicConfigs(ctx context.Context, src kafkareq.Cluster, topics, userExcludes []string) error {
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
	dstCfgs, err := s.e.dst.Admin.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return fmt.Errorf("describing destination topic configs: %w", err)
	}
	var problems []string
	for _, topic := range topics {
		want, err := overrides(srcCfgs, topic)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		have, err := overrides(dstCfgs, topic)
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
		resp, err := s.e.dst.Admin.AlterTopicConfigs(ctx, alter, topic)
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

// overrides returns a topic's explicitly set configs.
func overrides(rcs kadm.ResourceConfigs, topic string) (map[string]*string, error) {
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, fmt.Errorf("configs of %q: %w", topic, err)
	}
	out := map[string]*string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			out[c.Key] = c.Value
		}
	}
	return out, nil
}

// syncGroupOffsets copies committed offsets of the mirrored topics as they are (offsets are
// identical on both clusters), clamped to the destination's valid range and committed with
// leader epoch -1. Groups with members on the destination are skipped and counted, and a
// destination offset is never moved backwards.
func (s *syncer) syncGroupOffsets(ctx context.Context, src kafkareq.Cluster, topics []string, cfg mirrorstate.SyncSettings) (skipped int, err error) {
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
	described, err := s.e.dst.Admin.DescribeGroups(ctx, groups...)
	if err != nil {
		return 0, fmt.Errorf("describing destination groups: %w", err)
	}
	starts, err := s.e.dst.Admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("listing destination log starts: %w", err)
	}
	ends, err := s.e.dst.Admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("listing destination end offsets: %w", err)
	}
	var problems []string
	for _, g := range groups {
		if d, ok := described[g]; ok && len(d.Members) > 0 {
			skipped++
			s.e.log.Debug("group has members on the destination; its offsets are not synced", "mirror", s.mirror, "group", g)
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
		dstOffsets, err := s.e.dst.Admin.FetchOffsetsForTopics(ctx, g, topics...)
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
		resp, err := s.e.dst.Admin.CommitOffsets(ctx, g, commit)
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
func (s *syncer) syncACLs(ctx context.Context, src kafkareq.Cluster, topics []string, cfg mirrorstate.SyncSettings) error {
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
			res, err := s.e.dst.Admin.CreateACLs(ctx, b)
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
