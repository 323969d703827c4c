package provider

// Unit tests of the plan modifiers and of kafkamirror_mirror_topic's ModifyPlan: the
// diagnostics (errors and warnings) a plan gets, with a fake worker API.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

func topicSchema(t *testing.T) resource.SchemaResponse {
	t.Helper()
	var resp resource.SchemaResponse
	(&MirrorTopicResource{}).Schema(context.Background(), resource.SchemaRequest{}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	return resp
}

// topicModel is a mirror topic in the given desired state with the given partitions.
func topicModel(state, divergence string, ps []api.Partition) mirrorTopicResourceModel {
	m := mirrorTopicResourceModel{
		ID: types.StringValue("m/orders"), MirrorName: types.StringValue("m"), Topic: types.StringValue("orders"),
		State: types.StringValue(state), Divergence: types.StringValue(divergence),
		MirrorNameConfig: types.StringValue(kip.FormatMirrorName("m", state)),
		Partitions:       partitionsList(ps),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{
			"create": types.StringType, "update": types.StringType, "delete": types.StringType,
		})},
	}
	if ps == nil {
		m.Partitions = types.ListUnknown(partitionObjectType)
	}
	return m
}

func rawValue(t *testing.T, s resource.SchemaResponse, m *mirrorTopicResourceModel) tftypes.Value {
	t.Helper()
	st := tfsdk.State{Schema: s.Schema, Raw: tftypes.NewValue(s.Schema.Type().TerraformType(context.Background()), nil)}
	if m == nil {
		return st.Raw
	}
	if d := st.Set(context.Background(), m); d.HasError() {
		t.Fatal(d)
	}
	return st.Raw
}

// fakeWorker answers GET /v1/mirrors/m/topics/orders with topic.
func fakeWorker(t *testing.T, topic *api.Topic) *api.Client {
	t.Helper()
	return fakeWorkerWithSource(t, topic, nil)
}

// fakeWorkerWithSource is fakeWorker whose mirror m lists source (nil: the source cannot be
// asked) as the source's topics matching any pattern.
func fakeWorkerWithSource(t *testing.T, topic *api.Topic, source []string) *api.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/mirrors/m/source-topics" && source != nil {
			_ = json.NewEncoder(w).Encode(api.SourceTopics{Topics: source})
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/v1/mirrors/m/topics/orders" || topic == nil {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.ErrorBody{ErrorCode: api.CodeTopicNotInClusterMirror, Message: "no"})
			return
		}
		_ = json.NewEncoder(w).Encode(topic)
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.ClientConfig{URL: srv.URL, Token: "t", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// modifyPlan runs ModifyPlan for prior → planned (nil for create or destroy).
func modifyPlan(t *testing.T, client *api.Client, prior, planned *mirrorTopicResourceModel) resource.ModifyPlanResponse {
	t.Helper()
	s := topicSchema(t)
	r := &MirrorTopicResource{}
	if client != nil {
		r.data = &providerData{client: client}
	}
	req := resource.ModifyPlanRequest{
		State:  tfsdk.State{Schema: s.Schema, Raw: rawValue(t, s, prior)},
		Plan:   tfsdk.Plan{Schema: s.Schema, Raw: rawValue(t, s, planned)},
		Config: tfsdk.Config{Schema: s.Schema, Raw: rawValue(t, s, planned)},
	}
	resp := resource.ModifyPlanResponse{Plan: req.Plan}
	r.ModifyPlan(context.Background(), req, &resp)
	return resp
}

func partitions(state string, lags ...int64) []api.Partition {
	out := make([]api.Partition, len(lags))
	for i, lag := range lags {
		out[i] = api.Partition{Partition: int32(i), State: state, SourceOffset: 100 + lag, DestinationOffset: 100, Lag: lag, LastMirroredOffset: -1}
	}
	return out
}

func messages(ds diag.Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.Severity().String() + ": " + d.Summary() + ": " + d.Detail() + "\n")
	}
	return b.String()
}

func TestModifyPlanFailoverWarningUsesLiveLag(t *testing.T) {
	stale := partitions(api.StateMirroring, 0, 0, 0)
	live := &api.Topic{Mirror: "m", Topic: "orders", DesiredState: "mirroring", Partitions: partitions(api.StateMirroring, 12, 0, 5)}
	prior, planned := topicModel("mirroring", "fail", stale), topicModel("stopped", "fail", nil)
	resp := modifyPlan(t, fakeWorker(t, live), &prior, &planned)
	if resp.Diagnostics.HasError() || resp.Diagnostics.WarningsCount() != 1 {
		t.Fatalf("diagnostics:\n%s", messages(resp.Diagnostics))
	}
	w := messages(resp.Diagnostics)
	for _, want := range []string{
		`Failover: topic "orders" stops mirroring from cluster mirror "m"`,
		`Changing state from "mirroring" to "stopped" fails topic "orders" over`,
		"17 records of current lag (as of this plan) will not be copied",
		"partition 0 (MIRRORING): 12 records of lag will not be copied (source offset 112, destination offset 100)",
		"partition 2 (MIRRORING): 5 records of lag",
		"Partitions: 0 (MIRRORING), 1 (MIRRORING), 2 (MIRRORING).",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "partition 1 (MIRRORING): 0 records") {
		t.Errorf("warning lists a partition without lag:\n%s", w)
	}
}

