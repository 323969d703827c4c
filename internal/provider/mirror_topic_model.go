package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

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
	StopMode         types.String   `tfsdk:"stop_mode"`
	PromoteTimeout   types.String   `tfsdk:"promote_timeout"`
	MirrorNameConfig types.String   `tfsdk:"mirror_name_config"`
	Partitions       types.List     `tfsdk:"partitions"`
	OwnerID          types.String   `tfsdk:"owner_id"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
}

// partitionModel is one element of partitions: a line of the KIP's describe table.
type partitionModel struct {
	Partition           types.Int64  `tfsdk:"partition"`
	State               types.String `tfsdk:"state"`
	SourceOffset        types.Int64  `tfsdk:"source_offset"`
	DestinationOffset   types.Int64  `tfsdk:"destination_offset"`
	Lag                 types.Int64  `tfsdk:"lag"`
	LastMirroredOffset  types.Int64  `tfsdk:"last_mirrored_offset"`
	Error               types.String `tfsdk:"error"`
	RetryAttempt        types.Int64  `tfsdk:"retry_attempt"`
	SourceOffsetAt      types.String `tfsdk:"source_offset_at"`
	DestinationOffsetAt types.String `tfsdk:"destination_offset_at"`
	Unreachable         types.List   `tfsdk:"unreachable"`
}

var partitionAttrTypes = map[string]attr.Type{
	"partition":             types.Int64Type,
	"state":                 types.StringType,
	"source_offset":         types.Int64Type,
	"destination_offset":    types.Int64Type,
	"lag":                   types.Int64Type,
	"last_mirrored_offset":  types.Int64Type,
	"error":                 types.StringType,
	"retry_attempt":         types.Int64Type,
	"source_offset_at":      types.StringType,
	"destination_offset_at": types.StringType,
	"unreachable":           types.ListType{ElemType: types.StringType},
}

var partitionObjectType = types.ObjectType{AttrTypes: partitionAttrTypes}

// partitionsList is the worker's partitions as a Terraform list, in partition order.
func partitionsList(ps []api.Partition) types.List {
	vals := make([]attr.Value, len(ps))
	for i, p := range ps {
		vals[i] = types.ObjectValueMust(partitionAttrTypes, map[string]attr.Value{
			"partition":             types.Int64Value(int64(p.Partition)),
			"state":                 types.StringValue(p.State),
			"source_offset":         types.Int64Value(p.SourceOffset),
			"destination_offset":    types.Int64Value(p.DestinationOffset),
			"lag":                   types.Int64Value(p.Lag),
			"last_mirrored_offset":  types.Int64Value(p.LastMirroredOffset),
			"error":                 types.StringValue(p.Error),
			"retry_attempt":         types.Int64Value(int64(p.RetryAttempt)),
			"source_offset_at":      offsetAt(p.SourceOffsetAt),
			"destination_offset_at": offsetAt(p.DestinationOffsetAt),
			"unreachable":           unreachableList(p.Unreachable),
		})
	}
	return types.ListValueMust(partitionObjectType, vals)
}

// offsetAt is when an offset was read, in RFC 3339; empty when never.
func offsetAt(t time.Time) types.String {
	if t.IsZero() {
		return types.StringValue("")
	}
	return types.StringValue(t.UTC().Format(time.RFC3339))
}

// unreachableList is the clusters that did not answer, never null.
func unreachableList(clusters []string) types.List {
	vals := make([]attr.Value, len(clusters))
	for i, c := range clusters {
		vals[i] = types.StringValue(c)
	}
	return types.ListValueMust(types.StringType, vals)
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

// stopSettings is how the resource's stops run: stop_mode and promote_timeout.
type stopSettings struct {
	mode, promoteTimeout string
}

// stopSettingsOf reads m's stop settings, with the defaults where they are unset (a state
// written before the attributes existed).
func stopSettingsOf(m *mirrorTopicResourceModel) stopSettings {
	s := stopSettings{mode: api.StopFailover, promoteTimeout: api.FormatDuration(defaultPromoteTimeout)}
	if v := m.StopMode; !v.IsNull() && !v.IsUnknown() && v.ValueString() != "" {
		s.mode = v.ValueString()
	}
	if v := m.PromoteTimeout; !v.IsNull() && !v.IsUnknown() && v.ValueString() != "" {
		s.promoteTimeout = v.ValueString()
	}
	return s
}

// request is the stop command's body (without topics).
func (s stopSettings) request(owner string, release bool) api.TopicsRequest {
	req := api.TopicsRequest{Mode: s.mode, Owner: owner, Release: release}
	if s.mode == api.StopPromote {
		req.PromoteTimeout = s.promoteTimeout
	}
	return req
}

// failoverWarning is the plan warning of a change that stops a topic: state "stopped",
// a destroy, or a replacement. It names the stop mode and what it does, the partitions,
// and the records of current lag: lost to a failover, waited for by a promote.
func failoverWarning(mirror, topic, cause string, stop stopSettings, ps []api.Partition, live bool) (summary, detail string) {
	promote := stop.mode == api.StopPromote
	var b strings.Builder
	if promote {
		summary = fmt.Sprintf("Promote: topic %q stops mirroring from cluster mirror %q once caught up", topic, mirror)
		fmt.Fprintf(&b, "%s promotes topic %q (stop_mode = \"promote\", Confluent's PROMOTED: a planned migration): the worker waits "+
			"up to %s (promote_timeout) until every partition is MIRRORING with lag 0 and a final consumer group offset sync has "+
			"succeeded, then stops copying it from cluster mirror %q, and the destination topic becomes writable. Nothing is lost, "+
			"and consumer groups continue on the destination at the next record. If that cannot finish in time (the source is "+
			"unreachable, a partition is not MIRRORING, producers keep the lag above 0), nothing is stopped and the apply fails "+
			"with the reason per partition. The destination topic and its records are kept.\n\n", cause, topic, stop.promoteTimeout, mirror)
	} else {
		summary = fmt.Sprintf("Failover: topic %q stops mirroring from cluster mirror %q", topic, mirror)
		fmt.Fprintf(&b, "%s fails topic %q over (stop_mode = \"failover\", Confluent's FAILED_OVER; KIP-1279 StopMirrorTopics): the "+
			"worker stops copying it from cluster mirror %q at once, whatever the lag, and the destination topic becomes writable; "+
			"then it attempts a final consumer group offset sync (the apply warns when that does not succeed). The destination "+
			"topic and its records are kept.\n\n", cause, topic, mirror)
	}
	var total int64
	var lagging, notMirroring []string
	unknown := 0
	lagWord := "will not be copied"
	if promote {
		lagWord = "to copy before the stop"
	}
	for _, p := range ps {
		if p.State != api.StateMirroring {
			notMirroring = append(notMirroring, fmt.Sprintf("%d (%s)", p.Partition, p.State))
		}
		switch {
		case p.SourceOffset < 0 || p.DestinationOffset < 0:
			unknown++
			lagging = append(lagging, fmt.Sprintf("  partition %d (%s): lag unknown (the worker could not read both offsets)", p.Partition, p.State))
		case p.Lag > 0:
			total += p.Lag
			lagging = append(lagging, fmt.Sprintf("  partition %d (%s): %s of lag %s (source offset %d, destination offset %d)",
				p.Partition, p.State, records(p.Lag), lagWord, p.SourceOffset, p.DestinationOffset))
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
		fmt.Fprintf(&b, "%s of current lag (%s) %s", records(total), when, lagWord)
		if unknown > 0 {
			fmt.Fprintf(&b, ", plus the unknown lag of %d partitions", unknown)
		}
		b.WriteString(":\n")
		b.WriteString(strings.Join(lagging, "\n"))
		b.WriteString("\n")
	}
	if promote && len(notMirroring) > 0 {
		fmt.Fprintf(&b, "\nA promote needs every partition MIRRORING, and these are not (%s): %s. Unless they are MIRRORING by the "+
			"apply, the worker refuses the promote and nothing is stopped; resume the topic first, or use stop_mode = \"failover\".\n",
			when, strings.Join(notMirroring, ", "))
	}
	b.WriteString("\nPartitions: ")
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = fmt.Sprintf("%d (%s)", p.Partition, p.State)
	}
	b.WriteString(strings.Join(names, ", "))
	if promote {
		b.WriteString(".\n\nThe lag must drain within promote_timeout: stop or slow the producers on the source before the apply. " +
			"With stop_mode = \"failover\" the stop would happen at once and leave the lag behind.")
	} else {
		b.WriteString(".\n\nTo lose nothing, use stop_mode = \"promote\" (waits for lag 0 and a final group offset sync, or stops nothing), " +
			"or stop the producers on the source and apply once the plan shows lag 0 on every partition. ")
	}
	b.WriteString(" Restarting later (state = \"mirroring\") or failing back with a mirror in the other direction copies only the records written since.")
	return summary, b.String()
}

// finalSyncWarning is the warning of a stop whose final consumer group offset sync did not
// succeed; "" summary when it did (or the worker does not report it).
func finalSyncWarning(mirror, topic string, stop stopSettings, finalSync string) (summary, detail string) {
	if finalSync == "" || strings.HasPrefix(finalSync, finalSyncDone) {
		return "", ""
	}
	summary = fmt.Sprintf("Topic %q stopped, but its consumer group offsets may be behind", topic)
	detail = fmt.Sprintf("Topic %q of cluster mirror %q was stopped (stop_mode = %q): the destination topic is writable now. "+
		"The final consumer group offset sync after the last mirrored record reports: %s.\n\n"+
		"Consumer groups that committed on the source since the last periodic sync have older offsets on the destination, so "+
		"their consumers there re-read some records. Check the groups' offsets on the destination (kafka-consumer-groups.sh "+
		"--describe) and reset them where needed before moving consumers over.", topic, mirror, stop.mode, finalSync)
	return summary, detail
}

// finalSyncDone begins the final sync outcome of a stop that synced (groups active on the
// destination are left alone by design: "synced (2 groups with members on the destination
// left alone)").
const finalSyncDone = "synced"

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
