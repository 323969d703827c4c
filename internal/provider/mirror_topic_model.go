package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// mirrorTopicResourceModel is kafkamirror_mirror_topic.
type mirrorTopicResourceModel struct {
	ID               types.String   `tfsdk:"id"`
	MirrorName       types.String   `tfsdk:"mirror_name"`
	Topic            types.String   `tfsdk:"topic"`
	State            types.String   `tfsdk:"state"`
	Divergence       types.String   `tfsdk:"divergence"`
	MirrorNameConfig types.String   `tfsdk:"mirror_name_config"`
	Partitions       types.List     `tfsdk:"partitions"`
	OwnerID          types.String   `tfsdk:"owner_id"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
}

// partitionModel is one element of partitions: a line of the KIP's describe table.
type partitionModel struct {
	Partition          types.Int64  `tfsdk:"partition"`
	State              types.String `tfsdk:"state"`
	SourceOffset       types.Int64  `tfsdk:"source_offset"`
	DestinationOffset  types.Int64  `tfsdk:"destination_offset"`
	Lag                types.Int64  `tfsdk:"lag"`
	LastMirroredOffset types.Int64  `tfsdk:"last_mirrored_offset"`
	Error              types.String `tfsdk:"error"`
	RetryAttempt       types.Int64  `tfsdk:"retry_attempt"`
}

var partitionAttrTypes = map[string]attr.Type{
	"partition":            types.Int64Type,
	"state":                types.StringType,
	"source_offset":        types.Int64Type,
	"destination_offset":   types.Int64Type,
	"lag":                  types.Int64Type,
	"last_mirrored_offset": types.Int64Type,
	"error":                types.StringType,
	"retry_attempt":        types.Int64Type,
}

var partitionObjectType = types.ObjectType{AttrTypes: partitionAttrTypes}

// partitionsList is the worker's partitions as a Terraform list, in partition order.
func partitionsList(ps []api.Partition) types.List {
	vals := make([]attr.Value, len(ps))
	for i, p := range ps {
		vals[i] = types.ObjectValueMust(partitionAttrTypes, map[string]attr.Value{
			"partition":            types.Int64Value(int64(p.Partition)),
			"state":                types.StringValue(p.State),
			"source_offset":        types.Int64Value(p.SourceOffset),
			"destination_offset":   types.Int64Value(p.DestinationOffset),
			"lag":                  types.Int64Value(p.Lag),
			"last_mirrored_offset": types.Int64Value(p.LastMirroredOffset),
			"error":                types.StringValue(p.Error),
			"retry_attempt":        types.Int64Value(int64(p.RetryAttempt)),
		})
	}
	return types.ListValueMust(partitionObjectType, vals)
}

// partitionsFromList reads partitions back from state, for plan-time messages when the
// worker cannot be asked.
func partitionsFromList(ctx context.Context, l types.List) ([]api.Partition, diag.Diagnostics) {
	var diags diag.Diagnostics
	if l.IsNull() || l.IsUnknown() {
		return nil, diags
	}
	var ms []partitionModel
	diags.Append(l.ElementsAs(ctx, &ms, false)...)
	out := make([]api.Partition, len(ms))
	for i, m := range ms {
		out[i] = api.Partition{
			Partition: int32(m.Partition.ValueInt64()), State: m.State.ValueString(),
			SourceOffset: m.SourceOffset.ValueInt64(), DestinationOffset: m.DestinationOffset.ValueInt64(), Lag: m.Lag.ValueInt64(),
			LastMirroredOffset: m.LastMirroredOffset.ValueInt64(), LastMirroredEpoch: -1,
			Error: m.Error.ValueString(), RetryAttempt: int16(m.RetryAttempt.ValueInt64()),
		}
	}
	return out, diags
}

// setFromTopic fills the attributes the worker knows.
func (m *mirrorTopicResourceModel) setFromTopic(t *api.Topic) {
	m.ID = types.StringValue(t.Mirror + "/" + t.Topic)
	m.MirrorName = types.StringValue(t.Mirror)
	m.Topic = types.StringValue(t.Topic)
	m.State = types.StringValue(t.DesiredState)
	m.MirrorNameConfig = types.StringValue(t.MirrorName)
	m.Partitions = partitionsList(t.Partitions)
}

func partitionStates(ps []api.Partition) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.State
	}
	return out
}

// describePartition renders one partition for a message.
func describePartition(p api.Partition) string {
	var b strings.Builder
	fmt.Fprintf(&b, "partition %d: %s", p.Partition, p.State)
	if p.SourceOffset >= 0 && p.DestinationOffset >= 0 {
		fmt.Fprintf(&b, ", source offset %d, destination offset %d, lag %d", p.SourceOffset, p.DestinationOffset, p.Lag)
	}
	if p.State == api.StateFailed {
		switch {
		case p.RetryAttempt < 0:
			b.WriteString(", not retried: waits for the operator")
		case p.RetryAttempt > 0:
			fmt.Fprintf(&b, ", automatic retry %d", p.RetryAttempt)
		}
	}
	if p.Error != "" {
		fmt.Fprintf(&b, ", error: %s", p.Error)
	}
	return b.String()
}

func describePartitions(ps []api.Partition) string {
	if len(ps) == 0 {
		return "  (the worker lists no partitions)"
	}
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = "  " + describePartition(p)
	}
	return strings.Join(lines, "\n")
}

// failoverWarning is the plan warning of a change that stops a topic: state "stopped",
// a destroy, or a replacement. It names the partitions and how many records of current lag
// will not be copied.
func failoverWarning(mirror, topic, cause string, ps []api.Partition, live bool) (summary, detail string) {
	summary = fmt.Sprintf("Failover: topic %q stops mirroring from cluster mirror %q", topic, mirror)
	var b strings.Builder
	fmt.Fprintf(&b, "%s fails topic %q over (KIP-1279 StopMirrorTopics): the worker stops copying it from cluster mirror %q, "+
		"and the destination topic becomes writable. The destination topic and its records are kept.\n\n", cause, topic, mirror)
	var total int64
	var lagging []string
	unknown := 0
	for _, p := range ps {
		switch {
		case p.SourceOffset < 0 || p.DestinationOffset < 0:
			unknown++
			lagging = append(lagging, fmt.Sprintf("  partition %d (%s): lag unknown (the worker could not read both offsets)", p.Partition, p.State))
		case p.Lag > 0:
			total += p.Lag
			lagging = append(lagging, fmt.Sprintf("  partition %d (%s): %s of lag will not be copied (source offset %d, destination offset %d)",
				p.Partition, p.State, records(p.Lag), p.SourceOffset, p.DestinationOffset))
		}
	}
	when := "as of the last refresh"
	if live {
		when = "as of this plan"
	}
	switch {
	case len(ps) == 0:
		b.WriteString("The worker lists no partitions for the topic, so its lag is unknown.\n")
	case len(lagging) == 0:
		fmt.Fprintf(&b, "All %d partitions are caught up (lag 0 %s): nothing is lost if no records arrive before the apply.\n", len(ps), when)
	default:
		fmt.Fprintf(&b, "%s of current lag (%s) will not be copied", records(total), when)
		if unknown > 0 {
			fmt.Fprintf(&b, ", plus the unknown lag of %d partitions", unknown)
		}
		b.WriteString(":\n")
		b.WriteString(strings.Join(lagging, "\n"))
		b.WriteString("\n")
	}
	b.WriteString("\nPartitions: ")
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = fmt.Sprintf("%d (%s)", p.Partition, p.State)
	}
	b.WriteString(strings.Join(names, ", "))
	b.WriteString(".\n\nTo lose nothing, stop the producers on the source and apply once the plan shows lag 0 on every partition. " +
		"Restarting later (state = \"mirroring\") or failing back with a mirror in the other direction copies only the records written since.")
	return summary, b.String()
}

// recreateWarning is the plan warning of a restart with divergence = "recreate".
func recreateWarning(mirror, topic string, ps []api.Partition) (summary, detail string) {
	summary = fmt.Sprintf("Restart may recreate destination topic %q", topic)
	var written int64
	known := false
	for _, p := range ps {
		if p.LastMirroredOffset >= 0 && p.DestinationOffset >= 0 {
			known = true
			if p.DestinationOffset > p.LastMirroredOffset {
				written += p.DestinationOffset - p.LastMirroredOffset
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Topic %q restarts mirroring from cluster mirror %q with divergence = \"recreate\". If the destination topic has "+
		"records the source does not (written there since the failover), the worker deletes the destination topic, recreates it "+
		"and mirrors it from scratch: those records are lost.", topic, mirror)
	if known {
		fmt.Fprintf(&b, "\n\nThe destination now holds %s past the last mirrored offsets recorded at the failover.", records(written))
		if written > 0 {
			b.WriteString(" The destination topic will be recreated and those records discarded.")
		}
	}
	b.WriteString("\n\nWith divergence = \"fail\" (the default) the restart refuses instead and reports the number of records that would be discarded.")
	return summary, b.String()
}

// records renders a record count: "1 record", "12 records".
func records(n int64) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}