func TestModifyPlanFailoverWarningWithoutWorker(t *testing.T) {
	// The worker cannot be asked (unknown provider configuration): the last refresh is used.
	prior := topicModel("paused", "fail", partitions(api.StatePaused, 1))
	resp := modifyPlan(t, nil, &prior, nil) // destroy
	w := messages(resp.Diagnostics)
	for _, want := range []string{"Destroying this kafkamirror_mirror_topic fails topic", "1 record of current lag (as of the last refresh)", "records are kept"} {
		if !strings.Contains(w, want) {
			t.Errorf("destroy warning lacks %q:\n%s", want, w)
		}
	}
	// Destroying a stopped topic changes nothing: no warning.
	stopped := topicModel("stopped", "fail", partitions(api.StateStopped, 0))
	if resp := modifyPlan(t, nil, &stopped, nil); len(resp.Diagnostics) != 0 {
		t.Errorf("destroy of a stopped topic:\n%s", messages(resp.Diagnostics))
	}
}

func TestModifyPlanIllegalTransition(t *testing.T) {
	prior, planned := topicModel("stopped", "fail", partitions(api.StateStopped, 0, 0)), topicModel("paused", "fail", nil)
	resp := modifyPlan(t, nil, &prior, &planned)
	if !resp.Diagnostics.HasError() {
		t.Fatalf("stopped → paused was not refused:\n%s", messages(resp.Diagnostics))
	}
	d := resp.Diagnostics.Errors()[0]
	want := `Topic "orders" of cluster mirror "m" cannot change state from "stopped" to "paused": a stopped topic cannot be paused; ` +
		`set state = "mirroring" first to restart it.` + "\n\n" +
		`Legal changes from "stopped": "mirroring" (restart, or failback when the mirror points the other way).`
	if d.Summary() != "Illegal mirror topic state change" || d.Detail() != want {
		t.Fatalf("error %q: %q\nwant %q", d.Summary(), d.Detail(), want)
	}
	if p, ok := d.(diag.DiagnosticWithPath); !ok || !p.Path().Equal(path.Root("state")) {
		t.Errorf("the error is not attached to the state attribute: %v", d)
	}
}

func TestModifyPlanRecreateWarning(t *testing.T) {
	ps := []api.Partition{
		{Partition: 0, State: api.StateStopped, SourceOffset: 50, DestinationOffset: 47, LastMirroredOffset: 40},
		{Partition: 1, State: api.StateStopped, SourceOffset: 60, DestinationOffset: 60, LastMirroredOffset: 60},
	}
	prior := topicModel("stopped", "fail", ps)
	recreate, fail := topicModel("mirroring", "recreate", nil), topicModel("mirroring", "fail", nil)
	w := messages(modifyPlan(t, nil, &prior, &recreate).Diagnostics)
	for _, want := range []string{`Restart may recreate destination topic "orders"`, "7 records past the last mirrored offsets", "will be recreated"} {
		if !strings.Contains(w, want) {
			t.Errorf("recreate warning lacks %q:\n%s", want, w)
		}
	}
	if resp := modifyPlan(t, nil, &prior, &fail); len(resp.Diagnostics) != 0 {
		t.Errorf("a restart with divergence fail warned:\n%s", messages(resp.Diagnostics))
	}
}

func TestModifyPlanCreate(t *testing.T) {
	stopped := topicModel("stopped", "fail", nil)
	resp := modifyPlan(t, nil, nil, &stopped)
	if !resp.Diagnostics.HasError() || !strings.Contains(messages(resp.Diagnostics), "Cannot create a stopped mirror topic") {
		t.Fatalf("create in state stopped:\n%s", messages(resp.Diagnostics))
	}
	mirroring := topicModel("mirroring", "fail", nil)
	if resp := modifyPlan(t, nil, nil, &mirroring); len(resp.Diagnostics) != 0 {
		t.Fatalf("plain create:\n%s", messages(resp.Diagnostics))
	}
}

