package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

var (
	_ planmodifier.String = mirrorNameConfigModifier{}
	_ planmodifier.List   = partitionsModifier{}
)

// mirrorNameConfigModifier plans mirror_name_config from mirror_name and state, so that a
// plan shows the KIP's mirror.name change ("m" → "m.paused") instead of "known after apply".
type mirrorNameConfigModifier struct{}

func (mirrorNameConfigModifier) Description(context.Context) string {
	return `Plans the mirror.name value from mirror_name and state: "<mirror_name>", "<mirror_name>.paused" or "<mirror_name>.removed".`
}

func (m mirrorNameConfigModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (mirrorNameConfigModifier) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var mirror, state types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("mirror_name"), &mirror)...)
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("state"), &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if mirror.IsUnknown() || state.IsUnknown() || mirror.IsNull() || state.IsNull() {
		resp.PlanValue = types.StringUnknown()
		return
	}
	resp.PlanValue = types.StringValue(kip.FormatMirrorName(mirror.ValueString(), state.ValueString()))
}

// partitionsModifier keeps the refreshed partitions in the plan while the desired state
// does not change, so a plan that only changes divergence or timeouts does not show every
// partition as "known after apply". A state change (or a create) leaves them unknown: the
// apply waits for new partition states.
type partitionsModifier struct{}

func (partitionsModifier) Description(context.Context) string {
	return "Keeps the partitions of the last refresh while the desired state does not change."
}

func (m partitionsModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (partitionsModifier) PlanModifyList(ctx context.Context, req planmodifier.ListRequest, resp *planmodifier.ListResponse) {
	if req.StateValue.IsNull() || req.Plan.Raw.IsNull() || !req.PlanValue.IsUnknown() {
		return
	}
	var planState, priorState types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("state"), &planState)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("state"), &priorState)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !planState.IsUnknown() && planState.Equal(priorState) {
		resp.PlanValue = req.StateValue
	}
}
