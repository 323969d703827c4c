package provider

import (
	"context"
	"fmt"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

var (
	_ resource.Resource                = &ClusterMirrorResource{}
	_ resource.ResourceWithConfigure   = &ClusterMirrorResource{}
	_ resource.ResourceWithImportState = &ClusterMirrorResource{}
	_ resource.ResourceWithModifyPlan  = &ClusterMirrorResource{}
)

// NewClusterMirrorResource is the kafkamirror_cluster_mirror resource factory.
func NewClusterMirrorResource() resource.Resource {
	return &ClusterMirrorResource{}
}

// ClusterMirrorResource is kafkamirror_cluster_mirror: the KIP's cluster mirror, a named
// link from a source cluster to the worker's destination cluster.
type ClusterMirrorResource struct {
	data *providerData
}

func (r *ClusterMirrorResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_mirror"
}

func (r *ClusterMirrorResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A cluster mirror (KIP-1279's `CreateClusterMirror`): a named link from a source Kafka cluster to the " +
			"destination cluster the worker runs against. Topics are mirrored over it with `kafkamirror_mirror_topic`.\n\n" +
			"Credentials and sync settings change in place. Destroying a cluster mirror is refused by the worker while any of " +
			"its topics is not stopped; the error names those topics. Stop them first (`state = \"stopped\"` or destroy their " +
			"`kafkamirror_mirror_topic` resources, which fails them over).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				MarkdownDescription: "The cluster mirror's name.",
				Computed:            true,
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "The cluster mirror's name: Kafka's topic-name rules (at most 249 ASCII letters, digits, `.`, `_` and `-`), " +
					"not ending in `.paused` or `.removed` (the suffixes the KIP's `mirror.name` topic config uses). Changing it " +
					"creates a new mirror.",
				Required:      true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:    []validator.String{mirrorNameValidator()},
			},
			"source": schema.SingleNestedAttribute{
				MarkdownDescription: "How the worker connects to the source cluster. Changes are applied in place; the worker checks " +
					"that the new settings still reach the same cluster (`source_cluster_id`).",
				Required: true,
				Attributes: map[string]schema.Attribute{
					"bootstrap_servers": schema.ListAttribute{
						MarkdownDescription: "The source cluster's `host:port` seed brokers, as the worker reaches them.",
						ElementType:         types.StringType,
						Required:            true,
						Validators: []validator.List{
							listvalidator.SizeAtLeast(1),
							listvalidator.ValueStringsAre(hostPortValidator{}),
						},
					},
					"tls":  sourceTLSAttribute(),
					"sasl": sourceSASLAttribute(),
				},
			},
			"source_cluster_id": schema.StringAttribute{
				MarkdownDescription: "The source cluster's id. Set it to make the create fail unless the source has this id " +
					"(`SOURCE_CLUSTER_ID_MISMATCH`); otherwise the mirror binds to the id the source has when it is created. " +
					"The worker refuses to mirror from a source whose id changes later. Changing the expectation to another " +
					"id creates a new mirror.",
				Optional: true,
				Computed: true,
				PlanModifiers: []planmodifier.String{
					stringplanmodifier.UseStateForUnknown(),
					stringplanmodifier.RequiresReplaceIf(sourceClusterIDChanged,
						"Replaces the mirror when the expected source cluster id changes to an id other than the one the mirror is bound to.",
						"Replaces the mirror when the expected source cluster id changes to an id other than the one the mirror is bound to."),
				},
			},
			"sync": schema.SingleNestedAttribute{
				MarkdownDescription: "Metadata sync settings (the KIP's MirrorMetadataManager): what the worker copies besides " +
					"records, and how often. Omitted: everything, every minute.",
				Optional: true,
				Computed: true,
				Default:  objectdefault.StaticValue(defaultSyncObject()),
				Attributes: map[string]schema.Attribute{
					"interval": schema.StringAttribute{
						MarkdownDescription: fmt.Sprintf("How often metadata is synced, as a duration such as `30s` or `5m`, %s. Default `1m`.", api.SyncIntervalRange),
						Optional:            true,
						Computed:            true,
						Default:             stringdefault.StaticString("1m"),
						Validators:          []validator.String{durationValidator{api.SyncIntervalRange}},
					},
					"topic_configs": schema.BoolAttribute{
						MarkdownDescription: "Copy mirrored topics' explicit config overrides (minus the KIP's exclude list and `topic_config_excludes`). Default `true`.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(true),
					},
					"topic_config_excludes": schema.ListAttribute{
						MarkdownDescription: "Further topic configs never copied, besides the KIP's built-in exclude list: names or regular expressions (RE2) that match whole names, such as `retention\\..*`.",
						ElementType:         types.StringType,
						Optional:            true,
						Computed:            true,
						Default:             listdefault.StaticValue(emptyStringList()),
					},
					"consumer_groups": schema.BoolAttribute{
						MarkdownDescription: "Copy consumer group offsets of mirrored topics as they are (offsets are identical on both " +
							"clusters). Groups active on the destination are skipped. Default `true`.",
						Optional: true,
						Computed: true,
						Default:  booldefault.StaticBool(true),
					},
					"group_includes": schema.ListAttribute{
						MarkdownDescription: "Regular expressions of the consumer groups to copy; empty means all.",
						ElementType:         types.StringType,
						Optional:            true,
						Computed:            true,
						Default:             listdefault.StaticValue(emptyStringList()),
						Validators:          []validator.List{listvalidator.ValueStringsAre(regexValidator{})},
					},
					"group_excludes": schema.ListAttribute{
						MarkdownDescription: "Regular expressions of consumer groups never copied.",
						ElementType:         types.StringType,
						Optional:            true,
						Computed:            true,
						Default:             listdefault.StaticValue(emptyStringList()),
						Validators:          []validator.List{listvalidator.ValueStringsAre(regexValidator{})},
					},
					"acls": schema.BoolAttribute{
						MarkdownDescription: "Copy the source's ACLs on mirrored topics; destination-only ACLs are never deleted. Default `true`.",
						Optional:            true,
						Computed:            true,
						Default:             booldefault.StaticBool(true),
					},
				},
			},
			"destination_topics": destinationTopicsAttribute(),
			"topic_count": schema.Int64Attribute{
				MarkdownDescription: "How many topics name this mirror in their `mirror.name`, in any state (stopped ones included).",
				Computed:            true,
			},
			"source_topics_pattern": schema.StringAttribute{
				MarkdownDescription: "Regular expression (RE2 syntax) of the source topics to list in `source_topics`; it matches " +
					"anywhere in a name unless anchored with `^` and `$`. A setting of Terraform's own: the worker starts no " +
					"topic by itself, `kafkamirror_mirror_topic` resources do (with `for_each` over `source_topics`). After an " +
					"import, the first plan records it as an in-place change that changes nothing on the worker.",
				Optional:   true,
				Validators: []validator.String{regexValidator{}},
			},
			"source_topics": schema.ListAttribute{
				MarkdownDescription: "The source's topics matching `source_topics_pattern`, sorted (internal topics excluded); null " +
					"without a pattern. Listed by the worker from one broker at every refresh, and known at plan time even when " +
					"this plan creates the mirror (the worker lists the configured source for the plan) or changes it in place, " +
					"so `for_each = toset(kafkamirror_cluster_mirror.<name>.source_topics)` plans in one step. A topic " +
					"deleted on the source leaves the list, and its `kafkamirror_mirror_topic` is planned for destroy (a failover).",
				ElementType: types.StringType,
				Computed:    true,
			},
		},
	}
}

