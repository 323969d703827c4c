package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// The default timeouts of kafkamirror_mirror_topic. Reaching MIRRORING means PREPARING is
// over (destination topic created, starting point decided), not that the lag is 0, so the
// defaults need not cover copying a topic.
const (
	defaultCreateTimeout = 10 * time.Minute
	defaultUpdateTimeout = 10 * time.Minute
	defaultDeleteTimeout = 10 * time.Minute
)

var (
	_ resource.Resource                = &MirrorTopicResource{}
	_ resource.ResourceWithConfigure   = &MirrorTopicResource{}
	_ resource.ResourceWithImportState = &MirrorTopicResource{}
	_ resource.ResourceWithModifyPlan  = &MirrorTopicResource{}
)

// NewMirrorTopicResource is the kafkamirror_mirror_topic resource factory.
func NewMirrorTopicResource() resource.Resource {
	return &MirrorTopicResource{}
}

// MirrorTopicResource is kafkamirror_mirror_topic: one topic mirrored over a cluster mirror,
// with its desired state (the KIP's mirror.name topic config).
type MirrorTopicResource struct {
	data *providerData
}

func (r *MirrorTopicResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_mirror_topic"
}

func (r *MirrorTopicResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A topic mirrored over a cluster mirror: the destination topic is kept identical to the source topic, " +
			"offset for offset. `state` is the KIP-1279 `mirror.name` topic config: `mirroring`, `paused` or `stopped` " +
			"(failover: the destination topic becomes writable).\n\n" +
			"Create and every state change wait until all partitions reach the target state. Changes the KIP forbids " +
			"(`stopped` → `paused`) are rejected at plan time. Plans that fail a topic over (`state = \"stopped\"`, a destroy " +
			"or a replacement) carry a warning naming the partitions and the records of current lag that will not be " +
			"copied. **Destroying this resource stops mirroring (a failover); it never deletes the destination topic or its data.**",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "`<mirror_name>/<topic>`, also the import ID.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"mirror_name": schema.StringAttribute{
				MarkdownDescription: "Name of the cluster mirror (`kafkamirror_cluster_mirror`) the topic is mirrored over. Changing it " +
					"fails the topic over on the old mirror and starts it on the new one.",
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{mirrorNameValidator()},
			},
			"topic": schema.StringAttribute{
				MarkdownDescription: "Name of the topic, the same on the source and the destination. The worker creates the " +
					"destination topic (with the source's partition count and configs) if it does not exist. Changing it fails " +
					"the old topic over and starts the new one.",
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{topicNameValidator()},
			},
			"state": schema.StringAttribute{
				MarkdownDescription: "Desired state: `mirroring` (default), `paused` (no copying; the destination stays read-only) or " +
					"`stopped` (failover: mirroring ends, the destination becomes writable). `mirroring` ↔ `paused` and either " +
					"→ `stopped` are legal; `stopped` → `mirroring` restarts the topic (copying only what is new when the " +
					"destination has not diverged; a failback when the mirror points the other way); `stopped` → `paused` is " +
					"rejected at plan time. A new resource cannot start `stopped`.",
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(api.DesiredMirroring),
				Validators: []validator.String{
					stringvalidator.OneOf(desiredStates...),
				},
			},
			"divergence": schema.StringAttribute{
				MarkdownDescription: "What a start or restart does when the destination topic has records the source does not " +
					"(written there after a failover): `fail` (default: refuse, with the number of records that would be " +
					"discarded) or `recreate` (delete and recreate the destination topic, then mirror from scratch). " +
					"Changing it takes effect at the next start; it changes nothing on the worker by itself.",
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(api.DivergenceFail),
				Validators: []validator.String{
					stringvalidator.OneOf(api.DivergenceFail, api.DivergenceRecreate),
				},
			},
			"mirror_name_config": schema.StringAttribute{
				MarkdownDescription: "The KIP's `mirror.name` topic config value: `<mirror_name>`, `<mirror_name>.paused` or " +
					"`<mirror_name>.removed`, following `state`.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{mirrorNameConfigModifier{}},
			},
			"partitions": schema.ListNestedAttribute{
				MarkdownDescription: "Per-partition state, as the KIP's describe table shows it, at the last refresh. A partition " +
					"that FAILED is reported as a warning on refresh.",
				Computed:      true,
				PlanModifiers: []planmodifier.List{partitionsModifier{}},
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"partition": schema.Int64Attribute{
							MarkdownDescription: "Partition number.",
							Computed:            true,
						},
						"state": schema.StringAttribute{
							MarkdownDescription: "KIP-1279 partition state: `UNKNOWN`, `PREPARING`, `MIRRORING`, `PAUSING`, `PAUSED`, " +
								"`STOPPING`, `STOPPED` or `FAILED`.",
							Computed: true,
						},
						"source_offset": schema.Int64Attribute{
							MarkdownDescription: "The source partition's high watermark; -1 when the worker could not ask the source.",
							Computed:            true,
						},
						"destination_offset": schema.Int64Attribute{
							MarkdownDescription: "The destination partition's end offset; -1 when unknown.",
							Computed:            true,
						},
						"lag": schema.Int64Attribute{
							MarkdownDescription: "`source_offset - destination_offset`: records not copied yet; 0 when either is unknown.",
							Computed:            true,
						},
						"last_mirrored_offset": schema.Int64Attribute{
							MarkdownDescription: "The destination end offset recorded when the partition was last stopped (the point a " +
								"restart or failback continues from); -1 before the first stop.",
							Computed: true,
						},
						"error": schema.StringAttribute{
							MarkdownDescription: "Why the partition FAILED; empty otherwise.",
							Computed:            true,
						},
						"retry_attempt": schema.Int64Attribute{
							MarkdownDescription: "Automatic retries of a FAILED partition so far; -1 when the failure is not retried " +
								"and waits for the operator (apply restarts such partitions).",
							Computed: true,
						},
					},
				},
			},
			"timeouts": timeoutsAttribute(ctx),
		},
	}
}