func TestModifyPlanRestartsStuckPartitions(t *testing.T) {
	ps := partitions(api.StateMirroring, 0, 0)
	ps[1].State, ps[1].RetryAttempt, ps[1].Error = api.StateFailed, -1, "source topic recreated"
	prior, planned := topicModel("mirroring", "fail", ps), topicModel("mirroring", "fail", ps)
	resp := modifyPlan(t, nil, &prior, &planned)
	if !strings.Contains(messages(resp.Diagnostics), "partition 1: FAILED, source offset 100, destination offset 100, lag 0, not retried: waits for the operator, error: source topic recreated") {
		t.Fatalf("diagnostics:\n%s", messages(resp.Diagnostics))
	}
	var got types.List
	resp.Plan.GetAttribute(context.Background(), path.Root("partitions"), &got)
	if !got.IsUnknown() {
		t.Fatal("partitions are not planned unknown, so apply would not restart the failed partition")
	}
	// A failure the worker retries by itself is left alone.
	ps[1].RetryAttempt = 3
	prior, planned = topicModel("mirroring", "fail", ps), topicModel("mirroring", "fail", ps)
	if resp := modifyPlan(t, nil, &prior, &planned); len(resp.Diagnostics) != 0 {
		t.Fatalf("retried failure:\n%s", messages(resp.Diagnostics))
	}
}

func TestModifyPlanReplacementWarns(t *testing.T) {
	prior := topicModel("mirroring", "fail", partitions(api.StateMirroring, 3))
	planned := topicModel("mirroring", "fail", nil)
	planned.Topic = types.StringValue("orders-v2")
	w := messages(modifyPlan(t, nil, &prior, &planned).Diagnostics)
	if !strings.Contains(w, "Replacing this kafkamirror_mirror_topic (mirror_name or topic changed) fails topic \"orders\" over") {
		t.Fatalf("replacement warning:\n%s", w)
	}
}

func TestMirrorNameConfigModifier(t *testing.T) {
	s := topicSchema(t)
	for _, tc := range []struct {
		state types.String
		want  types.String
	}{
		{types.StringValue("mirroring"), types.StringValue("m")},
		{types.StringValue("paused"), types.StringValue("m.paused")},
		{types.StringValue("stopped"), types.StringValue("m.removed")},
		{types.StringUnknown(), types.StringUnknown()},
	} {
		m := topicModel("mirroring", "fail", nil)
		m.State = tc.state
		plan := tfsdk.Plan{Schema: s.Schema, Raw: rawValue(t, s, &m)}
		resp := &planmodifier.StringResponse{PlanValue: types.StringUnknown()}
		mirrorNameConfigModifier{}.PlanModifyString(context.Background(), planmodifier.StringRequest{
			Path: path.Root("mirror_name_config"), Plan: plan, PlanValue: types.StringUnknown(),
		}, resp)
		if resp.Diagnostics.HasError() || !resp.PlanValue.Equal(tc.want) {
			t.Errorf("state %s: planned %s, want %s (%v)", tc.state, resp.PlanValue, tc.want, resp.Diagnostics)
		}
	}
}