func sourceTLSAttribute() schema.SingleNestedAttribute {
	attrs := map[string]schema.Attribute{
		"ca_cert_pem": schema.StringAttribute{
			MarkdownDescription: "PEM certificates of the authorities that sign the source brokers' certificates. Default: the worker's system roots.",
			Optional:            true,
		},
		"client_cert_pem": schema.StringAttribute{
			MarkdownDescription: "PEM client certificate (mutual TLS).",
			Optional:            true,
		},
		"insecure_skip_verify": schema.BoolAttribute{
			MarkdownDescription: "Do not verify the source brokers' certificates. For tests only.",
			Optional:            true,
		},
		"server_name": schema.StringAttribute{
			MarkdownDescription: "Name to verify the source brokers' certificates against instead of their host names.",
			Optional:            true,
		},
	}
	maps.Copy(attrs, secretAttributes("tls", "client_key_pem", "PEM key of `client_cert_pem`", false))
	return schema.SingleNestedAttribute{
		MarkdownDescription: "TLS to the source cluster; omit for plaintext. PEM data is given inline because the worker may run on " +
			"another machine. The worker stores the client key encrypted and never returns it.",
		Optional:   true,
		Attributes: attrs,
	}
}

func sourceSASLAttribute() schema.SingleNestedAttribute {
	attrs := map[string]schema.Attribute{
		"mechanism": schema.StringAttribute{
			MarkdownDescription: "One of `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.",
			Required:            true,
			Validators:          []validator.String{stringvalidator.OneOf(kafkaconn.Mechanisms...)},
		},
		"username": schema.StringAttribute{
			MarkdownDescription: "SASL user name.",
			Required:            true,
			Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
		},
	}
	maps.Copy(attrs, secretAttributes("sasl", "password", "SASL password", true))
	return schema.SingleNestedAttribute{
		MarkdownDescription: "SASL authentication to the source cluster; omit for none. Give the password as `password_wo` " +
			"(write-only, never in the state; Terraform 1.11 and later) or as `password` (sensitive, but stored in the state). " +
			"The worker stores it encrypted (its `KAFKAMIRROR_SECRET_KEY`) and never returns it.",
		Optional:   true,
		Attributes: attrs,
	}
}