// timeoutsAttribute is terraform-plugin-framework-timeouts' attribute, documented.
func timeoutsAttribute(ctx context.Context) schema.Attribute {
	a := timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true})
	if n, ok := a.(schema.SingleNestedAttribute); ok {
		n.MarkdownDescription = "How long create, update (a state change) and delete (a stop) wait for every partition to " +
			"reach the target state, as durations such as `\"30s\"` or `\"15m\"`. Each defaults to 10 minutes."
		return n
	}
	return a
}

func (r *MirrorTopicResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *MirrorTopicResource) client(diags interface{ AddError(string, string) }) *api.Client {
	if r.data == nil || r.data.client == nil {
		diags.AddError("kafkamirror provider not configured", notConfiguredDetail)
		return nil
	}
	return r.data.client
}

// ModifyPlan holds the plan-time checks that need more than one attribute or the worker:
// the KIP's transition rules, and the warnings of plans that change a topic's fate.
func (r *MirrorTopicResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	var client *api.Client
	if r.data != nil {
		client = r.data.client
	}
	var state *mirrorTopicResourceModel
	if !req.State.Raw.IsNull() {
		state = &mirrorTopicResourceModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	var plan *mirrorTopicResourceModel
	if !req.Plan.Raw.IsNull() {
		plan = &mirrorTopicResourceModel{}
		resp.Diagnostics.Append(req.Plan.Get(ctx, plan)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}

	switch {
	case plan == nil && state == nil:
		return
	case plan == nil: // destroy
		if state.State.ValueString() != api.DesiredStopped {
			ps, live := r.currentPartitions(ctx, client, state)
			summary, detail := failoverWarning(state.MirrorName.ValueString(), state.Topic.ValueString(),
				"Destroying this kafkamirror_mirror_topic", ps, live)
			resp.Diagnostics.AddWarning(summary, detail)
		}
		return
	case state == nil: // create
		r.planCreate(ctx, plan, resp)
		return
	}

	// Update, or replacement when mirror_name or topic changed.
	if !plan.MirrorName.Equal(state.MirrorName) || !plan.Topic.Equal(state.Topic) {
		if state.State.ValueString() != api.DesiredStopped {
			ps, live := r.currentPartitions(ctx, client, state)
			summary, detail := failoverWarning(state.MirrorName.ValueString(), state.Topic.ValueString(),
				"Replacing this kafkamirror_mirror_topic (mirror_name or topic changed)", ps, live)
			resp.Diagnostics.AddWarning(summary, detail)
		}
		if !plan.MirrorName.IsUnknown() && !plan.Topic.IsUnknown() && plan.State.ValueString() == api.DesiredStopped {
			resp.Diagnostics.AddAttributeError(path.Root("state"), "Cannot create a stopped mirror topic", createStoppedDetail)
		}
		return
	}
	if plan.State.IsUnknown() {
		return
	}
	from, to := state.State.ValueString(), plan.State.ValueString()
	statePartitions, diags := partitionsFromList(ctx, state.Partitions)
	resp.Diagnostics.Append(diags...)
	if p := transitionProblem(from, to, partitionStates(statePartitions)); p != "" {
		resp.Diagnostics.AddAttributeError(path.Root("state"), "Illegal mirror topic state change",
			fmt.Sprintf("Topic %q of cluster mirror %q cannot change state from %q to %q: %s.\n\nLegal changes from %q: %s.",
				plan.Topic.ValueString(), plan.MirrorName.ValueString(), from, to, p, from,
				strings.Join(legalTargets(from, partitionStates(statePartitions)), "; ")))
		return
	}
	mirror, topic := plan.MirrorName.ValueString(), plan.Topic.ValueString()
	switch {
	case from == to && to == api.DesiredMirroring:
		// Drift: partitions that FAILED with a failure the worker does not retry wait for
		// the operator. Apply restarts them (the KIP's StartMirrorTopics on a FAILED topic).
		var stuck []string
		for _, p := range statePartitions {
			if p.State == api.StateFailed && p.RetryAttempt < 0 {
				stuck = append(stuck, describePartition(p))
			}
		}
		if len(stuck) > 0 {
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("partitions"), types.ListUnknown(partitionObjectType))...)
			resp.Diagnostics.AddWarning(fmt.Sprintf("Apply restarts failed partitions of topic %q", topic),
				fmt.Sprintf("These partitions of topic %q (cluster mirror %q) FAILED with an error the worker does not retry:\n  %s\n\n"+
					"Applying this plan starts the topic again (KIP-1279 StartMirrorTopics), which restarts them. Fix the cause first, "+
					"or the restart fails the same way.", topic, mirror, strings.Join(stuck, "\n  ")))
			if plan.Divergence.ValueString() == api.DivergenceRecreate {
				summary, detail := recreateWarning(mirror, topic, statePartitions)
				resp.Diagnostics.AddWarning(summary, detail)
			}
		}
	case to == api.DesiredStopped:
		ps, live := r.currentPartitions(ctx, client, state)
		summary, detail := failoverWarning(mirror, topic, fmt.Sprintf("Changing state from %q to \"stopped\"", from), ps, live)
		resp.Diagnostics.AddWarning(summary, detail)
	case from == api.DesiredStopped && to == api.DesiredMirroring && plan.Divergence.ValueString() == api.DivergenceRecreate:
		ps, _ := r.currentPartitions(ctx, client, state)
		summary, detail := recreateWarning(mirror, topic, ps)
		resp.Diagnostics.AddWarning(summary, detail)
	}
}

