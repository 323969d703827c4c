package mirrorengine

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What a destination topic is created with, and which source configs travel: pure rules,
// shared by PREPARING (creation) and the metadata sync (later changes).

// topicConfigExcludes are the KIP's topic configs that are never copied (§7.2 of the KIP).
var topicConfigExcludes = []string{
	"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
	"message.timestamp.difference.max.ms", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
	"message.timestamp.type", "unclean.leader.election.enable", "min.insync.replicas",
}

// managedTopicConfigs are set on every destination topic the worker creates and kept by the
// config sync: records keep their source timestamps. A LogAppendTime topic would overwrite
// them, and Kafka 4.0 rejects create times more than an hour ahead by default.
var managedTopicConfigs = map[string]string{
	"message.timestamp.type":          "CreateTime",
	"message.timestamp.before.max.ms": strconv.FormatInt(1<<63-1, 10),
	"message.timestamp.after.max.ms":  strconv.FormatInt(1<<63-1, 10),
}

// vendorConfigPrefixes are other distributions' topic configs, which Apache Kafka rejects as
// unknown (INVALID_CONFIG).
var vendorConfigPrefixes = []string{"confluent.", "redpanda.", "aiven.", "cloudera.", "strimzi.", "mirror."}

// removedTopicConfigs were removed in Apache Kafka 4.0; a 4.x destination rejects them.
var removedTopicConfigs = []string{"message.format.version", "message.downconversion.enable"}

// droppedConfig is a source topic config left out of the destination, with the reason.
type droppedConfig struct{ Key, Reason string }

func (d droppedConfig) String() string { return d.Key + " (" + d.Reason + ")" }

// configFilter decides which source topic configs travel to the destination. excludes are
// the mirror's own exclusions: config names or regular expressions matching whole names.
type configFilter struct {
	patterns []string
	excludes []*regexp.Regexp
}

func newConfigFilter(excludes []string) (configFilter, error) {
	var f configFilter
	for _, x := range excludes {
		re, err := regexp.Compile("^(?:" + x + ")$")
		if err != nil {
			return configFilter{}, fmt.Errorf("topic config exclusion %q is not a regular expression: %w", x, err)
		}
		f.patterns, f.excludes = append(f.patterns, x), append(f.excludes, re)
	}
	return f, nil
}

// why returns why key does not travel, or "" when it does.
func (f configFilter) why(key string) string {
	switch {
	case slices.Contains(topicConfigExcludes, key):
		return "never copied (KIP-1279's exclude list)"
	case slices.Contains(removedTopicConfigs, key):
		return "removed in Apache Kafka 4.0"
	case slices.ContainsFunc(vendorConfigPrefixes, func(p string) bool { return strings.HasPrefix(key, p) }):
		return "another distribution's config"
	}
	for i, re := range f.excludes {
		if re.MatchString(key) {
			return fmt.Sprintf("excluded by the mirror's topic_config_excludes %q", f.patterns[i])
		}
	}
	return ""
}

// creationConfigs returns the configs a destination topic is created with: the source's
// explicit overrides that travel, then the managed configs, and the overrides left out.
func (f configFilter) creationConfigs(source map[string]*string) (map[string]*string, []droppedConfig) {
	out := map[string]*string{}
	var dropped []droppedConfig
	for _, key := range sortedKeys(source) {
		if why := f.why(key); why != "" {
			if _, managed := managedTopicConfigs[key]; !managed {
				dropped = append(dropped, droppedConfig{key, why})
			}
			continue
		}
		out[key] = source[key]
	}
	for key, v := range managedTopicConfigs {
		out[key] = &v
	}
	return out, dropped
}

// destinationReplication is the replication a destination topic is created with.
type destinationReplication struct {
	factor      int16
	minInsync   int // 0: the broker's default
	capped      bool
	sourceValue int16
}

// replicationFor picks a destination topic's replication: the setting when given (> 0), else
// the source topic's replication factor; either capped by the destination's broker count. Its
// min.insync.replicas is the setting when given, else the source topic's override, else 2 from
// 3 replicas on; never more than the replication factor (a producer could never write).
func replicationFor(setting int16, minInsyncSetting int, sourceRF int16, sourceMinInsync int, dstBrokers int) destinationReplication {
	r := destinationReplication{factor: setting, sourceValue: sourceRF}
	if r.factor <= 0 {
		r.factor = sourceRF
	}
	if r.factor <= 0 {
		r.factor = 1
	}
	if dstBrokers > 0 && int(r.factor) > dstBrokers {
		r.factor, r.capped = int16(dstBrokers), true
	}
	switch {
	case minInsyncSetting > 0:
		r.minInsync = minInsyncSetting
	case sourceMinInsync > 0:
		r.minInsync = sourceMinInsync
	case r.factor >= 3:
		r.minInsync = 2
	}
	if r.minInsync > int(r.factor) {
		r.minInsync, r.capped = int(r.factor), true
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