// secretAttributes are the three attributes of one secret in the source's block: name,
// sensitive but stored in the Terraform state; name_wo, write-only, never stored; and
// name_wo_version, whose change sends name_wo again (Terraform cannot see a write-only value
// change). required: exactly one of name and name_wo must be set, else at most one.
func secretAttributes(block, name, what string, required bool) map[string]schema.Attribute {
	wo, version := name+"_wo", name+"_wo_version"
	either := stringvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName(wo))
	desc := fmt.Sprintf("%s. Sensitive (hidden in plans), but stored in the Terraform state: prefer `%s` on Terraform 1.11 and later.", what, wo)
	if required {
		either = stringvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName(wo))
		desc += fmt.Sprintf(" Exactly one of `%s` and `%s` is required.", name, wo)
	}
	return map[string]schema.Attribute{
		name: schema.StringAttribute{
			MarkdownDescription: desc,
			Optional:            true,
			Sensitive:           true,
			Validators: []validator.String{
				either,
				// This validator does not resolve relative expressions: the path is absolute.
				stringvalidator.PreferWriteOnlyAttribute(path.MatchRoot("source").AtName(block).AtName(wo)),
			},
		},
		wo: schema.StringAttribute{
			MarkdownDescription: fmt.Sprintf("%s, write-only: sent to the worker, never stored in the Terraform state (Terraform 1.11 "+
				"and later). Terraform cannot see changes of a write-only value: change `%s` to send a new one.", what, version),
			Optional:  true,
			Sensitive: true,
			WriteOnly: true,
		},
		version: schema.Int64Attribute{
			MarkdownDescription: fmt.Sprintf("Any number; changing it sends `%s` to the worker again (rotation), in place.", wo),
			Optional:            true,
			Validators: []validator.Int64{
				int64validator.AlsoRequires(path.MatchRelative().AtParent().AtName(wo)),
			},
		},
	}
}

// sourceClusterIDChanged: a configured expectation that differs from the id the mirror is
// bound to needs a new mirror (the worker never rebinds one). An omitted expectation keeps
// the bound id.
func sourceClusterIDChanged(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.StateValue.IsNull() || req.StateValue.IsUnknown() {
		return
	}
	resp.RequiresReplace = req.ConfigValue.ValueString() != req.StateValue.ValueString()
}

