package provider

// destination_topics of kafkamirror_cluster_mirror (and its data source): how the worker
// creates the mirror's destination topics.

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

var destinationTopicsAttrTypes = map[string]attr.Type{
	"replication_factor":  types.Int64Type,
	"min_insync_replicas": types.Int64Type,
}

const (
	destinationTopicsDescription = "How the worker creates this mirror's destination topics (when a topic starts and the " +
		"destination has no such topic; an existing destination topic is left as it is, and a change applies to topics " +
		"created from then on). Omitted: the defaults below. Besides these, every destination topic gets " +
		"`message.timestamp.type = CreateTime` and unbounded `message.timestamp.before.max.ms` / `after.max.ms`, so records " +
		"keep their source timestamps (a source topic using `LogAppendTime` is mirrored with the times its broker " +
		"wrote), and the source topic's explicit config overrides except: the KIP-1279 exclude list (throttled replicas, " +
		"`message.timestamp.*`, `unclean.leader.election.enable`, `min.insync.replicas`), other distributions' configs " +
		"(`confluent.`, `redpanda.`, `aiven.`, `cloudera.`, `strimzi.`, `mirror.`), configs removed in Kafka 4.0 " +
		"(`message.format.version`, `message.downconversion.enable`), `sync.topic_config_excludes` (names or regular " +
		"expressions matching whole names) and any config the destination refuses; each left-out config is logged by the " +
		"worker with its reason, and creation goes on. The worker's README lists every default."
	replicationFactorDescription = "Replication factor of the destination topics, from 1 to 32767. Default: the source " +
		"topic's replication factor. Either is capped by the destination's broker count (the worker logs a warning)."
	minInsyncReplicasDescription = "`min.insync.replicas` of the destination topics, at least 1 and at most " +
		"`replication_factor` when both are set. Default: the source topic's `min.insync.replicas` override, else 2 when " +
		"the topic has 3 or more replicas, else the destination broker's default. Capped by the replication factor."
)

// destinationTopicsAttribute is the resource's optional destination_topics.
func destinationTopicsAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{
		MarkdownDescription: destinationTopicsDescription,
		Optional:            true,
		Validators:          []validator.Object{minInsyncWithinRF{}},
		Attributes: map[string]schema.Attribute{
			"replication_factor": schema.Int64Attribute{
				MarkdownDescription: replicationFactorDescription,
				Optional:            true,
				Validators:          []validator.Int64{int64validator.Between(1, api.MaxReplicationFactor)},
			},
			"min_insync_replicas": schema.Int64Attribute{
				MarkdownDescription: minInsyncReplicasDescription,
				Optional:            true,
				Validators:          []validator.Int64{int64validator.Between(1, api.MaxReplicationFactor)},
			},
		},
	}
}

// destinationTopicsDataSourceAttribute is the data source's destination_topics.
func destinationTopicsDataSourceAttribute() dsschema.Attribute {
	return dsschema.SingleNestedAttribute{
		MarkdownDescription: "How the worker creates this mirror's destination topics; null when the mirror uses the defaults " +
			"(the source topic's replication factor, capped by the destination's broker count; see the resource).",
		Computed: true,
		Attributes: map[string]dsschema.Attribute{
			"replication_factor":  dsschema.Int64Attribute{MarkdownDescription: "The replication factor set; null: the source topic's.", Computed: true},
			"min_insync_replicas": dsschema.Int64Attribute{MarkdownDescription: "The `min.insync.replicas` set; null: the default.", Computed: true},
		},
	}
}

// destinationTopicsRequest is the API's settings for obj; a null obj is the defaults.
func destinationTopicsRequest(ctx context.Context, obj types.Object) (*api.DestinationTopics, diag.Diagnostics) {
	out := &api.DestinationTopics{}
	if obj.IsNull() || obj.IsUnknown() {
		return out, nil
	}
	var m struct {
		ReplicationFactor types.Int64 `tfsdk:"replication_factor"`
		MinInsyncReplicas types.Int64 `tfsdk:"min_insync_replicas"`
	}
	diags := obj.As(ctx, &m, basetypes.ObjectAsOptions{})
	out.ReplicationFactor = int(m.ReplicationFactor.ValueInt64())
	out.MinInsyncReplicas = int(m.MinInsyncReplicas.ValueInt64())
	return out, diags
}

// destinationTopicsObject is the worker's settings as the attribute's value: null for the
// defaults, unless prior (the configuration's value) is an object that sets nothing,
// which means the same.
func destinationTopicsObject(d api.DestinationTopics, prior types.Object) types.Object {
	if d == (api.DestinationTopics{}) {
		if !prior.IsNull() && !prior.IsUnknown() && allNull(prior) {
			return prior
		}
		return types.ObjectNull(destinationTopicsAttrTypes)
	}
	v := func(n int) types.Int64 {
		if n == 0 {
			return types.Int64Null()
		}
		return types.Int64Value(int64(n))
	}
	return types.ObjectValueMust(destinationTopicsAttrTypes, map[string]attr.Value{
		"replication_factor": v(d.ReplicationFactor), "min_insync_replicas": v(d.MinInsyncReplicas),
	})
}

func allNull(o types.Object) bool {
	for _, v := range o.Attributes() {
		if !v.IsNull() {
			return false
		}
	}
	return true
}

// minInsyncWithinRF refuses min_insync_replicas above replication_factor: no producer with
// acks=all could write.
type minInsyncWithinRF struct{}

var _ validator.Object = minInsyncWithinRF{}

func (minInsyncWithinRF) Description(context.Context) string {
	return "min_insync_replicas must not exceed replication_factor"
}

func (v minInsyncWithinRF) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (minInsyncWithinRF) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	rf, _ := req.ConfigValue.Attributes()["replication_factor"].(types.Int64)
	mi, _ := req.ConfigValue.Attributes()["min_insync_replicas"].(types.Int64)
	if rf.IsNull() || rf.IsUnknown() || mi.IsNull() || mi.IsUnknown() || mi.ValueInt64() <= rf.ValueInt64() {
		return
	}
	resp.Diagnostics.AddAttributeError(req.Path.AtName("min_insync_replicas"), "min_insync_replicas above replication_factor",
		fmt.Sprintf("destination_topics.min_insync_replicas is %d but replication_factor is %d: a destination topic with fewer "+
			"replicas than min.insync.replicas refuses every write with acks=all. Lower min_insync_replicas or raise replication_factor.",
			mi.ValueInt64(), rf.ValueInt64()))
}
