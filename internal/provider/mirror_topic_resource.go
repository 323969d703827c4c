package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// The default timeouts of kafkamirror_mirror_topic. Reaching MIRRORING means PREPARING is
// over (destination topic created, starting point decided), not that the lag is 0, so the
// defaults need not cover copying a topic.
const (
	defaultCreateTimeout = 10 * time.Minute
	defaultUpdateTimeout = 10 * time.Minute
	defaultDeleteTimeout = 10 * time.Minute
	// defaultPromoteTimeout is promote_timeout's default, the worker's own.
	defaultPromoteTimeout = time.Minute
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
			"(the destination topic becomes writable).\n\n" +
			"Create and every state change wait until all partitions reach the target state. Changes the KIP forbids " +
			"(`stopped` → `paused`) are rejected at plan time. Plans that stop a topic (`state = \"stopped\"`, a destroy " +
			"or a replacement) carry a warning naming the stop mode, the partitions and their current lag. Every stop runs as " +
			"`stop_mode` says: `failover` (default, at once) or `promote` (after lag 0 and a final consumer group offset " +
			"sync, or not at all). **Destroying this resource stops mirroring; it never deletes the destination topic or its data.**\n\n" +
			"The worker records which resource manages a topic (`owner_id`): rename a resource or a `for_each` key with a " +
			"`moved` block, never by creating the new address next to the old one (the plan refuses that).",
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
					"`stopped` (mirroring ends as `stop_mode` says, the destination becomes writable). `mirroring` ↔ `paused` and either " +
					"→ `stopped` are legal; `stopped` → `mirroring` restarts the topic (copying only what is new when the " +
					"destination has not diverged; a failback when the mirror points the other way); `stopped` → `paused` is " +
					"rejected at plan time. A new resource cannot start `stopped`.",
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(api.DesiredMirroring),
				Validators: []validator.String{
					stringvalidator.OneOf(kip.DesiredStates...),
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
			"stop_mode": schema.StringAttribute{
				MarkdownDescription: "How every stop this resource makes runs: `state = \"stopped\"`, and a destroy or a replacement " +
					"(which use the value in the state, so a change takes effect once an apply has saved it). The plan's warning " +
					"of a stop names the mode.\n\n" +
					"  - `failover` (default; what Confluent's provider calls `FAILED_OVER`): stop at once, whatever the lag. " +
					"Records not copied yet stay behind on the source. The worker then attempts a final consumer group offset " +
					"sync, bounded so that it never holds the stop up; when it does not succeed, the apply warns that the " +
					"groups' offsets on the destination may be behind. For a source that is gone or must not be waited for.\n" +
					"  - `promote` (Confluent's `PROMOTED`; the KIP's planned migration): wait, up to `promote_timeout`, until " +
					"every partition is `MIRRORING` with lag 0 and a final consumer group offset sync has succeeded, then stop. " +
					"Nothing is lost, and a consumer group that committed on the source continues on the destination at exactly " +
					"the next record. When that cannot finish (the source is unreachable, a partition is not `MIRRORING`, for " +
					"example a paused topic, or producers keep the lag above 0), nothing is stopped: the apply fails with the " +
					"worker's reason per partition and the state stays as it was.\n\n" +
					"Changing only `stop_mode` changes nothing on the worker.",
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(api.StopFailover),
				Validators: []validator.String{
					stringvalidator.OneOf(api.StopFailover, api.StopPromote),
				},
			},
			"promote_timeout": schema.StringAttribute{
				MarkdownDescription: fmt.Sprintf("How long a stop with `stop_mode = \"promote\"` waits for lag 0 on every partition "+
					"and the final group offset sync, a Go duration such as `\"30s\"` or `\"2m\"`, %s. Default `%s`. When the "+
					"wait ends first, nothing is stopped and the apply fails. Unused by `failover`. It counts within the "+
					"`timeouts` of the update or delete that stops the topic.", api.PromoteTimeoutRange, api.FormatDuration(defaultPromoteTimeout)),
				Optional:   true,
				Computed:   true,
				Default:    stringdefault.StaticString(api.FormatDuration(defaultPromoteTimeout)),
				Validators: []validator.String{durationValidator{api.PromoteTimeoutRange}},
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
							MarkdownDescription: "The destination end offset recorded when the partition was last stopped, for the " +
								"record (a restart or failback continues from wherever the destination ends); -1 before the first stop.",
							Computed: true,
						},
						"error": schema.StringAttribute{
							MarkdownDescription: "Why the partition FAILED, or why a MIRRORING partition is stalled (`stalled: source " +
								"unreachable, mirroring sessions failing for 45s: …`: it has not reached a cluster for the worker's " +
								"`stall_after`, 30 s by default, and catches up by itself once the cluster answers); empty otherwise.",
							Computed: true,
						},
						"source_offset_at": schema.StringAttribute{
							MarkdownDescription: "When the worker read `source_offset` (RFC 3339). At the last refresh when the source " +
								"answered it; earlier when the source is in `unreachable`. Empty when never read.",
							Computed: true,
						},
						"destination_offset_at": schema.StringAttribute{
							MarkdownDescription: "When the worker read `destination_offset` (RFC 3339), as `source_offset_at`.",
							Computed:            true,
						},
						"unreachable": schema.ListAttribute{
							MarkdownDescription: "The clusters, `source` and `destination`, that did not answer the worker within 3 s at " +
								"the last refresh: their offsets are the last known ones, from `source_offset_at` and " +
								"`destination_offset_at`. Empty when both answered.",
							ElementType: types.StringType,
							Computed:    true,
						},
						"retry_attempt": schema.Int64Attribute{
							MarkdownDescription: "Automatic retries of a FAILED partition so far; -1 when the failure is not retried " +
								"and waits for the operator (apply restarts such partitions).",
							Computed: true,
						},
					},
				},
			},
			"owner_id": schema.StringAttribute{
				MarkdownDescription: "Identifies this resource to the worker, which records it as the topic's owner. A create for " +
					"a topic that another resource owns fails at plan time, pointing at `moved` blocks (renaming a resource or " +
					"a `for_each` key without one would otherwise create the new address and destroy the old one for the same " +
					"topic); the worker refuses commands from another owner, and a destroy never stops a topic that another " +
					"resource owns by then. An import takes the owner the worker records.",
				Computed:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"timeouts": timeoutsAttribute(),
		},
	}
}

