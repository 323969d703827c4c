// Package provider is the kafkamirror Terraform provider: it drives a kafkamirror worker
// (KIP-1279 cluster mirroring from outside the brokers) through the worker's HTTP API v1
// (internal/api). It never imports the mirroring engine.
package provider

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
)

// The environment variables the provider falls back to.
const (
	envWorkerURL   = "KAFKAMIRROR_WORKER_URL"
	envWorkerToken = "KAFKAMIRROR_WORKER_TOKEN"
)

var _ provider.Provider = &KafkamirrorProvider{}

// KafkamirrorProvider is the provider implementation.
type KafkamirrorProvider struct {
	// version is the provider's version: set by goreleaser on release, "dev" for a local
	// build and "test" in acceptance tests.
	version string
}

// New returns the provider factory for providerserver.
func New(version string) func() provider.Provider {
	return func() provider.Provider {
		return &KafkamirrorProvider{version: version}
	}
}

// kafkamirrorProviderModel is the provider block.
type kafkamirrorProviderModel struct {
	WorkerURL   types.String `tfsdk:"worker_url"`
	WorkerToken types.String `tfsdk:"worker_token"`
	WorkerTLS   types.Object `tfsdk:"worker_tls"`
	Destination types.Object `tfsdk:"destination"`
}

// workerTLSModel is the provider's worker_tls block: TLS to the worker's HTTPS API.
type workerTLSModel struct {
	CACertPEM          types.String `tfsdk:"ca_cert_pem"`
	ClientCertPEM      types.String `tfsdk:"client_cert_pem"`
	ClientKeyPEM       types.String `tfsdk:"client_key_pem"`
	InsecureSkipVerify types.Bool   `tfsdk:"insecure_skip_verify"`
	ServerName         types.String `tfsdk:"server_name"`
}

// destinationModel is the provider's destination block: a Kafka connection used only for
// plan-time checks.
type destinationModel struct {
	BootstrapServers types.List   `tfsdk:"bootstrap_servers"`
	TLS              types.Object `tfsdk:"tls"`
	SASL             types.Object `tfsdk:"sasl"`
}

// kafkaTLSModel is TLS to a Kafka cluster, with PEM data given inline.
type kafkaTLSModel struct {
	Enabled            types.Bool   `tfsdk:"enabled"`
	CACertPEM          types.String `tfsdk:"ca_cert_pem"`
	ClientCertPEM      types.String `tfsdk:"client_cert_pem"`
	ClientKeyPEM       types.String `tfsdk:"client_key_pem"`
	InsecureSkipVerify types.Bool   `tfsdk:"insecure_skip_verify"`
	ServerName         types.String `tfsdk:"server_name"`
}

// kafkaSASLModel is SASL to a Kafka cluster (provider block: the password is sensitive;
// provider configuration is never stored in state).
type kafkaSASLModel struct {
	Mechanism types.String `tfsdk:"mechanism"`
	Username  types.String `tfsdk:"username"`
	Password  types.String `tfsdk:"password"`
}

// providerData is what Configure hands to resources and data sources.
type providerData struct {
	client *api.Client
	// destination is nil when the provider block has no destination.
	destination *destinationConn
}

func (p *KafkamirrorProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "kafkamirror"
	resp.Version = p.version
}

