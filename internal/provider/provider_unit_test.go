package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// TestProviderSchemas: the framework validates every schema (write-only attributes not in
// computed ones, defaults only on computed attributes, ...) when it serves them.
func TestProviderSchemas(t *testing.T) {
	server, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	for _, name := range []string{"kafkamirror_cluster_mirror", "kafkamirror_mirror_topic"} {
		if resp.ResourceSchemas[name] == nil {
			t.Errorf("no resource %s", name)
		}
	}
	for _, name := range []string{"kafkamirror_cluster_mirror", "kafkamirror_mirror_topic", "kafkamirror_source_topics"} {
		if resp.DataSourceSchemas[name] == nil {
			t.Errorf("no data source %s", name)
		}
	}
	// Every attribute is documented.
	var undocumented []string
	var walk func(prefix string, b *tfprotov6.SchemaBlock)
	walk = func(prefix string, b *tfprotov6.SchemaBlock) {
		for _, a := range b.Attributes {
			if a.Description == "" {
				undocumented = append(undocumented, prefix+a.Name)
			}
			if a.NestedType != nil {
				walk(prefix+a.Name+".", &tfprotov6.SchemaBlock{Attributes: a.NestedType.Attributes})
			}
		}
	}
	walk("provider.", resp.Provider.Block)
	for name, s := range resp.ResourceSchemas {
		walk(name+".", s.Block)
	}
	for name, s := range resp.DataSourceSchemas {
		walk("data."+name+".", s.Block)
	}
	if len(undocumented) > 0 {
		t.Errorf("attributes without a description: %s", strings.Join(undocumented, ", "))
	}
}

// configure runs the provider's Configure with the given provider block values
// (attribute name → tftypes value; the others null).
func configure(t *testing.T, values map[string]tftypes.Value) *provider.ConfigureResponse {
	t.Helper()
	p := New("test")()
	var sr provider.SchemaResponse
	p.Schema(context.Background(), provider.SchemaRequest{}, &sr)
	typ := sr.Schema.Type().TerraformType(context.Background()).(tftypes.Object)
	attrs := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		attrs[name] = tftypes.NewValue(at, nil)
		if v, ok := values[name]; ok {
			attrs[name] = v
		}
	}
	resp := &provider.ConfigureResponse{}
	p.Configure(context.Background(), provider.ConfigureRequest{
		Config: tfsdk.Config{Schema: sr.Schema, Raw: tftypes.NewValue(typ, attrs)},
	}, resp)
	return resp
}

func TestProviderConfigure(t *testing.T) {
	t.Setenv(envWorkerURL, "")
	t.Setenv(envWorkerToken, "")
	str := func(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }
	unknown := tftypes.NewValue(tftypes.String, tftypes.UnknownValue)

	// Unknown at plan time (a worker this configuration creates): no error, no client.
	resp := configure(t, map[string]tftypes.Value{"worker_url": unknown, "worker_token": str("t")})
	if resp.Diagnostics.HasError() || resp.ResourceData != nil {
		t.Fatalf("unknown URL: %v, data %v", resp.Diagnostics, resp.ResourceData)
	}

	// Missing: a configuration error naming both places.
	resp = configure(t, map[string]tftypes.Value{"worker_token": str("t")})
	if !resp.Diagnostics.HasError() || !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), envWorkerURL) {
		t.Fatalf("missing URL: %v", resp.Diagnostics)
	}

	// Environment fallbacks.
	t.Setenv(envWorkerURL, "http://127.0.0.1:8080")
	t.Setenv(envWorkerToken, "from-env")
	resp = configure(t, nil)
	if resp.Diagnostics.HasError() {
		t.Fatalf("from the environment: %v", resp.Diagnostics)
	}
	if pd, ok := resp.ResourceData.(*providerData); !ok || pd.client == nil || pd.destination != nil {
		t.Fatalf("provider data %#v", resp.ResourceData)
	}

	// A URL the client refuses.
	resp = configure(t, map[string]tftypes.Value{"worker_url": str("ftp://worker")})
	if !resp.Diagnostics.HasError() || resp.Diagnostics.Errors()[0].Summary() != "Invalid kafkamirror worker URL" {
		t.Fatalf("ftp URL: %v", resp.Diagnostics)
	}
}
