package provider

// Unit tests of kafkamirror_mirror_topic's Create and Update against a fake worker: the
// command sequence, and what is saved when a wait fails.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// commandWorker is a fake worker for topic m/orders with two partitions: each command
// moves every partition to its state at once, unless stuck names a state the partitions
// never leave.
type commandWorker struct {
	mu       sync.Mutex
	commands []string
	owners   []string // each command's owner, with " release" when it released
	desired  string
	state    string
	stuck    string // partitions stay here instead of reaching the command's state
	refuse   string // an error code every command gets, changing nothing
}

func (f *commandWorker) client(t *testing.T) *api.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Method == http.MethodPost {
			action := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
			var req api.TopicsRequest
			_ = json.NewDecoder(r.Body).Decode(&req)
			f.commands = append(f.commands, action+":"+req.Divergence)
			owner := req.Owner
			if req.Release {
				owner += " release"
			}
			f.owners = append(f.owners, owner)
			if f.refuse != "" {
				_ = json.NewEncoder(w).Encode(api.TopicResults{Results: []api.TopicResult{{Topic: "orders", ErrorCode: f.refuse, Message: "refused"}}})
				return
			}
			f.desired, f.state = map[string][2]string{
				"start":  {api.DesiredMirroring, api.StateMirroring},
				"resume": {api.DesiredMirroring, api.StateMirroring},
				"pause":  {api.DesiredPaused, api.StatePaused},
				"stop":   {api.DesiredStopped, api.StateStopped},
			}[action][0], map[string]string{"start": api.StateMirroring, "resume": api.StateMirroring, "pause": api.StatePaused, "stop": api.StateStopped}[action]
			if f.stuck != "" {
				f.state = f.stuck
			}
			_ = json.NewEncoder(w).Encode(api.TopicResults{Results: []api.TopicResult{{Topic: "orders"}}})
			return
		}
		ps := []api.Partition{
			{Partition: 0, State: f.state, SourceOffset: 10, DestinationOffset: 10, LastMirroredOffset: -1},
			{Partition: 1, State: f.state, SourceOffset: 12, DestinationOffset: 9, Lag: 3, LastMirroredOffset: -1, Error: "boom"},
		}
		_ = json.NewEncoder(w).Encode(api.Topic{Mirror: "m", Topic: "orders", MirrorName: kip.FormatMirrorName("m", f.desired), DesiredState: f.desired, Partitions: ps})
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.ClientConfig{URL: srv.URL, Token: "t", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCreatePausedStartsThenPauses(t *testing.T) {
	fastPolling(t)
	fake := &commandWorker{}
	s := topicSchema(t)
	r := &MirrorTopicResource{data: &providerData{client: fake.client(t)}}
	planned := topicModel("paused", "recreate", nil)
	plan := tfsdk.Plan{Schema: s.Schema, Raw: rawValue(t, s, &planned)}
	resp := resource.CreateResponse{State: tfsdk.State{Schema: s.Schema, Raw: rawValue(t, s, nil)}}
	r.Create(context.Background(), resource.CreateRequest{Plan: plan, Config: tfsdk.Config{Schema: s.Schema, Raw: plan.Raw}}, &resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(messages(resp.Diagnostics))
	}
	if got := strings.Join(fake.commands, " "); got != "start:recreate pause:" {
		t.Fatalf("commands %q", got)
	}
	var got mirrorTopicResourceModel
	resp.State.Get(context.Background(), &got)
	if got.MirrorNameConfig.ValueString() != "m.paused" || got.State.ValueString() != "paused" || len(got.Partitions.Elements()) != 2 {
		t.Fatalf("state %+v", got)
	}
	// Both commands name the new resource's owner id, which the state keeps.
	if owner := got.OwnerID.ValueString(); len(owner) != 32 || strings.Join(fake.owners, ",") != owner+","+owner {
		t.Fatalf("owner_id %q, commands' owners %q", owner, fake.owners)
	}
}

func TestCreateTimeoutSavesTheStartedTopic(t *testing.T) {
	fastPolling(t)
	fake := &commandWorker{stuck: api.StatePreparing}
	s := topicSchema(t)
	r := &MirrorTopicResource{data: &providerData{client: fake.client(t)}}
	planned := topicModel("mirroring", "fail", nil)
	planned.Timeouts = timeoutsValue(t, "create", "200ms")
	plan := tfsdk.Plan{Schema: s.Schema, Raw: rawValue(t, s, &planned)}
	resp := resource.CreateResponse{State: tfsdk.State{Schema: s.Schema, Raw: rawValue(t, s, nil)}}
	start := time.Now()
	r.Create(context.Background(), resource.CreateRequest{Plan: plan, Config: tfsdk.Config{Schema: s.Schema, Raw: plan.Raw}}, &resp)
	if !resp.Diagnostics.HasError() || time.Since(start) > 10*time.Second {
		t.Fatalf("no error after %v", time.Since(start))
	}
	msg := messages(resp.Diagnostics)
	for _, want := range []string{"did not reach MIRRORING on every partition within 200ms", "partition 1: PREPARING", "error: boom"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// The topic was started, so the resource is saved (Terraform taints it).
	if resp.State.Raw.IsNull() {
		t.Fatal("the started topic was not saved")
	}
	var got mirrorTopicResourceModel
	resp.State.Get(context.Background(), &got)
	if got.ID.ValueString() != "m/orders" || len(got.Partitions.Elements()) != 2 {
		t.Fatalf("saved %+v", got)
	}
}

func TestUpdateCommands(t *testing.T) {
	fastPolling(t)
	for _, tc := range []struct {
		from, to, divergence, want string
	}{
		{"mirroring", "paused", "fail", "pause:"},
		{"paused", "mirroring", "fail", "resume:"},
		{"paused", "stopped", "fail", "stop:"},
		{"stopped", "mirroring", "recreate", "start:recreate"},
		{"mirroring", "mirroring", "recreate", ""}, // divergence only: nothing to tell the worker
	} {
		fake := &commandWorker{}
		s := topicSchema(t)
		r := &MirrorTopicResource{data: &providerData{client: fake.client(t)}}
		prior := topicModel(tc.from, "fail", partitions(kip.TargetState(tc.from), 0, 0))
		prior.OwnerID = types.StringValue("owner-1")
		planned := topicModel(tc.to, tc.divergence, nil)
		planned.OwnerID = prior.OwnerID
		if tc.from == tc.to {
			planned.Partitions = prior.Partitions // partitionsModifier
		}
		plan := tfsdk.Plan{Schema: s.Schema, Raw: rawValue(t, s, &planned)}
		req := resource.UpdateRequest{
			Plan: plan, Config: tfsdk.Config{Schema: s.Schema, Raw: plan.Raw},
			State: tfsdk.State{Schema: s.Schema, Raw: rawValue(t, s, &prior)},
		}
		resp := resource.UpdateResponse{State: req.State}
		r.Update(context.Background(), req, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatalf("%s → %s: %s", tc.from, tc.to, messages(resp.Diagnostics))
		}
		if got := strings.Join(fake.commands, " "); got != tc.want {
			t.Errorf("%s → %s: commands %q, want %q", tc.from, tc.to, got, tc.want)
		}
		if tc.want != "" && strings.Join(fake.owners, ",") != "owner-1" {
			t.Errorf("%s → %s: the command's owner is %q", tc.from, tc.to, fake.owners)
		}
		var got mirrorTopicResourceModel
		resp.State.Get(context.Background(), &got)
		if got.State.ValueString() != tc.to || got.Divergence.ValueString() != tc.divergence || got.Partitions.IsUnknown() {
			t.Errorf("%s → %s: saved %+v", tc.from, tc.to, got)
		}
	}
}

// TestDeleteReleases: a destroy stops the topic naming its owner and releasing it; a topic
// that another owner manages is not stopped, and the resource leaves the state with a
// warning at once.
func TestDeleteReleases(t *testing.T) {
	fastPolling(t)
	for _, refuse := range []string{"", api.CodeMirrorTopicOwnerMismatch} {
		fake := &commandWorker{refuse: refuse}
		s := topicSchema(t)
		r := &MirrorTopicResource{data: &providerData{client: fake.client(t)}}
		prior := topicModel("mirroring", "fail", partitions(api.StateMirroring, 0))
		prior.OwnerID = types.StringValue("owner-1")
		prior.Timeouts = timeoutsValue(t, "delete", "2s")
		req := resource.DeleteRequest{State: tfsdk.State{Schema: s.Schema, Raw: rawValue(t, s, &prior)}}
		resp := resource.DeleteResponse{State: req.State}
		start := time.Now()
		r.Delete(context.Background(), req, &resp)
		if resp.Diagnostics.HasError() || time.Since(start) > time.Second {
			t.Fatalf("refuse %q: after %v: %s", refuse, time.Since(start), messages(resp.Diagnostics))
		}
		if got := strings.Join(fake.owners, ","); got != "owner-1 release" {
			t.Errorf("refuse %q: owners %q", refuse, got)
		}
		w := messages(resp.Diagnostics)
		if mismatch := refuse != ""; mismatch != strings.Contains(w, `Topic "orders" not stopped: another resource manages it`) {
			t.Errorf("refuse %q: diagnostics:\n%s", refuse, w)
		}
	}
}

// timeoutsValue is a timeouts attribute with one timeout set.
func timeoutsValue(t *testing.T, name, value string) timeouts.Value {
	t.Helper()
	vals := map[string]attr.Value{"create": types.StringNull(), "update": types.StringNull(), "delete": types.StringNull()}
	vals[name] = types.StringValue(value)
	obj, d := types.ObjectValue(map[string]attr.Type{"create": types.StringType, "update": types.StringType, "delete": types.StringType}, vals)
	if d.HasError() {
		t.Fatal(d)
	}
	return timeouts.Value{Object: obj}
}
