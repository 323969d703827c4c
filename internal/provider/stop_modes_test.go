package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// A plan that stops the topic with stop_mode "promote" says so: it waits for the lag
// (rather than leaving it behind) and warns that paused partitions make it fail.
func TestModifyPlanPromoteWarning(t *testing.T) {
	live := &api.Topic{Mirror: "m", Topic: "orders", DesiredState: "mirroring", Partitions: partitions(api.StateMirroring, 12, 0)}
	prior, planned := topicModel("mirroring", "fail", partitions(api.StateMirroring, 0, 0)), topicModel("stopped", "fail", nil)
	planned.StopMode, planned.PromoteTimeout = types.StringValue(api.StopPromote), types.StringValue("2m")
	resp := modifyPlan(t, fakeWorker(t, live), &prior, &planned)
	w := messages(resp.Diagnostics)
	for _, want := range []string{
		`Promote: topic "orders" stops mirroring from cluster mirror "m" once caught up`,
		`promotes topic "orders" (stop_mode = "promote", Confluent's PROMOTED`,
		"waits up to 2m (promote_timeout)",
		"12 records of current lag (as of this plan) to copy before the stop",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "will not be copied") || strings.Contains(w, "A promote needs every partition MIRRORING") {
		t.Errorf("promote warning:\n%s", w)
	}

	// A destroy uses the state's settings; a paused topic cannot be promoted.
	paused := topicModel("paused", "fail", partitions(api.StatePaused, 3))
	paused.StopMode, paused.PromoteTimeout = types.StringValue(api.StopPromote), types.StringValue("1m")
	w = messages(modifyPlan(t, nil, &paused, nil).Diagnostics)
	for _, want := range []string{"Destroying this kafkamirror_mirror_topic promotes topic", "A promote needs every partition MIRRORING", "0 (PAUSED)"} {
		if !strings.Contains(w, want) {
			t.Errorf("destroy warning lacks %q:\n%s", want, w)
		}
	}

	// The default (and a state from before stop_mode) is a failover that names itself.
	w = messages(modifyPlan(t, fakeWorker(t, live), &prior, ptr(topicModel("stopped", "fail", nil))).Diagnostics)
	for _, want := range []string{`stop_mode = "failover", Confluent's FAILED_OVER`, `use stop_mode = "promote"`} {
		if !strings.Contains(w, want) {
			t.Errorf("failover warning lacks %q:\n%s", want, w)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestStopSettingsRequest(t *testing.T) {
	var m mirrorTopicResourceModel // null attributes: the defaults
	if got := stopSettingsOf(&m).request("o", true); got.Mode != api.StopFailover || got.PromoteTimeout != "" || got.Owner != "o" || !got.Release {
		t.Errorf("default request: %+v", got)
	}
	m.StopMode, m.PromoteTimeout = types.StringValue(api.StopPromote), types.StringValue("30s")
	if got := stopSettingsOf(&m).request("o", false); got.Mode != api.StopPromote || got.PromoteTimeout != "30s" || got.Release {
		t.Errorf("promote request: %+v", got)
	}
}

func TestFinalSyncWarning(t *testing.T) {
	stop := stopSettings{mode: api.StopFailover}
	for _, quiet := range []string{"", "synced", "synced (2 groups with members on the destination left alone)"} {
		if s, _ := finalSyncWarning("m", "orders", stop, quiet); s != "" {
			t.Errorf("final sync %q warns: %s", quiet, s)
		}
	}
	s, d := finalSyncWarning("m", "orders", stop, "not synced: source unreachable")
	if !strings.Contains(s, "consumer group offsets may be behind") || !strings.Contains(d, "not synced: source unreachable") ||
		!strings.Contains(d, `stop_mode = "failover"`) {
		t.Errorf("warning: %s: %s", s, d)
	}
}

func TestPromoteRefused(t *testing.T) {
	req := api.TopicsRequest{Mode: api.StopPromote, PromoteTimeout: "1s"}
	err := &api.Error{Code: api.CodeInvalidMirrorPartitionState, Message: "promote of \"orders\": not caught up after 1s: partition 0 is PAUSED; nothing was stopped"}
	s, d, ok := promoteRefused("m", "orders", req, err)
	if !ok || !strings.Contains(s, "nothing was stopped") || !strings.Contains(d, "partition 0 is PAUSED") || !strings.Contains(d, `promote_timeout = "1s"`) {
		t.Errorf("%v %s: %s", ok, s, d)
	}
	if _, _, ok := promoteRefused("m", "orders", api.TopicsRequest{Mode: api.StopFailover}, err); ok {
		t.Error("a failover's failure reported as a refused promote")
	}
	if _, _, ok := promoteRefused("m", "orders", req, &api.Error{Code: api.CodeMirrorTopicOwnerMismatch}); ok {
		t.Error("an owner mismatch reported as a refused promote")
	}
}