func (r *ClusterMirrorResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *ClusterMirrorResource) client(diags interface{ AddError(string, string) }) *api.Client {
	if r.data == nil || r.data.client == nil {
		diags.AddError("kafkamirror provider not configured", notConfiguredDetail)
		return nil
	}
	return r.data.client
}

func (r *ClusterMirrorResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	client := r.client(&resp.Diagnostics)
	var plan, config clusterMirrorResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	source, diags := sourceRequest(ctx, plan.Source, config.Source)
	resp.Diagnostics.Append(diags...)
	sync, diags := syncRequest(ctx, plan.Sync)
	resp.Diagnostics.Append(diags...)
	dt, diags := destinationTopicsRequest(ctx, plan.DestTopics)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	ctx = tflog.SetField(ctx, "mirror", name)
	tflog.Debug(ctx, "creating cluster mirror", map[string]any{"source_bootstrap_servers": source.BootstrapServers,
		"destination_replication_factor": dt.ReplicationFactor, "destination_min_insync_replicas": dt.MinInsyncReplicas})
	m, err := client.CreateMirror(ctx, api.CreateMirrorRequest{
		Name: name, Source: source, SourceClusterID: plan.SourceClusterID.ValueString(), Sync: sync, DestinationTopics: dt,
	})
	if err != nil {
		detail := fmt.Sprintf("The worker refused or failed to create cluster mirror %q: %v%s", name, err, sourceErrorHint(err))
		if api.IsCode(err, api.CodeClusterMirrorAlreadyExists) {
			detail += fmt.Sprintf("\n\nTo manage the existing mirror with Terraform, import it: terraform import <address> %s", name)
		}
		resp.Diagnostics.AddError("Cannot create cluster mirror", detail)
		return
	}
	tflog.Info(ctx, "created cluster mirror", map[string]any{"source_cluster_id": m.SourceClusterID})
	r.saveApplied(ctx, client, plan, m, &resp.State, &resp.Diagnostics)
}

// ModifyPlan plans source_topics. A plan that creates the mirror has the worker list the
// configured source; otherwise the refresh's listing stands, unless the pattern changes.
// Known values keep for_each over source_topics plannable in one step.
func (r *ClusterMirrorResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan, config clusterMirrorResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	var state *clusterMirrorResourceModel
	if !req.State.Raw.IsNull() {
		state = &clusterMirrorResourceModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, state)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	topics := types.ListUnknown(types.StringType)
	exists := state != nil && state.Name.Equal(plan.Name)
	switch {
	case plan.TopicsPattern.IsNull():
		topics = types.ListNull(types.StringType)
	case plan.TopicsPattern.IsUnknown() || r.data == nil || r.data.client == nil:
		// Unknown until apply: for_each over it then needs the values first.
	case exists && state.TopicsPattern.Equal(plan.TopicsPattern) && !state.SourceTopics.IsNull():
		topics = state.SourceTopics
	case exists:
		names, err := r.data.client.SourceTopics(ctx, plan.Name.ValueString(), plan.TopicsPattern.ValueString())
		topics = r.planned(names, err, plan, &resp.Diagnostics)
	case fullyKnown(ctx, plan.Source) && fullyKnown(ctx, config.Source):
		src, diags := sourceRequest(ctx, plan.Source, config.Source)
		resp.Diagnostics.Append(diags...)
		if diags.HasError() {
			return
		}
		names, err := r.data.client.ListSourceTopics(ctx, api.SourceTopicsRequest{Source: src, Pattern: plan.TopicsPattern.ValueString()})
		topics = r.planned(names, err, plan, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("source_topics"), topics)...)
}

// planned is a plan-time listing as the value of source_topics; a failed listing is an
// error, since for_each over an unknown value would fail anyway, with less to go on.
func (r *ClusterMirrorResource) planned(names []string, err error, plan clusterMirrorResourceModel, diags *diag.Diagnostics) types.List {
	if err != nil {
		diags.AddAttributeError(path.Root("source_topics_pattern"), "Cannot list the source topics",
			fmt.Sprintf("For source_topics, the worker listed the topics of cluster mirror %q's source matching %q, and failed: %v%s",
				plan.Name.ValueString(), plan.TopicsPattern.ValueString(), err, sourceErrorHint(err)))
		return types.ListUnknown(types.StringType)
	}
	return stringList(names)
}