func TestPartitionsModifier(t *testing.T) {
	s := topicSchema(t)
	old := partitionsList(partitions(api.StateMirroring, 4))
	run := func(priorState, plannedState string) types.List {
		prior := topicModel(priorState, "fail", partitions(api.StateMirroring, 4))
		planned := topicModel(plannedState, "recreate", nil)
		req := planmodifier.ListRequest{
			Path:       path.Root("partitions"),
			State:      tfsdk.State{Schema: s.Schema, Raw: rawValue(t, s, &prior)},
			Plan:       tfsdk.Plan{Schema: s.Schema, Raw: rawValue(t, s, &planned)},
			StateValue: old,
			PlanValue:  types.ListUnknown(partitionObjectType),
		}
		resp := &planmodifier.ListResponse{PlanValue: req.PlanValue}
		partitionsModifier{}.PlanModifyList(context.Background(), req, resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		return resp.PlanValue
	}
	if got := run("mirroring", "mirroring"); !got.Equal(old) {
		t.Errorf("same state (divergence changed): partitions planned %s, want the refreshed ones", got)
	}
	if got := run("mirroring", "paused"); !got.IsUnknown() {
		t.Errorf("state change: partitions planned %s, want unknown", got)
	}
}

// TestModifyPlanUnchangedStoppedTopicIsQuiet: a plan that changes nothing warns of nothing.
func TestModifyPlanUnchangedStoppedTopicIsQuiet(t *testing.T) {
	ps := partitions(api.StateStopped, 0, 4)
	live := &api.Topic{Mirror: "m", Topic: "orders", DesiredState: api.DesiredStopped, Partitions: ps}
	prior, planned := topicModel("stopped", "fail", ps), topicModel("stopped", "fail", ps)
	if resp := modifyPlan(t, fakeWorkerWithSource(t, live, []string{"orders"}), &prior, &planned); len(resp.Diagnostics) != 0 {
		t.Fatalf("a plan without changes:\n%s", messages(resp.Diagnostics))
	}
}

// TestModifyPlanCreateChecksTheOwner: a new resource for a topic another resource owns, or
// that mirrors already, is refused at plan time; a stopped topic nobody owns may be
// started; a topic missing on the source gets a warning.
func TestModifyPlanCreateChecksTheOwner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		live   *api.Topic
		source []string
		want   []string // in the diagnostics; none when empty
		err    bool
	}{
		{"owned by another resource", &api.Topic{DesiredState: api.DesiredMirroring, Owner: "other-owner"}, nil,
			[]string{"Mirror topic managed by another resource", "owned by other-owner", "moved {", "from = <old address>", "terraform import <address> m/orders"}, true},
		{"stopped, owned", &api.Topic{DesiredState: api.DesiredStopped, Owner: "other-owner"}, nil, []string{"moved {"}, true},
		{"mirrored outside Terraform", &api.Topic{DesiredState: api.DesiredPaused}, nil,
			[]string{"Mirror topic already mirrored", `already paused in cluster mirror "m"`, "terraform import <address> m/orders"}, true},
		{"stopped, released", &api.Topic{DesiredState: api.DesiredStopped}, nil, nil, false},
		{"new, on the source", nil, []string{"orders"}, nil, false},
		{"new, missing on the source", nil, []string{}, []string{`Source topic "orders" does not exist`, "starting it fails"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planned := topicModel("mirroring", "fail", nil)
			resp := modifyPlan(t, fakeWorkerWithSource(t, tc.live, tc.source), nil, &planned)
			got := messages(resp.Diagnostics)
			if resp.Diagnostics.HasError() != tc.err || (len(tc.want) == 0) != (len(resp.Diagnostics) == 0) {
				t.Fatalf("diagnostics:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("diagnostics lack %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestModifyPlanDestroyOfATopicOwnedElsewhere: a destroy that will not stop the topic says
// so instead of warning of a failover.
func TestModifyPlanDestroyOfATopicOwnedElsewhere(t *testing.T) {
	ps := partitions(api.StateMirroring, 2)
	prior := topicModel("mirroring", "fail", ps)
	prior.OwnerID = types.StringValue("mine")
	for owner, want := range map[string]string{
		"other": `Destroying this kafkamirror_mirror_topic does not stop topic "orders" of cluster mirror "m": the worker records it as owned by other`,
		"mine":  `Failover: topic "orders" stops mirroring`,
	} {
		live := &api.Topic{Mirror: "m", Topic: "orders", DesiredState: api.DesiredMirroring, Owner: owner, Partitions: ps}
		w := messages(modifyPlan(t, fakeWorker(t, live), &prior, nil).Diagnostics)
		if !strings.Contains(w, want) {
			t.Errorf("owner %s: diagnostics lack %q:\n%s", owner, want, w)
		}
	}
}

// TestModifyPlanSourceTopicGone: partitions FAILED because the source topic was deleted are
// not restarted (it would fail the same way); the plan says what is left to do.
func TestModifyPlanSourceTopicGone(t *testing.T) {
	ps := partitions(api.StateFailed, 0, 0)
	for i := range ps {
		ps[i].RetryAttempt, ps[i].SourceOffset, ps[i].Error = -1, -1, `topic "orders" does not exist on the source cluster`
	}
	prior, planned := topicModel("mirroring", "fail", ps), topicModel("mirroring", "fail", ps)
	resp := modifyPlan(t, fakeWorkerWithSource(t, nil, []string{}), &prior, &planned)
	w := messages(resp.Diagnostics)
	for _, want := range []string{`Source topic "orders" no longer exists`, "partition 1: FAILED", `state = "stopped"`} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	var got types.List
	resp.Plan.GetAttribute(context.Background(), path.Root("partitions"), &got)
	if got.IsUnknown() {
		t.Fatal("the plan restarts the partitions of a topic the source no longer has")
	}
	// For the destroy that follows (the topic left a for_each listing), the failover
	// warning says why nothing more could be copied.
	if w := messages(modifyPlan(t, fakeWorkerWithSource(t, nil, []string{}), &prior, nil).Diagnostics); !strings.Contains(w, `Topic "orders" no longer exists on the source cluster`) {
		t.Errorf("destroy warning:\n%s", w)
	}
}