func (p *KafkamirrorProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The kafkamirror provider drives a [kafkamirror](https://github.com/kafkamirror/terraform-provider-kafkamirror) " +
			"worker through its HTTP API v1. The worker mirrors Kafka topics from a source cluster into the destination " +
			"cluster it runs against, offset for offset, as Apache Kafka's KIP-1279 (cluster mirroring) describes.",
		Attributes: map[string]schema.Attribute{
			"worker_url": schema.StringAttribute{
				MarkdownDescription: "Base URL of the worker's HTTP API, for example `http://127.0.0.1:8080`. " +
					"With several workers on one destination, one URL is enough: any worker of the group, or a load " +
					"balancer in front of them (a worker forwards commands to the one that applies them). " +
					"Falls back to the `" + envWorkerURL + "` environment variable. Required (in one of the two places).",
				Optional: true,
				Validators: []validator.String{
					stringvalidator.RegexMatches(urlPattern, "must be an http:// or https:// URL with a host, such as http://127.0.0.1:8080"),
				},
			},
			"worker_token": schema.StringAttribute{
				MarkdownDescription: "Bearer token the worker's API requires (the worker's `KAFKAMIRROR_API_TOKEN`). " +
					"Falls back to the `" + envWorkerToken + "` environment variable. Required (in one of the two places).",
				Optional:  true,
				Sensitive: true,
			},
			"worker_tls": schema.SingleNestedAttribute{
				MarkdownDescription: "TLS settings for an `https://` worker URL. Without them the system's certificate authorities are used.",
				Optional:            true,
				Attributes: map[string]schema.Attribute{
					"ca_cert_pem": schema.StringAttribute{
						MarkdownDescription: "PEM certificates of the authorities that sign the worker's certificate.",
						Optional:            true,
					},
					"client_cert_pem": schema.StringAttribute{
						MarkdownDescription: "PEM client certificate, for a worker behind a proxy that asks for mutual TLS.",
						Optional:            true,
						Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("client_key_pem"))},
					},
					"client_key_pem": schema.StringAttribute{
						MarkdownDescription: "PEM key of `client_cert_pem`.",
						Optional:            true,
						Sensitive:           true,
						Validators:          []validator.String{stringvalidator.AlsoRequires(path.MatchRelative().AtParent().AtName("client_cert_pem"))},
					},
					"insecure_skip_verify": schema.BoolAttribute{
						MarkdownDescription: "Do not verify the worker's certificate. For tests only.",
						Optional:            true,
					},
					"server_name": schema.StringAttribute{
						MarkdownDescription: "Name to verify the worker's certificate against instead of the URL's host.",
						Optional:            true,
					},
				},
			},
			"destination": schema.SingleNestedAttribute{
				MarkdownDescription: "Optional connection to the destination Kafka cluster (the cluster the worker mirrors into). " +
					"The provider uses it only at plan time, read-only, to warn before a mirror topic is created over a " +
					"destination topic that already holds records. The worker has its own connection.",
				Optional:   true,
				Attributes: kafkaConnectionProviderAttributes(),
			},
		},
	}
}

// urlPattern is a loose check of worker_url; api.NewClient checks it again.
var urlPattern = regexp.MustCompile(`^https?://[^/\s]+`)

// kafkaConnectionProviderAttributes is the schema of the provider's destination block.
func kafkaConnectionProviderAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"bootstrap_servers": schema.ListAttribute{
			MarkdownDescription: "The destination cluster's `host:port` seed brokers.",
			ElementType:         types.StringType,
			Required:            true,
			Validators: []validator.List{
				listvalidator.SizeAtLeast(1),
				listvalidator.ValueStringsAre(hostPortValidator{}),
			},
		},
		"tls": schema.SingleNestedAttribute{
			MarkdownDescription: "TLS to the destination cluster; omit for plaintext.",
			Optional:            true,
			Attributes: map[string]schema.Attribute{
				"enabled": schema.BoolAttribute{
					MarkdownDescription: "Use TLS. Implied by any other TLS setting; set it to use TLS with the system's certificate authorities alone.",
					Optional:            true,
				},
				"ca_cert_pem": schema.StringAttribute{
					MarkdownDescription: "PEM certificates of the authorities that sign the brokers' certificates.",
					Optional:            true,
				},
				"client_cert_pem": schema.StringAttribute{
					MarkdownDescription: "PEM client certificate (mutual TLS).",
					Optional:            true,
				},
				"client_key_pem": schema.StringAttribute{
					MarkdownDescription: "PEM key of `client_cert_pem`.",
					Optional:            true,
					Sensitive:           true,
				},
				"insecure_skip_verify": schema.BoolAttribute{
					MarkdownDescription: "Do not verify the brokers' certificates. For tests only.",
					Optional:            true,
				},
				"server_name": schema.StringAttribute{
					MarkdownDescription: "Name to verify the brokers' certificates against instead of their host names.",
					Optional:            true,
				},
			},
		},
		"sasl": schema.SingleNestedAttribute{
			MarkdownDescription: "SASL authentication to the destination cluster; omit for none.",
			Optional:            true,
			Attributes: map[string]schema.Attribute{
				"mechanism": schema.StringAttribute{
					MarkdownDescription: "One of `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.",
					Required:            true,
					Validators:          []validator.String{stringvalidator.OneOf(kafkaconn.Mechanisms...)},
				},
				"username": schema.StringAttribute{
					MarkdownDescription: "SASL user name.",
					Required:            true,
				},
				"password": schema.StringAttribute{
					MarkdownDescription: "SASL password. Provider configuration is never stored in the state.",
					Required:            true,
					Sensitive:           true,
				},
			},
		},
	}
}