const createStoppedDetail = "A new kafkamirror_mirror_topic cannot start in state \"stopped\": there is nothing to fail over. " +
	"Create it with state = \"mirroring\" (or \"paused\") and change the state later, or import a topic that is already " +
	"stopped: terraform import <address> <mirror_name>/<topic>."

// planCreate checks a new mirror topic at plan time.
func (r *MirrorTopicResource) planCreate(ctx context.Context, plan *mirrorTopicResourceModel, resp *resource.ModifyPlanResponse) {
	if plan.State.ValueString() == api.DesiredStopped {
		resp.Diagnostics.AddAttributeError(path.Root("state"), "Cannot create a stopped mirror topic", createStoppedDetail)
		return
	}
	if r.data == nil || r.data.destination == nil || plan.Topic.IsUnknown() || plan.Divergence.IsUnknown() {
		return
	}
	topic := plan.Topic.ValueString()
	dt, err := r.data.destination.describeTopic(ctx, topic)
	if err != nil {
		resp.Diagnostics.AddWarning("Plan-time destination check failed",
			fmt.Sprintf("The provider could not check destination topic %q with the provider's destination connection: %v. "+
				"The plan goes on without the check; the worker checks again when the topic starts.", topic, err))
		return
	}
	if !dt.exists || dt.records == 0 {
		return
	}
	detail := fmt.Sprintf("The destination cluster already has topic %q with %s in %d partitions. A first start needs an "+
		"empty destination topic, so this start succeeds only as a restart or failback whose last mirrored offsets match the "+
		"destination (then only records written since are copied).", topic, records(dt.records), dt.partitions)
	if plan.Divergence.ValueString() == api.DivergenceRecreate {
		detail += fmt.Sprintf(" Otherwise, with divergence = \"recreate\", the worker deletes and recreates the destination topic "+
			"and mirrors it from scratch: its %s are lost.", records(dt.records))
	} else {
		detail += " Otherwise the worker refuses the start (divergence = \"fail\") and the partitions report the records that would be discarded."
	}
	resp.Diagnostics.AddWarning(fmt.Sprintf("Destination topic %q is not empty", topic), detail)
}