// saveApplied stores the mirror a create or update left on the worker, with source_topics
// listed when the plan could not list them.
func (r *ClusterMirrorResource) saveApplied(ctx context.Context, client *api.Client, plan clusterMirrorResourceModel, m *api.Mirror, state *tfsdk.State, diags *diag.Diagnostics) {
	r.setFromRemote(ctx, &plan, m, diags)
	r.listIfUnknown(ctx, client, &plan, diags)
	if diags.HasError() {
		return
	}
	diags.Append(state.Set(ctx, plan)...)
}

// listIfUnknown fills source_topics after an apply whose plan could not list them.
func (r *ClusterMirrorResource) listIfUnknown(ctx context.Context, client *api.Client, m *clusterMirrorResourceModel, diags *diag.Diagnostics) {
	if !m.SourceTopics.IsUnknown() {
		return
	}
	names, err := client.SourceTopics(ctx, m.Name.ValueString(), m.TopicsPattern.ValueString())
	if err != nil {
		diags.AddError("Cannot list the source topics",
			fmt.Sprintf("Listing the topics of cluster mirror %q's source matching %q failed: %v", m.Name.ValueString(), m.TopicsPattern.ValueString(), err))
		return
	}
	m.SourceTopics = stringList(names)
}

// sourceErrorHint adds what to do about a refused source login.
func sourceErrorHint(err error) string {
	if !api.IsCode(err, api.CodeSaslAuthenticationFailed) {
		return ""
	}
	return "\n\nThe source refused the SASL credentials: check source.sasl.mechanism, username and the password. A password " +
		"given as password_wo is sent again only when password_wo_version changes."
}

// setFromRemote fills the computed attributes from the worker's answer. The configured
// source and sync (plan values) are kept: the worker echoes no secrets or PEM data, and the
// plan already says what was sent.
func (r *ClusterMirrorResource) setFromRemote(ctx context.Context, m *clusterMirrorResourceModel, remote *api.Mirror, diags *diag.Diagnostics) {
	m.ID = types.StringValue(remote.Name)
	m.SourceClusterID = types.StringValue(remote.SourceClusterID)
	m.TopicCount = types.Int64Value(int64(remote.TopicCount))
	src, d := stripWriteOnly(ctx, m.Source)
	diags.Append(d...)
	m.Source = src
}

