package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

var (
	_ datasource.DataSourceWithConfigure = &ClusterMirrorDataSource{}
	_ datasource.DataSourceWithConfigure = &MirrorTopicDataSource{}
	_ datasource.DataSourceWithConfigure = &SourceTopicsDataSource{}
)

// dataSourceBase is what the three data sources share: the worker client.
type dataSourceBase struct {
	data *providerData
}

func (d *dataSourceBase) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *dataSourceBase) client(diags interface{ AddError(string, string) }) *api.Client {
	if d.data == nil || d.data.client == nil {
		diags.AddError("kafkamirror provider not configured", notConfiguredDetail)
		return nil
	}
	return d.data.client
}

// --- kafkamirror_cluster_mirror ---

// NewClusterMirrorDataSource is the kafkamirror_cluster_mirror data source factory.
func NewClusterMirrorDataSource() datasource.DataSource { return &ClusterMirrorDataSource{} }

// ClusterMirrorDataSource describes an existing cluster mirror (DescribeClusterMirrors).
type ClusterMirrorDataSource struct{ dataSourceBase }

type clusterMirrorDataSourceModel struct {
	ID                     types.String `tfsdk:"id"`
	Name                   types.String `tfsdk:"name"`
	SourceBootstrapServers types.List   `tfsdk:"source_bootstrap_servers"`
	SourceTLS              types.Bool   `tfsdk:"source_tls"`
	SourceSASLMechanism    types.String `tfsdk:"source_sasl_mechanism"`
	SourceSASLUsername     types.String `tfsdk:"source_sasl_username"`
	SourceClusterID        types.String `tfsdk:"source_cluster_id"`
	Sync                   types.Object `tfsdk:"sync"`
	DestinationTopics      types.Object `tfsdk:"destination_topics"`
	Topics                 types.List   `tfsdk:"topics"`
	TopicCount             types.Int64  `tfsdk:"topic_count"`
	CreatedAt              types.String `tfsdk:"created_at"`
}

func (d *ClusterMirrorDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_mirror"
}

func (d *ClusterMirrorDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Describes an existing cluster mirror on the worker (KIP-1279 `DescribeClusterMirrors`). " +
			"The worker never returns secrets, so none are shown.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{MarkdownDescription: "The cluster mirror's name.", Computed: true},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the cluster mirror.",
				Required:            true,
				Validators:          []validator.String{mirrorNameValidator()},
			},
			"source_bootstrap_servers": schema.ListAttribute{
				MarkdownDescription: "The source cluster's seed brokers.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"source_tls":            schema.BoolAttribute{MarkdownDescription: "Whether the worker connects to the source with TLS.", Computed: true},
			"source_sasl_mechanism": schema.StringAttribute{MarkdownDescription: "SASL mechanism to the source; empty for none.", Computed: true},
			"source_sasl_username":  schema.StringAttribute{MarkdownDescription: "SASL user name to the source; empty for none.", Computed: true},
			"source_cluster_id":     schema.StringAttribute{MarkdownDescription: "The id of the source cluster the mirror is bound to.", Computed: true},
			"sync": schema.SingleNestedAttribute{
				MarkdownDescription: "Metadata sync settings.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"interval":              schema.StringAttribute{MarkdownDescription: "How often metadata is synced.", Computed: true},
					"topic_configs":         schema.BoolAttribute{MarkdownDescription: "Whether topic config overrides are copied.", Computed: true},
					"topic_config_excludes": schema.ListAttribute{MarkdownDescription: "Topic configs never copied, besides the KIP's list.", ElementType: types.StringType, Computed: true},
					"consumer_groups":       schema.BoolAttribute{MarkdownDescription: "Whether consumer group offsets are copied.", Computed: true},
					"group_includes":        schema.ListAttribute{MarkdownDescription: "Consumer groups copied (regular expressions; empty: all).", ElementType: types.StringType, Computed: true},
					"group_excludes":        schema.ListAttribute{MarkdownDescription: "Consumer groups never copied (regular expressions).", ElementType: types.StringType, Computed: true},
					"acls":                  schema.BoolAttribute{MarkdownDescription: "Whether ACLs are copied.", Computed: true},
				},
			},
			"destination_topics": destinationTopicsDataSourceAttribute(),
			"topics": schema.ListAttribute{
				MarkdownDescription: "The topics whose `mirror.name` names this mirror, in any state, sorted.",
				ElementType:         types.StringType,
				Computed:            true,
			},
			"topic_count": schema.Int64Attribute{MarkdownDescription: "Number of `topics`.", Computed: true},
			"created_at":  schema.StringAttribute{MarkdownDescription: "When the mirror was created (RFC 3339).", Computed: true},
		},
	}
}

