package provider

// The cluster mirror's Terraform model and its conversions to and from internal/api.

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// clusterMirrorResourceModel is kafkamirror_cluster_mirror.
type clusterMirrorResourceModel struct {
	ID              types.String `tfsdk:"id"`
	Name            types.String `tfsdk:"name"`
	Source          types.Object `tfsdk:"source"`
	SourceClusterID types.String `tfsdk:"source_cluster_id"`
	Sync            types.Object `tfsdk:"sync"`
	DestTopics      types.Object `tfsdk:"destination_topics"`
	TopicCount      types.Int64  `tfsdk:"topic_count"`
	TopicsPattern   types.String `tfsdk:"source_topics_pattern"`
	SourceTopics    types.List   `tfsdk:"source_topics"`
}

// sourceModel is the source connection of a cluster mirror.
type sourceModel struct {
	BootstrapServers types.List   `tfsdk:"bootstrap_servers"`
	TLS              types.Object `tfsdk:"tls"`
	SASL             types.Object `tfsdk:"sasl"`
}

// sourceTLSModel is TLS to the source cluster.
type sourceTLSModel struct {
	CACertPEM             types.String `tfsdk:"ca_cert_pem"`
	ClientCertPEM         types.String `tfsdk:"client_cert_pem"`
	ClientKeyPEM          types.String `tfsdk:"client_key_pem"`
	ClientKeyPEMWO        types.String `tfsdk:"client_key_pem_wo"`
	ClientKeyPEMWOVersion types.Int64  `tfsdk:"client_key_pem_wo_version"`
	InsecureSkipVerify    types.Bool   `tfsdk:"insecure_skip_verify"`
	ServerName            types.String `tfsdk:"server_name"`
}

// sourceSASLModel is SASL to the source cluster.
type sourceSASLModel struct {
	Mechanism         types.String `tfsdk:"mechanism"`
	Username          types.String `tfsdk:"username"`
	Password          types.String `tfsdk:"password"`
	PasswordWO        types.String `tfsdk:"password_wo"`
	PasswordWOVersion types.Int64  `tfsdk:"password_wo_version"`
}

// syncModel is a mirror's metadata sync settings.
type syncModel struct {
	Interval            types.String `tfsdk:"interval"`
	TopicConfigs        types.Bool   `tfsdk:"topic_configs"`
	TopicConfigExcludes types.List   `tfsdk:"topic_config_excludes"`
	ConsumerGroups      types.Bool   `tfsdk:"consumer_groups"`
	GroupIncludes       types.List   `tfsdk:"group_includes"`
	GroupExcludes       types.List   `tfsdk:"group_excludes"`
	ACLs                types.Bool   `tfsdk:"acls"`
}

var (
	sourceTLSAttrTypes = map[string]attr.Type{
		"ca_cert_pem":               types.StringType,
		"client_cert_pem":           types.StringType,
		"client_key_pem":            types.StringType,
		"client_key_pem_wo":         types.StringType,
		"client_key_pem_wo_version": types.Int64Type,
		"insecure_skip_verify":      types.BoolType,
		"server_name":               types.StringType,
	}
	sourceSASLAttrTypes = map[string]attr.Type{
		"mechanism":           types.StringType,
		"username":            types.StringType,
		"password":            types.StringType,
		"password_wo":         types.StringType,
		"password_wo_version": types.Int64Type,
	}
	sourceAttrTypes = map[string]attr.Type{
		"bootstrap_servers": types.ListType{ElemType: types.StringType},
		"tls":               types.ObjectType{AttrTypes: sourceTLSAttrTypes},
		"sasl":              types.ObjectType{AttrTypes: sourceSASLAttrTypes},
	}
	syncAttrTypes = map[string]attr.Type{
		"interval":              types.StringType,
		"topic_configs":         types.BoolType,
		"topic_config_excludes": types.ListType{ElemType: types.StringType},
		"consumer_groups":       types.BoolType,
		"group_includes":        types.ListType{ElemType: types.StringType},
		"group_excludes":        types.ListType{ElemType: types.StringType},
		"acls":                  types.BoolType,
	}
)

// defaultSyncObject is the sync value of a mirror whose configuration omits sync: the
// worker's api.DefaultSync, everything synced every minute.
func defaultSyncObject() types.Object {
	d := api.DefaultSync()
	return types.ObjectValueMust(syncAttrTypes, map[string]attr.Value{
		"interval":              types.StringValue("1m"),
		"topic_configs":         types.BoolValue(d.TopicConfigs),
		"topic_config_excludes": emptyStringList(),
		"consumer_groups":       types.BoolValue(d.ConsumerGroups),
		"group_includes":        emptyStringList(),
		"group_excludes":        emptyStringList(),
		"acls":                  types.BoolValue(d.ACLs),
	})
}