func (r *ClusterMirrorResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	client := r.client(&resp.Diagnostics)
	var state clusterMirrorResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	name := state.Name.ValueString()
	ctx = tflog.SetField(ctx, "mirror", name)
	m, err := client.GetMirror(ctx, name)
	if api.IsCode(err, api.CodeUnknownClusterMirror) {
		tflog.Warn(ctx, "cluster mirror no longer exists on the worker; removing it from state")
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read cluster mirror", fmt.Sprintf("Describing cluster mirror %q on the worker failed: %v", name, err))
		return
	}
	src, diags := sourceObject(ctx, m.Source, state.Source)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	state.ID = types.StringValue(m.Name)
	state.Name = types.StringValue(m.Name)
	state.Source = src
	state.SourceClusterID = types.StringValue(m.SourceClusterID)
	state.Sync = syncObject(m.Sync, state.Sync)
	state.DestTopics = destinationTopicsObject(m.DestinationTopics, state.DestTopics)
	state.TopicCount = types.Int64Value(int64(m.TopicCount))
	if state.TopicsPattern.IsNull() {
		state.SourceTopics = types.ListNull(types.StringType)
	} else {
		state.SourceTopics = r.refreshTopics(ctx, client, state, &resp.Diagnostics)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// refreshTopics lists the source topics for a refresh. A source that cannot be asked (the
// primary is down: the moment to fail over) must not block the plan, so the last listing
// stays, with a warning.
func (r *ClusterMirrorResource) refreshTopics(ctx context.Context, client *api.Client, state clusterMirrorResourceModel, diags *diag.Diagnostics) types.List {
	name, pattern := state.Name.ValueString(), state.TopicsPattern.ValueString()
	names, err := client.SourceTopics(ctx, name, pattern)
	if err == nil {
		return stringList(names)
	}
	tflog.Warn(ctx, "listing the source topics failed; keeping the last listing", map[string]any{"error": err.Error()})
	diags.AddWarning("Source topics not refreshed",
		fmt.Sprintf("Listing the topics of cluster mirror %q's source matching %q failed, so source_topics keeps the last listing: %v%s",
			name, pattern, err, sourceErrorHint(err)))
	return state.SourceTopics
}

func (r *ClusterMirrorResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	client := r.client(&resp.Diagnostics)
	var plan, config, state clusterMirrorResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	// A given source replaces the worker's whole connection, and the worker never returns
	// secrets, so a source change sends them again: from the configuration for write-only
	// attributes (a *_wo_version change lands here too), from the plan for sensitive ones.
	// Without a source change only the sync settings are sent; the worker keeps the stored
	// connection and its secrets.
	var source *api.SourceConnection
	if !plan.Source.Equal(state.Source) {
		s, diags := sourceRequest(ctx, plan.Source, config.Source)
		resp.Diagnostics.Append(diags...)
		source = &s
	}
	sync, diags := syncRequest(ctx, plan.Sync)
	resp.Diagnostics.Append(diags...)
	// Always sent: a removed destination_topics returns the worker to the defaults.
	dt, diags := destinationTopicsRequest(ctx, plan.DestTopics)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	ctx = tflog.SetField(ctx, "mirror", name)
	tflog.Debug(ctx, "updating cluster mirror", map[string]any{"source_changed": source != nil,
		"destination_replication_factor": dt.ReplicationFactor, "destination_min_insync_replicas": dt.MinInsyncReplicas})
	m, err := client.UpdateMirror(ctx, name, api.UpdateMirrorRequest{Source: source, Sync: sync, DestinationTopics: dt})
	if err != nil {
		resp.Diagnostics.AddError("Cannot update cluster mirror",
			fmt.Sprintf("The worker refused or failed to update the source connection, sync settings and destination topic settings of cluster mirror %q: %v%s", name, err, sourceErrorHint(err)))
		return
	}
	tflog.Info(ctx, "updated cluster mirror")
	r.saveApplied(ctx, client, plan, m, &resp.State, &resp.Diagnostics)
}

func (r *ClusterMirrorResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	client := r.client(&resp.Diagnostics)
	var state clusterMirrorResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || client == nil {
		return
	}
	name := state.Name.ValueString()
	ctx = tflog.SetField(ctx, "mirror", name)
	err := client.DeleteMirror(ctx, name)
	switch {
	case err == nil:
		tflog.Info(ctx, "deleted cluster mirror")
	case api.IsCode(err, api.CodeUnknownClusterMirror):
		tflog.Warn(ctx, "cluster mirror was already deleted")
	case api.IsCode(err, api.CodeClusterMirrorNotEmpty):
		resp.Diagnostics.AddError("Cannot delete cluster mirror while it mirrors topics",
			fmt.Sprintf("The worker refused to delete cluster mirror %q: %v\n\n"+
				"A cluster mirror can only be deleted once every one of its topics is stopped. Fail the topics over first: "+
				"set state = \"stopped\" on their kafkamirror_mirror_topic resources, or destroy those resources "+
				"(which stops them and keeps the destination data). Topics started outside Terraform must be stopped there.", name, err))
	default:
		resp.Diagnostics.AddError("Cannot delete cluster mirror", fmt.Sprintf("Deleting cluster mirror %q on the worker failed: %v", name, err))
	}
}

func (r *ClusterMirrorResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if p := kip.MirrorNameProblem(req.ID); p != "" {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("The import ID of a kafkamirror_cluster_mirror is the mirror's name; %q %s.", req.ID, p))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	// Read fills source and sync. Secrets cannot be imported: the worker never returns them.
}