func (d *ClusterMirrorDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	client := d.client(&resp.Diagnostics)
	var data clusterMirrorDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &data)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	name := data.Name.ValueString()
	tflog.Debug(ctx, "reading cluster mirror", map[string]any{"mirror": name})
	m, err := client.GetMirror(ctx, name)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read cluster mirror", fmt.Sprintf("Describing cluster mirror %q on the worker failed: %v", name, err))
		return
	}
	data.ID = types.StringValue(m.Name)
	data.SourceBootstrapServers = stringList(m.Source.BootstrapServers)
	data.SourceTLS = types.BoolValue(m.Source.TLS != nil)
	data.SourceSASLMechanism, data.SourceSASLUsername = types.StringValue(""), types.StringValue("")
	if m.Source.SASL != nil {
		data.SourceSASLMechanism = types.StringValue(m.Source.SASL.Mechanism)
		data.SourceSASLUsername = types.StringValue(m.Source.SASL.Username)
	}
	data.SourceClusterID = types.StringValue(m.SourceClusterID)
	data.Sync = syncObject(m.Sync, types.ObjectNull(syncAttrTypes))
	data.DestinationTopics = destinationTopicsObject(m.DestinationTopics, types.ObjectNull(destinationTopicsAttrTypes))
	data.Topics = stringList(m.Topics)
	data.TopicCount = types.Int64Value(int64(m.TopicCount))
	data.CreatedAt = types.StringValue(m.CreatedAt.UTC().Format(time.RFC3339))
	resp.Diagnostics.Append(resp.State.Set(ctx, &data)...)
}

// --- kafkamirror_mirror_topic ---

// NewMirrorTopicDataSource is the kafkamirror_mirror_topic data source factory.
func NewMirrorTopicDataSource() datasource.DataSource { return &MirrorTopicDataSource{} }

// MirrorTopicDataSource describes a mirrored topic with its partitions.
type MirrorTopicDataSource struct{ dataSourceBase }

type mirrorTopicDataSourceModel struct {
	ID               types.String `tfsdk:"id"`
	MirrorName       types.String `tfsdk:"mirror_name"`
	Topic            types.String `tfsdk:"topic"`
	State            types.String `tfsdk:"state"`
	MirrorNameConfig types.String `tfsdk:"mirror_name_config"`
	Partitions       types.List   `tfsdk:"partitions"`
}

func (d *MirrorTopicDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_mirror_topic"
}

func (d *MirrorTopicDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	partAttrs := map[string]schema.Attribute{
		"partition":             schema.Int64Attribute{MarkdownDescription: "Partition number.", Computed: true},
		"state":                 schema.StringAttribute{MarkdownDescription: "KIP-1279 partition state (`MIRRORING`, `PAUSED`, `STOPPED`, `FAILED`, ...).", Computed: true},
		"source_offset":         schema.Int64Attribute{MarkdownDescription: "Source high watermark; -1 when unknown.", Computed: true},
		"destination_offset":    schema.Int64Attribute{MarkdownDescription: "Destination end offset; -1 when unknown.", Computed: true},
		"lag":                   schema.Int64Attribute{MarkdownDescription: "Records not copied yet; 0 when unknown.", Computed: true},
		"last_mirrored_offset":  schema.Int64Attribute{MarkdownDescription: "Destination end offset at the last stop; -1 before.", Computed: true},
		"error":                 schema.StringAttribute{MarkdownDescription: "Why the partition FAILED, or why a MIRRORING partition is stalled (`stalled: …`); empty otherwise.", Computed: true},
		"retry_attempt":         schema.Int64Attribute{MarkdownDescription: "Automatic retries so far; -1 when the failure waits for the operator.", Computed: true},
		"source_offset_at":      schema.StringAttribute{MarkdownDescription: "When the worker read `source_offset` (RFC 3339); earlier than this read when the source is in `unreachable`; empty when never.", Computed: true},
		"destination_offset_at": schema.StringAttribute{MarkdownDescription: "When the worker read `destination_offset` (RFC 3339), as `source_offset_at`.", Computed: true},
		"unreachable": schema.ListAttribute{MarkdownDescription: "The clusters (`source`, `destination`) that did not answer the worker within 3 s: " +
			"their offsets are the last known ones. Empty when both answered.", ElementType: types.StringType, Computed: true},
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Describes a mirrored topic and its partitions, as the KIP's describe table shows them: state, " +
			"offsets on both clusters, lag and errors.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{MarkdownDescription: "`<mirror_name>/<topic>`.", Computed: true},
			"mirror_name": schema.StringAttribute{
				MarkdownDescription: "Name of the cluster mirror.",
				Required:            true,
				Validators:          []validator.String{mirrorNameValidator()},
			},
			"topic": schema.StringAttribute{
				MarkdownDescription: "Name of the topic.",
				Required:            true,
				Validators:          []validator.String{topicNameValidator()},
			},
			"state":              schema.StringAttribute{MarkdownDescription: "Desired state: `mirroring`, `paused` or `stopped`.", Computed: true},
			"mirror_name_config": schema.StringAttribute{MarkdownDescription: "The KIP's `mirror.name` value, with its suffix.", Computed: true},
			"partitions": schema.ListNestedAttribute{
				MarkdownDescription: "Per-partition state.",
				Computed:            true,
				NestedObject:        schema.NestedAttributeObject{Attributes: partAttrs},
			},
		},
	}
}