func (p *KafkamirrorProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var data kafkamirrorProviderModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &data)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx = tflog.MaskFieldValuesWithFieldKeys(ctx, "worker_token")

	// A value that is only known after apply (for example the URL of a worker that this
	// same configuration creates) is not an error at plan time: resources then plan
	// without asking the worker, and Terraform configures the provider again before apply.
	if data.WorkerURL.IsUnknown() || data.WorkerToken.IsUnknown() || data.WorkerTLS.IsUnknown() {
		tflog.Debug(ctx, "worker connection not known yet; resources plan without the worker")
		return
	}

	url := data.WorkerURL.ValueString()
	if data.WorkerURL.IsNull() {
		url = os.Getenv(envWorkerURL)
	}
	token := data.WorkerToken.ValueString()
	if data.WorkerToken.IsNull() {
		token = os.Getenv(envWorkerToken)
	}
	if url == "" {
		resp.Diagnostics.AddAttributeError(path.Root("worker_url"), "Missing kafkamirror worker URL",
			"The provider needs the URL of the kafkamirror worker's HTTP API, for example http://127.0.0.1:8080. "+
				"Set worker_url in the provider block or the "+envWorkerURL+" environment variable.")
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("worker_token"), "Missing kafkamirror worker token",
			"Every request to the worker's HTTP API needs the bearer token the worker was started with (its KAFKAMIRROR_API_TOKEN). "+
				"Set worker_token in the provider block or the "+envWorkerToken+" environment variable.")
	}
	if resp.Diagnostics.HasError() {
		return
	}

	var tlsConfig *tls.Config
	if !data.WorkerTLS.IsNull() {
		var wt workerTLSModel
		resp.Diagnostics.Append(data.WorkerTLS.As(ctx, &wt, basetypes.ObjectAsOptions{})...)
		if resp.Diagnostics.HasError() {
			return
		}
		var err error
		tlsConfig, err = tlsSettings(wt.CACertPEM, wt.ClientCertPEM, wt.ClientKeyPEM, wt.ServerName, wt.InsecureSkipVerify).Config()
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("worker_tls"), "Invalid worker TLS settings",
				fmt.Sprintf("Building the TLS configuration for the worker's API failed: %v.", err))
			return
		}
	}

	client, err := api.NewClient(api.ClientConfig{
		URL:       url,
		Token:     token,
		TLSConfig: tlsConfig,
		// The default per-attempt timeout outlasts the worker's command bound, which a stop
		// with stop_mode = "promote" (its promote_timeout) stays within.
		UserAgent: fmt.Sprintf("terraform-provider-kafkamirror/%s (terraform %s)", p.version, req.TerraformVersion),
	})
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("worker_url"), "Invalid kafkamirror worker URL",
			fmt.Sprintf("Creating the client for the worker's HTTP API failed: %v.", err))
		return
	}

	pd := &providerData{client: client}
	if !data.Destination.IsNull() {
		if data.Destination.IsUnknown() {
			tflog.Debug(ctx, "destination connection not known yet; plan-time destination checks are skipped")
		} else {
			dst, diags := destinationFromModel(ctx, data.Destination)
			resp.Diagnostics.Append(diags...)
			if resp.Diagnostics.HasError() {
				return
			}
			pd.destination = dst
		}
	}
	tflog.Debug(ctx, "configured the kafkamirror worker client", map[string]any{
		"worker_url": url, "destination_checks": pd.destination != nil,
	})
	resp.DataSourceData = pd
	resp.ResourceData = pd
}

func (p *KafkamirrorProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewClusterMirrorResource,
		NewMirrorTopicResource,
	}
}

func (p *KafkamirrorProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewClusterMirrorDataSource,
		NewMirrorTopicDataSource,
		NewSourceTopicsDataSource,
	}
}

// providerDataFrom is the Configure step shared by resources and data sources: nil data
// (the provider's own Configure has not run, or its values were unknown) is not an error.
func providerDataFrom(data any, diags interface {
	AddError(summary, detail string)
}) *providerData {
	if data == nil {
		return nil
	}
	pd, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data",
			fmt.Sprintf("Expected *providerData, got %T. This is a bug in the kafkamirror provider; please report it.", data))
		return nil
	}
	return pd
}

// notConfiguredDetail explains a missing worker client at apply or read time.
const notConfiguredDetail = "The kafkamirror provider has no worker client: its worker_url or worker_token was not known " +
	"when this operation ran. Make sure they do not depend on values that are only known after apply."

// joinQuoted renders names as "a", "b".
func joinQuoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
