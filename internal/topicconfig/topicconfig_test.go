package topicconfig

import (
	"maps"
	"strings"
	"testing"
)

func TestCreationConfigs(t *testing.T) {
	v := func(s string) *string { return &s }
	f, err := NewFilter([]string{"retention\\..*", "segment.bytes"})
	if err != nil {
		t.Fatal(err)
	}
	got, dropped := f.CreationConfigs(map[string]*string{
		"cleanup.policy":                  v("compact"),
		"max.message.bytes":               v("2000000"),
		"retention.ms":                    v("1000"),
		"retention.bytes":                 v("1000"),
		"segment.bytes":                   v("1048576"),
		"segment.ms":                      v("1000"),
		"confluent.placement.constraints": v("{}"),
		"redpanda.remote.read":            v("true"),
		"message.format.version":          v("2.8"),
		"message.timestamp.type":          v("LogAppendTime"),
		"min.insync.replicas":             v("2"),
	})
	want := map[string]string{
		"cleanup.policy": "compact", "max.message.bytes": "2000000", "segment.ms": "1000",
		"message.timestamp.type":          "CreateTime",
		"message.timestamp.before.max.ms": "9223372036854775807",
		"message.timestamp.after.max.ms":  "9223372036854775807",
	}
	gotPlain := map[string]string{}
	for k, p := range got {
		gotPlain[k] = *p
	}
	if !maps.Equal(gotPlain, want) {
		t.Errorf("configs %v, want %v", gotPlain, want)
	}
	var names []string
	for _, d := range dropped {
		names = append(names, d.String())
	}
	wantDropped := []string{
		`confluent.placement.constraints (another distribution's config)`,
		`message.format.version (removed in Apache Kafka 4.0)`,
		`min.insync.replicas (never copied (KIP-1279's exclude list))`,
		`redpanda.remote.read (another distribution's config)`,
		`retention.bytes (excluded by the mirror's topic_config_excludes "retention\\..*")`,
		`retention.ms (excluded by the mirror's topic_config_excludes "retention\\..*")`,
		`segment.bytes (excluded by the mirror's topic_config_excludes "segment.bytes")`,
	}
	if strings.Join(names, "\n") != strings.Join(wantDropped, "\n") {
		t.Errorf("dropped:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(wantDropped, "\n"))
	}
	if _, err := NewFilter([]string{"retention.("}); err == nil || !strings.Contains(err.Error(), `"retention.("`) {
		t.Errorf("bad pattern: %v, want an error naming it", err)
	}
}

func TestReplicationFor(t *testing.T) {
	cases := []struct {
		name            string
		setting         int16
		minSetting      int
		srcRF           int16
		srcMin, brokers int
		wantRF          int16
		wantMin         int
		wantCapped      bool
	}{
		{"source RF 3 on 3 brokers: min.insync 2", 0, 0, 3, 0, 3, 3, 2, false},
		{"source RF 3 on 1 broker: capped", 0, 0, 3, 0, 1, 1, 0, true},
		{"source RF 1: broker default min.insync", 0, 0, 1, 0, 3, 1, 0, false},
		{"source min.insync override kept", 0, 0, 3, 3, 5, 3, 3, false},
		{"source min.insync above the capped RF: capped", 0, 0, 3, 2, 1, 1, 1, true},
		{"settings win", 5, 3, 3, 2, 6, 5, 3, false},
		{"setting above the brokers: capped", 5, 0, 3, 0, 3, 3, 2, true},
		{"unknown source RF: 1", 0, 0, 0, 0, 3, 1, 0, false},
	}
	for _, c := range cases {
		r := ReplicationFor(c.setting, c.minSetting, c.srcRF, c.srcMin, c.brokers)
		if r.Factor != c.wantRF || r.MinInsync != c.wantMin || r.Capped != c.wantCapped {
			t.Errorf("%s: got RF %d min.insync %d capped %v, want %d %d %v", c.name, r.Factor, r.MinInsync, r.Capped, c.wantRF, c.wantMin, c.wantCapped)
		}
	}
}