func (d *MirrorTopicDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	client := d.client(&resp.Diagnostics)
	var data mirrorTopicDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &data)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	mirror, topic := data.MirrorName.ValueString(), data.Topic.ValueString()
	tflog.Debug(ctx, "reading mirror topic", map[string]any{"mirror": mirror, "topic": topic})
	t, err := client.GetTopic(ctx, mirror, topic)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read mirror topic",
			fmt.Sprintf("Describing topic %q of cluster mirror %q on the worker failed: %v", topic, mirror, err))
		return
	}
	data.ID = types.StringValue(t.Mirror + "/" + t.Topic)
	data.State = types.StringValue(t.DesiredState)
	data.MirrorNameConfig = types.StringValue(t.MirrorName)
	data.Partitions = partitionsList(t.Partitions)
	resp.Diagnostics.Append(resp.State.Set(ctx, &data)...)
}

// --- kafkamirror_source_topics ---

// NewSourceTopicsDataSource is the kafkamirror_source_topics data source factory.
func NewSourceTopicsDataSource() datasource.DataSource { return &SourceTopicsDataSource{} }

// SourceTopicsDataSource lists the topics on a mirror's source that match a pattern, for
// for_each over kafkamirror_mirror_topic.
type SourceTopicsDataSource struct{ dataSourceBase }

type sourceTopicsDataSourceModel struct {
	ID         types.String `tfsdk:"id"`
	MirrorName types.String `tfsdk:"mirror_name"`
	Pattern    types.String `tfsdk:"pattern"`
	Topics     types.List   `tfsdk:"topics"`
}

func (d *SourceTopicsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_source_topics"
}

func (d *SourceTopicsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the topics on a cluster mirror's source cluster whose names match a regular expression " +
			"(internal topics excluded), as one source broker sees them, so a deleted topic does not come back in a later " +
			"listing.\n\n" +
			"Give `mirror_name` as a literal: a reference to the mirror resource makes Terraform defer the read to the apply " +
			"whenever that mirror has a pending change, and a `for_each` over the result then fails to plan. To mirror a set " +
			"of topics, `for_each` over the `source_topics` of `kafkamirror_cluster_mirror` instead, which is known at plan " +
			"time even when the same plan creates or changes the mirror.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{MarkdownDescription: "`<mirror_name>/<pattern>`.", Computed: true},
			"mirror_name": schema.StringAttribute{
				MarkdownDescription: "Name of the cluster mirror whose source is listed; the mirror must exist when the plan reads it.",
				Required:            true,
				Validators:          []validator.String{mirrorNameValidator()},
			},
			"pattern": schema.StringAttribute{
				MarkdownDescription: "Regular expression (RE2 syntax) the topic names must match; it matches anywhere in the name " +
					"unless anchored with `^` and `$`. Omitted: every topic.",
				Optional:   true,
				Validators: []validator.String{regexValidator{}},
			},
			"topics": schema.ListAttribute{
				MarkdownDescription: "The matching topic names, sorted.",
				ElementType:         types.StringType,
				Computed:            true,
			},
		},
	}
}

func (d *SourceTopicsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	client := d.client(&resp.Diagnostics)
	var data sourceTopicsDataSourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &data)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	mirror, pattern := data.MirrorName.ValueString(), data.Pattern.ValueString()
	tflog.Debug(ctx, "listing source topics", map[string]any{"mirror": mirror, "pattern": pattern})
	topics, err := client.SourceTopics(ctx, mirror, pattern)
	if err != nil {
		resp.Diagnostics.AddError("Cannot list source topics",
			fmt.Sprintf("Listing the source topics of cluster mirror %q matching %q failed: %v", mirror, pattern, err))
		return
	}
	data.ID = types.StringValue(mirror + "/" + pattern)
	data.Topics = stringList(topics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &data)...)
}