// timeoutParts are the operations of timeouts, each with its default.
var timeoutParts = map[string]time.Duration{"create": defaultCreateTimeout, "update": defaultUpdateTimeout, "delete": defaultDeleteTimeout}

// timeoutsAttribute is terraform-plugin-framework-timeouts' value as an attribute whose
// parts default to 10 minutes. The defaults are kept in the state, and an import records
// them too: a configuration giving the default timeouts (or none) plans no change after an
// import, which a null value in the state would show as one.
func timeoutsAttribute() schema.Attribute {
	attrs := map[string]schema.Attribute{}
	attrTypes := map[string]attr.Type{}
	for op, d := range timeoutParts {
		desc := fmt.Sprintf("How long the %s waits, a Go duration such as `\"30s\"` or `\"2h45m\"`. Default `%s`.", op, api.FormatDuration(d))
		if op == "delete" {
			desc += " A destroy uses the value in the state: a change takes effect once an apply has saved it."
		}
		attrs[op] = schema.StringAttribute{
			MarkdownDescription: desc,
			Optional:            true,
			Computed:            true,
			Default:             stringdefault.StaticString(api.FormatDuration(d)),
		}
		attrTypes[op] = types.StringType
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: "How long create, update (a state change) and delete (a stop) wait for every partition to " +
			"reach the target state. Each defaults to 10 minutes.",
		Optional:   true,
		Computed:   true,
		CustomType: timeouts.Type{ObjectType: types.ObjectType{AttrTypes: attrTypes}},
		Default:    objectdefault.StaticValue(withDefaultTimeouts(timeouts.Value{}).Object),
		Attributes: attrs,
	}
}

