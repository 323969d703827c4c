package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/topicconfig"
)

// destinationTopicVisible bounds the wait for a created destination topic to reach every
// broker's metadata: real brokers learn of a new topic asynchronously.
const destinationTopicVisible = 30 * time.Second

// ensureDestinationTopic creates the destination topic when it does not exist — the source's
// partition count, a replication fit for a DR copy, the source's explicit overrides that
// travel and the managed timestamp configs — and waits until it is visible; when it exists,
// it checks the partition count.
// It returns the source configs a topic it created was created without, each with its
// reason; only the start command records them (see StartMirrorTopics).
func (e *Engine) ensureDestinationTopic(ctx context.Context, src kafkareq.Cluster, mirror, topic string, partitions int) (leftOut []string, err error) {
	e.topicMu.Lock()
	defer e.topicMu.Unlock()
	meta, err := e.dst.Metadata(ctx, topic, 0)
	var unknown *mirrorerr.UnknownTopicError
	switch {
	case err == nil:
		if meta.Partitions != partitions {
			return nil, permanent(&mirrorerr.PartitionCountMismatchError{Topic: topic, Source: partitions, Destination: meta.Partitions})
		}
		return nil, nil
	case !errors.As(err, &unknown):
		return nil, err
	}
	rec, _ := e.store.Mirror(mirror)
	filter, err := topicconfig.NewFilter(rec.Sync.TopicConfigExcludes)
	if err != nil {
		return nil, permanent(err)
	}
	rcs, err := src.Admin.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, mirrorerr.WrapAuth("source", "describe configs of "+topic, err)
	}
	overrides, _ := topicconfig.Overrides(rcs, topic) // none readable: none to copy
	configs, dropped := filter.CreationConfigs(overrides)

	srcMeta, err := src.Admin.Metadata(ctx, topic)
	if err != nil {
		return nil, mirrorerr.WrapAuth("source", "describe topic "+topic, err)
	}
	dstMeta, err := e.dst.Admin.Metadata(ctx)
	if err != nil {
		return nil, mirrorerr.WrapAuth("destination", "list brokers", err)
	}
	var sourceRF int16
	if ps := srcMeta.Topics[topic].Partitions; len(ps) > 0 {
		sourceRF = int16(len(ps[0].Replicas))
	}
	sourceMinInsync := 0
	if v := overrides["min.insync.replicas"]; v != nil {
		sourceMinInsync, _ = strconv.Atoi(*v)
	}
	dt := rec.DestinationTopics
	repl := topicconfig.ReplicationFor(dt.ReplicationFactor, dt.MinInsyncReplicas, sourceRF, sourceMinInsync, len(dstMeta.Brokers))
	if repl.MinInsync > 0 {
		v := strconv.Itoa(repl.MinInsync)
		configs["min.insync.replicas"] = &v
	}
	if repl.Capped {
		e.log.Warn("destination topic gets less replication than the source or the mirror's setting", "topic", topic,
			"source_replication_factor", repl.SourceValue, "setting_replication_factor", dt.ReplicationFactor,
			"setting_min_insync_replicas", dt.MinInsyncReplicas, "replication_factor", repl.Factor,
			"min_insync_replicas", repl.MinInsync, "destination_brokers", len(dstMeta.Brokers))
	}

	rejected, err := e.createTopic(ctx, topic, int32(partitions), repl.Factor, configs)
	dropped = append(dropped, rejected...)
	if err != nil {
		return nil, err
	}
	if len(dropped) > 0 {
		e.log.Warn("source topic configs left out of the destination topic", "topic", topic, "configs", droppedList(dropped))
		leftOut = make([]string, len(dropped))
		for i, d := range dropped {
			leftOut[i] = d.String()
		}
	}
	e.log.Info("destination topic created", "topic", topic, "partitions", partitions,
		"replication_factor", repl.Factor, "min_insync_replicas", repl.MinInsync, "configs", len(configs))
	return leftOut, e.waitDestinationTopic(ctx, topic, partitions)
}

// createTopic creates topic; configs the destination refuses (INVALID_CONFIG: a config it
// does not know, or a value it does not accept) are found one by one with validate-only
// requests, left out and returned with the broker's reason.
func (e *Engine) createTopic(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]*string) ([]topicconfig.Dropped, error) {
	create := func(cfgs map[string]*string) error {
		resp, err := e.dst.Admin.CreateTopic(ctx, partitions, rf, cfgs, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return nil
		}
		return err
	}
	err := create(configs)
	if !errors.Is(err, kerr.InvalidConfig) {
		return nil, mirrorerr.WrapAuth("destination", "create topic "+topic, err)
	}
	var dropped []topicconfig.Dropped
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		if _, managed := topicconfig.Managed[key]; managed {
			continue
		}
		resp, verr := e.dst.Admin.ValidateCreateTopics(ctx, partitions, rf, map[string]*string{key: configs[key]}, topic)
		if verr == nil {
			if r, ok := resp[topic]; ok {
				verr = r.Err
				if verr != nil && r.ErrMessage != "" {
					verr = fmt.Errorf("%w: %s", verr, r.ErrMessage)
				}
			}
		}
		if errors.Is(verr, kerr.InvalidConfig) {
			dropped = append(dropped, topicconfig.Dropped{Key: key, Reason: "refused by the destination: " + verr.Error()})
			delete(configs, key)
		}
	}
	if err := create(configs); err != nil {
		return dropped, mirrorerr.WrapAuth("destination", "create topic "+topic, err)
	}
	return dropped, nil
}

// waitDestinationTopic waits until the destination's metadata shows topic with its
// partitions and leaders, so the first start does not pass through FAILED on a topic the
// broker asked does not know yet.
func (e *Engine) waitDestinationTopic(ctx context.Context, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, destinationTopicVisible)
	defer cancel()
	for {
		meta, err := e.dst.Metadata(ctx, topic, 0)
		if err == nil && meta.Partitions == partitions && meta.Leader >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("destination topic %q created but not visible with %d partitions after %v: %v", topic, partitions, destinationTopicVisible, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func droppedList(ds []topicconfig.Dropped) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, "; ")
}