func emptyStringList() types.List {
	return types.ListValueMust(types.StringType, []attr.Value{})
}

func stringList(ss []string) types.List {
	vals := make([]attr.Value, len(ss))
	for i, s := range ss {
		vals[i] = types.StringValue(s)
	}
	return types.ListValueMust(types.StringType, vals)
}

func listStrings(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

// sourceRequest builds the API's source connection. Plain values come from the plan;
// write-only secrets exist only in the configuration, so they come from config.
func sourceRequest(ctx context.Context, plan, config types.Object) (api.SourceConnection, diag.Diagnostics) {
	var diags diag.Diagnostics
	var p, c sourceModel
	diags.Append(plan.As(ctx, &p, basetypes.ObjectAsOptions{})...)
	diags.Append(config.As(ctx, &c, basetypes.ObjectAsOptions{})...)
	if diags.HasError() {
		return api.SourceConnection{}, diags
	}
	out := api.SourceConnection{BootstrapServers: listStrings(ctx, p.BootstrapServers, &diags)}
	if !p.TLS.IsNull() {
		var pt, ct sourceTLSModel
		diags.Append(p.TLS.As(ctx, &pt, basetypes.ObjectAsOptions{})...)
		if !c.TLS.IsNull() {
			diags.Append(c.TLS.As(ctx, &ct, basetypes.ObjectAsOptions{})...)
		}
		key := pt.ClientKeyPEM.ValueString()
		if k := ct.ClientKeyPEMWO.ValueString(); k != "" {
			key = k
		}
		out.TLS = &api.TLS{
			CACertPEM: pt.CACertPEM.ValueString(), ClientCertPEM: pt.ClientCertPEM.ValueString(), ClientKeyPEM: key,
			InsecureSkipVerify: pt.InsecureSkipVerify.ValueBool(), ServerName: pt.ServerName.ValueString(),
		}
	}
	if !p.SASL.IsNull() {
		var ps, cs sourceSASLModel
		diags.Append(p.SASL.As(ctx, &ps, basetypes.ObjectAsOptions{})...)
		if !c.SASL.IsNull() {
			diags.Append(c.SASL.As(ctx, &cs, basetypes.ObjectAsOptions{})...)
		}
		pass := ps.Password.ValueString()
		if w := cs.PasswordWO.ValueString(); w != "" {
			pass = w
		}
		out.SASL = &api.SASL{Mechanism: ps.Mechanism.ValueString(), Username: ps.Username.ValueString(), Password: pass}
	}
	return out, diags
}

// syncRequest builds the API's sync settings from the planned sync object.
func syncRequest(ctx context.Context, obj types.Object) (*api.SyncSettings, diag.Diagnostics) {
	var diags diag.Diagnostics
	if obj.IsNull() || obj.IsUnknown() {
		return nil, diags
	}
	var s syncModel
	diags.Append(obj.As(ctx, &s, basetypes.ObjectAsOptions{})...)
	if diags.HasError() {
		return nil, diags
	}
	return &api.SyncSettings{
		Interval:            s.Interval.ValueString(),
		TopicConfigs:        s.TopicConfigs.ValueBool(),
		TopicConfigExcludes: listStrings(ctx, s.TopicConfigExcludes, &diags),
		ConsumerGroups:      s.ConsumerGroups.ValueBool(),
		GroupIncludes:       listStrings(ctx, s.GroupIncludes, &diags),
		GroupExcludes:       listStrings(ctx, s.GroupExcludes, &diags),
		ACLs:                s.ACLs.ValueBool(),
	}, diags
}

// syncObject is the worker's sync settings as a Terraform value. The worker renders the
// interval as Go does ("1m0s"); when prior names the same duration ("1m") its spelling is
// kept, so a refresh shows no change that is not one.
func syncObject(s api.SyncSettings, prior types.Object) types.Object {
	interval := shortDuration(s.Interval)
	if !prior.IsNull() && !prior.IsUnknown() {
		if pv, ok := prior.Attributes()["interval"].(types.String); ok && sameDuration(pv.ValueString(), interval) {
			interval = pv.ValueString()
		}
	}
	return types.ObjectValueMust(syncAttrTypes, map[string]attr.Value{
		"interval":              types.StringValue(interval),
		"topic_configs":         types.BoolValue(s.TopicConfigs),
		"topic_config_excludes": stringList(s.TopicConfigExcludes),
		"consumer_groups":       types.BoolValue(s.ConsumerGroups),
		"group_includes":        stringList(s.GroupIncludes),
		"group_excludes":        stringList(s.GroupExcludes),
		"acls":                  types.BoolValue(s.ACLs),
	})
}

// shortDuration renders a Go duration the way people write it: "1m" rather than Go's
// "1m0s", "2h" rather than "2h0m0s". Anything that does not parse is returned as it is.
func shortDuration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return api.FormatDuration(d)
}