// withDefaultTimeouts fills the parts v leaves unset with their defaults.
func withDefaultTimeouts(v timeouts.Value) timeouts.Value {
	vals := map[string]attr.Value{}
	attrTypes := map[string]attr.Type{}
	for op, d := range timeoutParts {
		vals[op], attrTypes[op] = types.StringValue(api.FormatDuration(d)), types.StringType
		if !v.IsNull() && !v.IsUnknown() {
			if s, ok := v.Attributes()[op].(types.String); ok && !s.IsNull() && !s.IsUnknown() {
				vals[op] = s
			}
		}
	}
	return timeouts.Value{Object: types.ObjectValueMust(attrTypes, vals)}
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
			r.stopWarning(ctx, client, state, stopSettingsOf(state), "Destroying this kafkamirror_mirror_topic", &resp.Diagnostics)
		}
		return
	case state == nil: // create
		r.planCreate(ctx, client, plan, resp)
		return
	}

	// Update, or replacement when mirror_name or topic changed.
	if !plan.MirrorName.Equal(state.MirrorName) || !plan.Topic.Equal(state.Topic) {
		if state.State.ValueString() != api.DesiredStopped {
			r.stopWarning(ctx, client, state, stopSettingsOf(state), "Replacing this kafkamirror_mirror_topic (mirror_name or topic changed)", &resp.Diagnostics)
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
	if p := kip.ChangeProblem(from, to, partitionStates(statePartitions)); p != "" {
		resp.Diagnostics.AddAttributeError(path.Root("state"), "Illegal mirror topic state change",
			fmt.Sprintf("Topic %q of cluster mirror %q cannot change state from %q to %q: %s.\n\nLegal changes from %q: %s.",
				plan.Topic.ValueString(), plan.MirrorName.ValueString(), from, to, p, from,
				strings.Join(kip.LegalChanges(from, partitionStates(statePartitions)), "; ")))
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
		if len(stuck) > 0 && sourceTopicGone(ctx, client, mirror, topic) {
			// A restart would fail the same way: say what is left to do instead.
			resp.Diagnostics.AddWarning(fmt.Sprintf("Source topic %q no longer exists", topic),
				fmt.Sprintf("Topic %q is gone from the source cluster of cluster mirror %q, so its partitions FAILED and "+
					"nothing more can be copied:\n  %s\n\nThe destination topic keeps its records. Fail it over with "+
					"state = \"stopped\", or remove this resource (a destroy is a failover too).",
					topic, mirror, strings.Join(stuck, "\n  ")))
			return
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
	case from != to && to == api.DesiredStopped:
		if plan.StopMode.IsUnknown() || plan.PromoteTimeout.IsUnknown() {
			resp.Diagnostics.AddWarning(fmt.Sprintf("Topic %q stops with a stop_mode known only at apply", topic),
				fmt.Sprintf("Changing state from %q to \"stopped\" stops topic %q of cluster mirror %q, as stop_mode and "+
					"promote_timeout say; they are not known until apply, so this plan cannot tell whether the stop waits for "+
					"lag 0 (promote) or happens at once (failover).", from, topic, mirror))
			break
		}
		r.stopWarning(ctx, client, state, stopSettingsOf(plan), fmt.Sprintf("Changing state from %q to \"stopped\"", from), &resp.Diagnostics)
	case from == api.DesiredStopped && to == api.DesiredMirroring && plan.Divergence.ValueString() == api.DivergenceRecreate:
		ps, _ := r.currentPartitions(ctx, client, state)
		summary, detail := recreateWarning(mirror, topic, ps)
		resp.Diagnostics.AddWarning(summary, detail)
	}
}

const createStoppedDetail = "A new kafkamirror_mirror_topic cannot start in state \"stopped\": there is nothing to fail over. " +
	"Create it with state = \"mirroring\" (or \"paused\") and change the state later, or import a topic that is already " +
	"stopped: terraform import <address> <mirror_name>/<topic>."

// planCreate checks a new mirror topic at plan time: no other resource may manage the
// topic, and the source and destination topics should be fit to start.
func (r *MirrorTopicResource) planCreate(ctx context.Context, client *api.Client, plan *mirrorTopicResourceModel, resp *resource.ModifyPlanResponse) {
	if plan.State.ValueString() == api.DesiredStopped {
		resp.Diagnostics.AddAttributeError(path.Root("state"), "Cannot create a stopped mirror topic", createStoppedDetail)
		return
	}
	if client != nil && !plan.MirrorName.IsUnknown() && !plan.Topic.IsUnknown() {
		r.planClaim(ctx, client, plan.MirrorName.ValueString(), plan.Topic.ValueString(), &resp.Diagnostics)
		if resp.Diagnostics.HasError() {
			return
		}
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
	if !dt.Exists || dt.Records == 0 {
		return
	}
	detail := fmt.Sprintf("The destination cluster already has topic %q with %s in %d partitions. A first start needs an "+
		"empty destination topic, so this start succeeds only as a restart or failback whose last mirrored offsets match the "+
		"destination (then only records written since are copied).", topic, records(dt.Records), dt.Partitions)
	if plan.Divergence.ValueString() == api.DivergenceRecreate {
		detail += fmt.Sprintf(" Otherwise, with divergence = \"recreate\", the worker deletes and recreates the destination topic "+
			"and mirrors it from scratch: its %s are lost.", records(dt.Records))
	} else {
		detail += " Otherwise the worker refuses the start (divergence = \"fail\") and the partitions report the records that would be discarded."
	}
	resp.Diagnostics.AddWarning(fmt.Sprintf("Destination topic %q is not empty", topic), detail)
}

// planClaim refuses, at plan time, a new resource for a topic that another resource owns
// or that mirrors already: two resources would undo each other, and which one wins would
// depend on the order Terraform happens to run them in.
func (r *MirrorTopicResource) planClaim(ctx context.Context, client *api.Client, mirror, topic string, diags *diag.Diagnostics) {
	t, err := liveTopic(ctx, client, mirror, topic)
	switch {
	case api.IsCode(err, api.CodeTopicNotInClusterMirror), api.IsCode(err, api.CodeUnknownClusterMirror):
		if err := sourceTopicMissing(ctx, client, mirror, topic); err != "" {
			diags.AddAttributeWarning(path.Root("topic"), fmt.Sprintf("Source topic %q does not exist", topic), err)
		}
		return
	case err != nil:
		tflog.Warn(ctx, "describing the topic for the plan-time owner check failed; the worker checks at apply", map[string]any{"error": err.Error()})
		return
	case t.Owner != "":
		diags.AddAttributeError(path.Root("topic"), "Mirror topic managed by another resource",
			fmt.Sprintf("Topic %q of cluster mirror %q is already managed by another kafkamirror_mirror_topic: the worker records "+
				"it as owned by %s (that resource's owner_id). Two resources for one topic would undo each other.\n\n"+
				"If you renamed the resource or changed its for_each key, tell Terraform with a moved block, which keeps the "+
				"topic and its owner:\n\n  moved {\n    from = <old address>\n    to   = <new address>\n  }\n\n"+
				"To hand the topic to this resource on purpose, remove the other one from the state (terraform state rm "+
				"<old address>) and import the topic here: terraform import <address> %s/%s", topic, mirror, t.Owner, mirror, topic))
	case t.DesiredState != api.DesiredStopped:
		diags.AddAttributeError(path.Root("topic"), "Mirror topic already mirrored",
			fmt.Sprintf("Topic %q is already %s in cluster mirror %q, started outside Terraform. To manage it with this "+
				"resource, import it: terraform import <address> %s/%s", topic, t.DesiredState, mirror, mirror, topic))
	}
}

// liveTopic describes the topic on the worker within a plan's patience.
func liveTopic(ctx context.Context, client *api.Client, mirror, topic string) (*api.Topic, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return client.GetTopic(cctx, mirror, topic)
}

// sourceTopicMissing says why a topic about to start is not on its mirror's source, or
// returns "" when it is there (or the worker cannot tell).
func sourceTopicMissing(ctx context.Context, client *api.Client, mirror, topic string) string {
	if !sourceTopicGone(ctx, client, mirror, topic) {
		return ""
	}
	return fmt.Sprintf("Cluster mirror %q's source has no topic %q now, so starting it fails unless the topic is created "+
		"on the source before this apply reaches it.", mirror, topic)
}

// sourceTopicGone reports whether the mirror's source lists no such topic; false when the
// worker cannot list it (the source is down, the mirror does not exist yet).
func sourceTopicGone(ctx context.Context, client *api.Client, mirror, topic string) bool {
	if client == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	names, err := client.SourceTopics(cctx, mirror, "^"+regexp.QuoteMeta(topic)+"$")
	return err == nil && len(names) == 0
}

// stopWarning is the warning of a plan that stops the topic: a failover, with the
// partitions and the lag that will not be copied; or, when another resource owns the topic
// by now, that nothing will be stopped.
func (r *MirrorTopicResource) stopWarning(ctx context.Context, client *api.Client, state *mirrorTopicResourceModel, stop stopSettings, cause string, diags *diag.Diagnostics) {
	mirror, topic := state.MirrorName.ValueString(), state.Topic.ValueString()
	t := describeForPlan(ctx, client, state)
	if t != nil && ownedElsewhere(t.Owner, state.OwnerID.ValueString()) {
		diags.AddWarning(fmt.Sprintf("Topic %q is managed by another resource", topic),
			fmt.Sprintf("%s does not stop topic %q of cluster mirror %q: the worker records it as owned by %s, not by this "+
				"resource (owner_id %q). A destroy only removes this resource from the state; a change of state is refused.",
				cause, topic, mirror, t.Owner, state.OwnerID.ValueString()))
		return
	}
	ps, live := lastPartitions(ctx, t, state)
	summary, detail := failoverWarning(mirror, topic, cause, stop, ps, live)
	if sourceTopicGone(ctx, client, mirror, topic) {
		detail += fmt.Sprintf("\n\nTopic %q no longer exists on the source cluster: nothing more could be copied anyway.", topic)
	}
	diags.AddWarning(summary, detail)
}

// ownedElsewhere reports whether a topic recorded with owner belongs to another resource
// than the one whose owner_id is mine.
func ownedElsewhere(owner, mine string) bool {
	return owner != "" && owner != mine
}

// lastPartitions is the live description's partitions (live = true), else the last
// refresh's.
func lastPartitions(ctx context.Context, t *api.Topic, state *mirrorTopicResourceModel) (ps []api.Partition, live bool) {
	if t != nil {
		return t.Partitions, true
	}
	ps, _ = partitionsFromList(ctx, state.Partitions)
	return ps, false
}

// describeForPlan describes the topic live for a plan's message; nil when the worker
// cannot be asked, and the message then uses the last refresh.
func describeForPlan(ctx context.Context, client *api.Client, state *mirrorTopicResourceModel) *api.Topic {
	if client == nil {
		return nil
	}
	t, err := liveTopic(ctx, client, state.MirrorName.ValueString(), state.Topic.ValueString())
	if err != nil {
		tflog.Warn(ctx, "describing the mirror topic for the plan warning failed; using the last refresh", map[string]any{"error": err.Error()})
		return nil
	}
	return t
}

// currentPartitions returns the topic's partitions, live from the worker when it can be
// asked (live = true), else as of the last refresh.
func (r *MirrorTopicResource) currentPartitions(ctx context.Context, client *api.Client, state *mirrorTopicResourceModel) (ps []api.Partition, live bool) {
	return lastPartitions(ctx, describeForPlan(ctx, client, state), state)
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
	owner, err := newOwnerID()
	if err != nil {
		resp.Diagnostics.AddError("Cannot create mirror topic", "Generating the owner id failed: "+err.Error())
		return
	}
	plan.OwnerID = types.StringValue(owner)
	tflog.Debug(ctx, "starting mirror topic", map[string]any{"divergence": plan.Divergence.ValueString(), "owner_id": owner})
	if _, ok := r.command(ctx, client, api.ActionStart, mirror, topic, api.TopicsRequest{Divergence: plan.Divergence.ValueString(), Owner: owner}, &resp.Diagnostics); !ok {
		return
	}
	t, err := waitForPartitions(ctx, client, mirror, topic, api.StateMirroring, deadline, "create", timeout)
	if err == nil && target == api.DesiredPaused {
		if _, ok := r.command(ctx, client, api.ActionPause, mirror, topic, api.TopicsRequest{Owner: owner}, &resp.Diagnostics); !ok {
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
		m.MirrorNameConfig = types.StringValue(kip.FormatMirrorName(m.MirrorName.ValueString(), m.State.ValueString()))
		m.Partitions = types.ListValueMust(partitionObjectType, nil)
	}
	diags.Append(st.Set(ctx, m)...)
}

// newOwnerID is a new resource's owner id: 128 random bits.
func newOwnerID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// topicCommand sends one topic command (req without its topics) and returns the topic's
// result, its failure as the error.
func topicCommand(ctx context.Context, client *api.Client, action, mirror, topic string, req api.TopicsRequest) (api.TopicResult, error) {
	req.Topics = []string{topic}
	results, err := client.TopicCommand(ctx, mirror, action, req)
	switch {
	case err != nil:
		return api.TopicResult{Topic: topic}, err
	case len(results) != 1:
		return api.TopicResult{Topic: topic}, fmt.Errorf("the worker answered with %d results for one topic", len(results))
	}
	return results[0], results[0].Err()
}

// command sends one topic command and reports a refusal as an error diagnostic.
func (r *MirrorTopicResource) command(ctx context.Context, client *api.Client, action, mirror, topic string, req api.TopicsRequest, diags *diag.Diagnostics) (api.TopicResult, bool) {
	res, err := topicCommand(ctx, client, action, mirror, topic, req)
	if err == nil {
		tflog.Debug(ctx, "mirror topic command accepted", map[string]any{"action": action, "mode": req.Mode, "final_sync": res.FinalSync})
		return res, true
	}
	if summary, detail, ok := promoteRefused(mirror, topic, req, err); ok {
		tflog.Warn(ctx, "promote refused; nothing was stopped", map[string]any{"error": err.Error()})
		diags.AddError(summary, detail)
		return res, false
	}
	detail := fmt.Sprintf("The worker refused or failed to %s topic %q of cluster mirror %q: %v", action, topic, mirror, err)
	switch {
	case api.IsCode(err, api.CodeMirrorTopicOwnerMismatch):
		detail += "\n\nAnother kafkamirror_mirror_topic manages this topic. If you renamed a resource or a for_each key, " +
			"add a moved block from the old address to the new one instead of creating a second resource."
	case action == api.ActionStart && api.IsCode(err, api.CodeTopicAlreadyInClusterMirror):
		detail += fmt.Sprintf("\n\nIf the topic is already mirrored over %q outside Terraform, import it: terraform import <address> %s/%s", mirror, mirror, topic)
	case api.IsCode(err, api.CodeUnknownClusterMirror):
		detail += "\n\nCreate the cluster mirror first (kafkamirror_cluster_mirror), and refer to it so Terraform orders the two."
	}
	diags.AddError(fmt.Sprintf("Cannot %s mirror topic", action), detail)
	return res, false
}

// promoteRefused is the error of a promote the worker could not finish, when err is one:
// nothing was stopped, and the worker's message says why per partition.
func promoteRefused(mirror, topic string, req api.TopicsRequest, err error) (summary, detail string, ok bool) {
	if req.Mode != api.StopPromote || api.IsCode(err, api.CodeMirrorTopicOwnerMismatch) ||
		api.IsCode(err, api.CodeTopicNotInClusterMirror) || api.IsCode(err, api.CodeUnknownClusterMirror) ||
		api.IsCode(err, api.CodeMirrorTopicAlreadyStopped) {
		return "", "", false
	}
	summary = fmt.Sprintf("Cannot promote mirror topic %q: nothing was stopped", topic)
	detail = fmt.Sprintf("Promoting topic %q of cluster mirror %q (stop_mode = \"promote\", promote_timeout = %q) needs every "+
		"partition MIRRORING with lag 0 and a final consumer group offset sync; the worker could not finish that, so it "+
		"stopped nothing and the topic keeps its state. The worker says: %v\n\n"+
		"Stop or slow the producers on the source so the lag drains within promote_timeout, resume a paused topic, or "+
		"make sure the worker reaches the source; then apply again. To stop at once and leave the lag behind, use "+
		"stop_mode = \"failover\".", topic, mirror, req.PromoteTimeout, err)
	return summary, detail, true
}

// warnFinalSync reports a stop whose final consumer group offset sync did not succeed.
func warnFinalSync(ctx context.Context, mirror, topic string, stop stopSettings, res api.TopicResult, diags *diag.Diagnostics) {
	tflog.Info(ctx, "mirror topic stopped", map[string]any{"mode": stop.mode, "final_sync": res.FinalSync})
	if summary, detail := finalSyncWarning(mirror, topic, stop, res.FinalSync); summary != "" {
		diags.AddWarning(summary, detail)
	}
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
	if state.OwnerID.IsNull() {
		// An import (or a state from before owners): become the topic's recorded owner, or,
		// for a topic nobody owns, a new one, which the worker records at the first command.
		owner := t.Owner
		if owner == "" {
			if owner, err = newOwnerID(); err != nil {
				resp.Diagnostics.AddError("Cannot read mirror topic", "Generating the owner id failed: "+err.Error())
				return
			}
		}
		state.OwnerID = types.StringValue(owner)
	}
	state.Timeouts = withDefaultTimeouts(state.Timeouts)
	// An import (or a state from before these attributes) takes the defaults, as the
	// configuration's omitted attributes do, so it plans clean.
	stop := stopSettingsOf(&state)
	state.StopMode, state.PromoteTimeout = types.StringValue(stop.mode), types.StringValue(stop.promoteTimeout)
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

	if from == to && (to != api.DesiredMirroring || !plan.Partitions.IsUnknown()) {
		// Only divergence, stop_mode, promote_timeout or timeouts changed: nothing to tell
		// the worker. Mirroring → mirroring with unknown partitions restarts FAILED
		// partitions (see ModifyPlan).
		plan.Partitions = state.Partitions
		plan.MirrorNameConfig = state.MirrorNameConfig
		resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
		return
	}
	cmd := api.TopicsRequest{Owner: plan.OwnerID.ValueString()}
	action := kip.Command(from, to)
	switch action {
	case api.ActionStop:
		cmd = stopSettingsOf(&plan).request(plan.OwnerID.ValueString(), false)
	case api.ActionStart: // a restart of a stopped topic (or failback), or of FAILED partitions
		cmd.Divergence = plan.Divergence.ValueString()
	}
	tflog.Debug(ctx, "changing mirror topic state", map[string]any{"from": from, "to": to, "action": action, "mode": cmd.Mode})
	res, ok := r.command(ctx, client, action, mirror, topic, cmd, &resp.Diagnostics)
	if !ok {
		return // the prior state stays: a refused command changed nothing
	}
	if action == api.ActionStop {
		warnFinalSync(ctx, mirror, topic, stopSettingsOf(&plan), res, &resp.Diagnostics)
	}
	target := kip.TargetState(to)
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

	// Destroy is a failover: stop, and keep the destination topic and its data. The release
	// hands the topic back, so another resource may start it later; a topic that another
	// resource owns by now is not stopped.
	stop := stopSettingsOf(&state)
	stopReq := stop.request(state.OwnerID.ValueString(), true)
	ctx = tflog.SetField(ctx, "stop_mode", stop.mode)
	res, err := topicCommand(ctx, client, api.ActionStop, mirror, topic, stopReq)
	if summary, detail, ok := promoteRefused(mirror, topic, stopReq, err); err != nil && ok {
		resp.Diagnostics.AddError(summary, detail+"\n\nThis resource stays in the state until a destroy stops the topic.")
		return
	}
	switch {
	case err == nil:
		warnFinalSync(ctx, mirror, topic, stop, res, &resp.Diagnostics)
	case api.IsCode(err, api.CodeMirrorTopicOwnerMismatch):
		resp.Diagnostics.AddWarning(fmt.Sprintf("Topic %q not stopped: another resource manages it", topic),
			fmt.Sprintf("This kafkamirror_mirror_topic is removed from the state, and topic %q of cluster mirror %q keeps its state: %v",
				topic, mirror, err))
		return
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
	tflog.Info(ctx, "mirror topic stopped; the destination topic and its data are kept")
}

func (r *MirrorTopicResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	mirror, topic, ok := strings.Cut(req.ID, "/")
	var problem string
	switch {
	case !ok:
		problem = "it has no \"/\""
	case kip.MirrorNameProblem(mirror) != "":
		problem = "the mirror name " + kip.MirrorNameProblem(mirror)
	case kip.TopicNameProblem(topic) != "":
		problem = "the topic name " + kip.TopicNameProblem(topic)
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