// currentPartitions returns the topic's partitions, live from the worker when it can be
// asked (live = true), else as of the last refresh.
func (r *MirrorTopicResource) currentPartitions(ctx context.Context, client *api.Client, state *mirrorTopicResourceModel) (ps []api.Partition, live bool) {
	if client != nil {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		t, err := client.GetTopic(cctx, state.MirrorName.ValueString(), state.Topic.ValueString())
		if err == nil {
			return t.Partitions, true
		}
		tflog.Warn(ctx, "describing the mirror topic for the plan warning failed; using the last refresh", map[string]any{"error": err.Error()})
	}
	ps, _ = partitionsFromList(ctx, state.Partitions)
	return ps, false
}

func (r *MirrorTopicResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	client := r.client(&resp.Diagnostics)
	var plan mirrorTopicResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultCreateTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	mirror, topic, target := plan.MirrorName.ValueString(), plan.Topic.ValueString(), plan.State.ValueString()
	ctx = tflog.SetField(ctx, "mirror", mirror)
	ctx = tflog.SetField(ctx, "topic", topic)

	deadline := time.Now().Add(timeout)
	tflog.Debug(ctx, "starting mirror topic", map[string]any{"divergence": plan.Divergence.ValueString()})
	if !r.command(ctx, client, "start", mirror, topic, plan.Divergence.ValueString(), &resp.Diagnostics) {
		return
	}
	t, err := waitForPartitions(ctx, client, mirror, topic, api.StateMirroring, deadline, "create", timeout)
	if err == nil && target == api.DesiredPaused {
		if !r.command(ctx, client, "pause", mirror, topic, "", &resp.Diagnostics) {
			r.saveAfterFailure(ctx, &plan, t, &resp.State, &resp.Diagnostics)
			return
		}
		t, err = waitForPartitions(ctx, client, mirror, topic, api.StatePaused, deadline, "create", timeout)
	}
	if err != nil {
		// The topic was started: save it, so Terraform knows it exists (and taints it).
		resp.Diagnostics.AddError("Mirror topic did not reach its state", err.Error())
		r.saveAfterFailure(ctx, &plan, waitLast(err, t), &resp.State, &resp.Diagnostics)
		return
	}
	tflog.Info(ctx, "mirror topic started", map[string]any{"state": target, "partitions": len(t.Partitions)})
	plan.setFromTopic(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

// waitLast is the last description a failed wait saw.
func waitLast(err error, fallback *api.Topic) *api.Topic {
	var we *waitError
	if errors.As(err, &we) && we.Last != nil {
		return we.Last
	}
	return fallback
}

// stateSetter is the part of tfsdk.State saveAfterFailure needs.
type stateSetter interface {
	Set(context.Context, any) diag.Diagnostics
}

// saveAfterFailure saves what the worker last said about a topic whose command was
// accepted but whose wait failed.
func (r *MirrorTopicResource) saveAfterFailure(ctx context.Context, m *mirrorTopicResourceModel, t *api.Topic, st stateSetter, diags *diag.Diagnostics) {
	if t != nil {
		m.setFromTopic(t)
	} else {
		m.ID = types.StringValue(m.MirrorName.ValueString() + "/" + m.Topic.ValueString())
		m.MirrorNameConfig = types.StringValue(mirrorNameValue(m.MirrorName.ValueString(), m.State.ValueString()))
		m.Partitions = types.ListValueMust(partitionObjectType, nil)
	}
	diags.Append(st.Set(ctx, m)...)
}

// command sends one topic command and reports a refusal as an error diagnostic.
func (r *MirrorTopicResource) command(ctx context.Context, client *api.Client, action, mirror, topic, divergence string, diags *diag.Diagnostics) bool {
	var results []api.TopicResult
	var err error
	switch action {
	case "start":
		results, err = client.StartTopics(ctx, mirror, []string{topic}, divergence)
	case "stop":
		results, err = client.StopTopics(ctx, mirror, []string{topic})
	case "pause":
		results, err = client.PauseTopics(ctx, mirror, []string{topic})
	case "resume":
		results, err = client.ResumeTopics(ctx, mirror, []string{topic})
	}
	if err == nil {
		if len(results) != 1 {
			err = fmt.Errorf("the worker answered with %d results for one topic", len(results))
		} else {
			err = results[0].Err()
		}
	}
	if err == nil {
		tflog.Debug(ctx, "mirror topic command accepted", map[string]any{"action": action})
		return true
	}
	detail := fmt.Sprintf("The worker refused or failed to %s topic %q of cluster mirror %q: %v", action, topic, mirror, err)
	switch {
	case action == "start" && api.IsCode(err, api.CodeTopicAlreadyInClusterMirror):
		detail += fmt.Sprintf("\n\nIf the topic is already mirrored over %q outside Terraform, import it: terraform import <address> %s/%s", mirror, mirror, topic)
	case api.IsCode(err, api.CodeUnknownClusterMirror):
		detail += "\n\nCreate the cluster mirror first (kafkamirror_cluster_mirror), and refer to it so Terraform orders the two."
	}
	diags.AddError(fmt.Sprintf("Cannot %s mirror topic", action), detail)
	return false
}

func (r *MirrorTopicResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	client := r.client(&resp.Diagnostics)
	var state mirrorTopicResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	mirror, topic := state.MirrorName.ValueString(), state.Topic.ValueString()
	ctx = tflog.SetField(ctx, "mirror", mirror)
	ctx = tflog.SetField(ctx, "topic", topic)
	t, err := client.GetTopic(ctx, mirror, topic)
	if api.IsCode(err, api.CodeTopicNotInClusterMirror) || api.IsCode(err, api.CodeUnknownClusterMirror) {
		tflog.Warn(ctx, "topic is no longer in the cluster mirror; removing it from state", map[string]any{"error": err.Error()})
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read mirror topic",
			fmt.Sprintf("Describing topic %q of cluster mirror %q on the worker failed: %v", topic, mirror, err))
		return
	}
	if prior := state.State.ValueString(); prior != "" && prior != t.DesiredState {
		tflog.Warn(ctx, "mirror topic state changed outside Terraform", map[string]any{"state": prior, "worker_state": t.DesiredState})
	}
	for _, p := range t.Partitions {
		if p.State == api.StateFailed {
			resp.Diagnostics.AddWarning(fmt.Sprintf("Partition %d of mirror topic %q FAILED", p.Partition, topic),
				fmt.Sprintf("The worker reports topic %q of cluster mirror %q %s.", topic, mirror, describePartition(p)))
		}
	}
	state.setFromTopic(t)
	if state.Divergence.IsNull() {
		// Only an import leaves it unset: take the policy of the topic's last start.
		state.Divergence = types.StringValue(api.DivergenceFail)
		if t.Divergence != "" {
			state.Divergence = types.StringValue(t.Divergence)
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *MirrorTopicResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	client := r.client(&resp.Diagnostics)
	var plan, state mirrorTopicResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	deadline := time.Now().Add(timeout)
	mirror, topic := plan.MirrorName.ValueString(), plan.Topic.ValueString()
	from, to := state.State.ValueString(), plan.State.ValueString()
	ctx = tflog.SetField(ctx, "mirror", mirror)
	ctx = tflog.SetField(ctx, "topic", topic)

	var action, divergence string
	switch {
	case from == to && to == api.DesiredMirroring && plan.Partitions.IsUnknown():
		action, divergence = "start", plan.Divergence.ValueString() // restart FAILED partitions (see ModifyPlan)
	case from == to:
		// Only divergence or timeouts changed: nothing to tell the worker.
		plan.Partitions = state.Partitions
		plan.MirrorNameConfig = state.MirrorNameConfig
		resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
		return
	case to == api.DesiredStopped:
		action = "stop"
	case to == api.DesiredPaused:
		action = "pause"
	case from == api.DesiredPaused:
		action = "resume"
	default: // stopped → mirroring: restart, or failback
		action, divergence = "start", plan.Divergence.ValueString()
	}
	tflog.Debug(ctx, "changing mirror topic state", map[string]any{"from": from, "to": to, "action": action})
	if !r.command(ctx, client, action, mirror, topic, divergence, &resp.Diagnostics) {
		return
	}
	target := targetPartitionState(to)
	t, err := waitForPartitions(ctx, client, mirror, topic, target, deadline, "update", timeout)
	if err != nil {
		// The desired state did change on the worker: save it, with the partitions as
		// last seen, so the next plan starts from the truth.
		resp.Diagnostics.AddError("Mirror topic did not reach its state", err.Error())
		r.saveAfterFailure(ctx, &plan, waitLast(err, t), &resp.State, &resp.Diagnostics)
		return
	}
	tflog.Info(ctx, "mirror topic state changed", map[string]any{"from": from, "to": to})
	plan.setFromTopic(t)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *MirrorTopicResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	client := r.client(&resp.Diagnostics)
	var state mirrorTopicResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	deadline := time.Now().Add(timeout)
	mirror, topic := state.MirrorName.ValueString(), state.Topic.ValueString()
	ctx = tflog.SetField(ctx, "mirror", mirror)
	ctx = tflog.SetField(ctx, "topic", topic)

	// Destroy is a failover: stop, and keep the destination topic and its data.
	results, err := client.StopTopics(ctx, mirror, []string{topic})
	if err == nil && len(results) == 1 {
		err = results[0].Err()
	}
	switch {
	case err == nil:
	case api.IsCode(err, api.CodeMirrorTopicAlreadyStopped):
		tflog.Debug(ctx, "mirror topic already stopped")
	case api.IsCode(err, api.CodeTopicNotInClusterMirror), api.IsCode(err, api.CodeUnknownClusterMirror):
		tflog.Warn(ctx, "mirror topic is gone from the worker already", map[string]any{"error": err.Error()})
		return
	default:
		resp.Diagnostics.AddError("Cannot stop mirror topic",
			fmt.Sprintf("Destroying topic %q of cluster mirror %q stops its mirroring (a failover), and the worker refused or failed the stop: %v",
				topic, mirror, err))
		return
	}
	if _, err := waitForPartitions(ctx, client, mirror, topic, api.StateStopped, deadline, "delete", timeout); err != nil {
		resp.Diagnostics.AddError("Mirror topic did not stop", err.Error())
		return
	}
	tflog.Info(ctx, "mirror topic stopped (failover); the destination topic and its data are kept")
}

func (r *MirrorTopicResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	mirror, topic, ok := strings.Cut(req.ID, "/")
	var problem string
	switch {
	case !ok:
		problem = "it has no \"/\""
	case mirrorNameProblem(mirror) != "":
		problem = "the mirror name " + mirrorNameProblem(mirror)
	case topicNameProblem(topic) != "":
		problem = "the topic name " + topicNameProblem(topic)
	}
	if problem != "" {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of a kafkamirror_mirror_topic is <mirror_name>/<topic>, for example \"eu-to-us/orders\"; %q is not: %s.", req.ID, problem))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("mirror_name"), mirror)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("topic"), topic)...)
	// divergence stays unset: Read takes it from the worker (the policy of the last start).
}