func sameDuration(a, b string) bool {
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)
	return errA == nil && errB == nil && da == db
}

// sourceObject is the source connection as the worker describes it, merged with what only
// the prior state knows: the worker never returns secrets or PEM data, so those (and the
// write-only versions) are kept from prior; write-only values themselves are always null
// in state.
func sourceObject(ctx context.Context, remote api.SourceConnection, prior types.Object) (types.Object, diag.Diagnostics) {
	var diags diag.Diagnostics
	var p sourceModel
	if !prior.IsNull() && !prior.IsUnknown() {
		diags.Append(prior.As(ctx, &p, basetypes.ObjectAsOptions{})...)
	}
	tlsObj := types.ObjectNull(sourceTLSAttrTypes)
	if remote.TLS != nil {
		var pt sourceTLSModel
		if !p.TLS.IsNull() && !p.TLS.IsUnknown() {
			diags.Append(p.TLS.As(ctx, &pt, basetypes.ObjectAsOptions{})...)
		}
		tlsObj = types.ObjectValueMust(sourceTLSAttrTypes, map[string]attr.Value{
			"ca_cert_pem":               orNullString(pt.CACertPEM),
			"client_cert_pem":           orNullString(pt.ClientCertPEM),
			"client_key_pem":            orNullString(pt.ClientKeyPEM),
			"client_key_pem_wo":         types.StringNull(),
			"client_key_pem_wo_version": orNullInt64(pt.ClientKeyPEMWOVersion),
			"insecure_skip_verify":      orNullBool(pt.InsecureSkipVerify),
			"server_name":               orNullString(pt.ServerName),
		})
	}
	saslObj := types.ObjectNull(sourceSASLAttrTypes)
	if remote.SASL != nil {
		var ps sourceSASLModel
		if !p.SASL.IsNull() && !p.SASL.IsUnknown() {
			diags.Append(p.SASL.As(ctx, &ps, basetypes.ObjectAsOptions{})...)
		}
		saslObj = types.ObjectValueMust(sourceSASLAttrTypes, map[string]attr.Value{
			"mechanism":           types.StringValue(remote.SASL.Mechanism),
			"username":            types.StringValue(remote.SASL.Username),
			"password":            orNullString(ps.Password),
			"password_wo":         types.StringNull(),
			"password_wo_version": orNullInt64(ps.PasswordWOVersion),
		})
	}
	obj, d := types.ObjectValue(sourceAttrTypes, map[string]attr.Value{
		"bootstrap_servers": stringList(remote.BootstrapServers),
		"tls":               tlsObj,
		"sasl":              saslObj,
	})
	diags.Append(d...)
	return obj, diags
}

// Unknown values cannot be stored in state; these turn them into null. (The zero value
// of a types.X is null already.)
func orNullString(v types.String) types.String {
	if v.IsUnknown() {
		return types.StringNull()
	}
	return v
}

func orNullInt64(v types.Int64) types.Int64 {
	if v.IsUnknown() {
		return types.Int64Null()
	}
	return v
}

func orNullBool(v types.Bool) types.Bool {
	if v.IsUnknown() {
		return types.BoolNull()
	}
	return v
}

// stripWriteOnly returns the source object with its write-only values nulled, as state
// must hold it.
func stripWriteOnly(ctx context.Context, obj types.Object) (types.Object, diag.Diagnostics) {
	var diags diag.Diagnostics
	if obj.IsNull() || obj.IsUnknown() {
		return obj, diags
	}
	var s sourceModel
	diags.Append(obj.As(ctx, &s, basetypes.ObjectAsOptions{})...)
	if diags.HasError() {
		return obj, diags
	}
	attrs := map[string]attr.Value{"bootstrap_servers": s.BootstrapServers, "tls": s.TLS, "sasl": s.SASL}
	if !s.TLS.IsNull() && !s.TLS.IsUnknown() {
		a := copyAttrs(s.TLS.Attributes())
		a["client_key_pem_wo"] = types.StringNull()
		attrs["tls"] = types.ObjectValueMust(sourceTLSAttrTypes, a)
	}
	if !s.SASL.IsNull() && !s.SASL.IsUnknown() {
		a := copyAttrs(s.SASL.Attributes())
		a["password_wo"] = types.StringNull()
		attrs["sasl"] = types.ObjectValueMust(sourceSASLAttrTypes, a)
	}
	out, d := types.ObjectValue(sourceAttrTypes, attrs)
	diags.Append(d...)
	return out, diags
}

func copyAttrs(in map[string]attr.Value) map[string]attr.Value {
	out := make(map[string]attr.Value, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// fullyKnown reports whether v holds no unknown value, at any depth.
func fullyKnown(ctx context.Context, v attr.Value) bool {
	tv, err := v.ToTerraformValue(ctx)
	return err == nil && tv.IsFullyKnown()
}
