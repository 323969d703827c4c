// Package topicconfig holds what a destination topic is created with and which source
// topic configs travel: pure rules, shared by PREPARING (creation) and the metadata sync
// (later changes).
package topicconfig

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KIPExcludes are the KIP's topic configs that are never copied (§7.2 of the KIP).
var KIPExcludes = []string{
	"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
	"message.timestamp.difference.max.ms", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
	"message.timestamp.type", "unclean.leader.election.enable", "min.insync.replicas",
}

// Managed are set on every destination topic the worker creates and kept by the
// config sync: records keep their source timestamps. A LogAppendTime topic would overwrite
// them, and Kafka 4.0 rejects create times more than an hour ahead by default.
var Managed = map[string]string{
	"message.timestamp.type":          "CreateTime",
	"message.timestamp.before.max.ms": strconv.FormatInt(1<<63-1, 10),
	"message.timestamp.after.max.ms":  strconv.FormatInt(1<<63-1, 10),
}

// vendorConfigPrefixes are other distributions' topic configs, which Apache Kafka rejects as
// unknown (INVALID_CONFIG).
var vendorConfigPrefixes = []string{"confluent.", "redpanda.", "aiven.", "cloudera.", "strimzi.", "mirror."}

// removedTopicConfigs were removed in Apache Kafka 4.0; a 4.x destination rejects them.
var removedTopicConfigs = []string{"message.format.version", "message.downconversion.enable"}

// Dropped is a source topic config left out of the destination, with the reason.
type Dropped struct{ Key, Reason string }

func (d Dropped) String() string { return d.Key + " (" + d.Reason + ")" }

// Filter decides which source topic configs travel to the destination. excludes are
// the mirror's own exclusions: config names or regular expressions matching whole names.
type Filter struct {
	patterns []string
	excludes []*regexp.Regexp
}

func NewFilter(excludes []string) (Filter, error) {
	var f Filter
	for _, x := range excludes {
		re, err := regexp.Compile("^(?:" + x + ")$")
		if err != nil {
			return Filter{}, fmt.Errorf("topic config exclusion %q is not a regular expression: %w", x, err)
		}
		f.patterns, f.excludes = append(f.patterns, x), append(f.excludes, re)
	}
	return f, nil
}

// Why returns why key does not travel, or "" when it does.
func (f Filter) Why(key string) string {
	switch {
	case slices.Contains(KIPExcludes, key):
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

// CreationConfigs returns the configs a destination topic is created with: the source's
// explicit overrides that travel, then the managed configs, and the overrides left out.
func (f Filter) CreationConfigs(source map[string]*string) (map[string]*string, []Dropped) {
	out := map[string]*string{}
	var dropped []Dropped
	for _, key := range slices.Sorted(maps.Keys(source)) {
		if why := f.Why(key); why != "" {
			if _, managed := Managed[key]; !managed {
				dropped = append(dropped, Dropped{key, why})
			}
			continue
		}
		out[key] = source[key]
	}
	for key, v := range Managed {
		out[key] = &v
	}
	return out, dropped
}

// Replication is the replication a destination topic is created with.
type Replication struct {
	Factor      int16
	MinInsync   int // 0: the broker's default
	Capped      bool
	SourceValue int16
}

// ReplicationFor picks a destination topic's replication: the setting when given (> 0), else
// the source topic's replication factor; either capped by the destination's broker count. Its
// min.insync.replicas is the setting when given, else the source topic's override, else 2 from
// 3 replicas on; never more than the replication factor (a producer could never write).
func ReplicationFor(setting int16, minInsyncSetting int, sourceRF int16, sourceMinInsync int, dstBrokers int) Replication {
	r := Replication{Factor: setting, SourceValue: sourceRF}
	if r.Factor <= 0 {
		r.Factor = sourceRF
	}
	if r.Factor <= 0 {
		r.Factor = 1
	}
	if dstBrokers > 0 && int(r.Factor) > dstBrokers {
		r.Factor, r.Capped = int16(dstBrokers), true
	}
	switch {
	case minInsyncSetting > 0:
		r.MinInsync = minInsyncSetting
	case sourceMinInsync > 0:
		r.MinInsync = sourceMinInsync
	case r.Factor >= 3:
		r.MinInsync = 2
	}
	if r.MinInsync > int(r.Factor) {
		r.MinInsync, r.Capped = int(r.Factor), true
	}
	return r
}

// Overrides returns a topic's explicitly set configs.
func Overrides(rcs kadm.ResourceConfigs, topic string) (map[string]*string, error) {
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
