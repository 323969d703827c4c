package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
)

// destinationConn is the provider's read-only connection to the destination cluster, for
// plan-time checks. A client is opened per check and closed after it: providers have no
// shutdown hook, and checks are rare.
type destinationConn struct {
	settings kafkaconn.Settings
}

// describeTopic reports whether topic exists on the destination and how many records it
// holds, within 15 seconds: a plan must not hang on an unreachable cluster.
func (d *destinationConn) describeTopic(ctx context.Context, topic string) (kafkaconn.TopicSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return kafkaconn.DescribeTopic(ctx, d.settings, "terraform-provider-kafkamirror", topic)
}

// destinationFromModel builds the destination connection from the provider block.
func destinationFromModel(ctx context.Context, obj types.Object) (*destinationConn, diag.Diagnostics) {
	var diags diag.Diagnostics
	var m destinationModel
	diags.Append(obj.As(ctx, &m, basetypes.ObjectAsOptions{})...)
	if diags.HasError() {
		return nil, diags
	}
	if m.BootstrapServers.IsUnknown() || m.TLS.IsUnknown() || m.SASL.IsUnknown() {
		return nil, diags
	}
	d := &destinationConn{}
	diags.Append(m.BootstrapServers.ElementsAs(ctx, &d.settings.BootstrapServers, false)...)
	if !m.TLS.IsNull() {
		var t kafkaTLSModel
		diags.Append(m.TLS.As(ctx, &t, basetypes.ObjectAsOptions{})...)
		if diags.HasError() {
			return nil, diags
		}
		on := t.Enabled.ValueBool() || t.CACertPEM.ValueString() != "" || t.ClientCertPEM.ValueString() != "" ||
			t.ServerName.ValueString() != "" || t.InsecureSkipVerify.ValueBool()
		if on {
			settings := tlsSettings(t.CACertPEM, t.ClientCertPEM, t.ClientKeyPEM, t.ServerName, t.InsecureSkipVerify)
			if _, err := settings.Config(); err != nil {
				diags.AddAttributeError(path.Root("destination").AtName("tls"), "Invalid destination TLS settings",
					fmt.Sprintf("Building the TLS configuration for the destination cluster failed: %v.", err))
				return nil, diags
			}
			d.settings.TLS = &settings
		}
	}
	if !m.SASL.IsNull() {
		var s kafkaSASLModel
		diags.Append(m.SASL.As(ctx, &s, basetypes.ObjectAsOptions{})...)
		if diags.HasError() {
			return nil, diags
		}
		settings := kafkaconn.SASL{Mechanism: s.Mechanism.ValueString(), Username: s.Username.ValueString(), Password: s.Password.ValueString()}
		if _, err := settings.AsMechanism(); err != nil {
			diags.AddAttributeError(path.Root("destination").AtName("sasl").AtName("mechanism"), "Invalid destination SASL settings", err.Error())
			return nil, diags
		}
		d.settings.SASL = &settings
	}
	return d, diags
}

// tlsSettings gathers the TLS attributes of a destination or worker_tls block.
func tlsSettings(caPEM, certPEM, keyPEM, serverName types.String, insecure types.Bool) kafkaconn.TLS {
	return kafkaconn.TLS{CACertPEM: caPEM.ValueString(), ClientCertPEM: certPEM.ValueString(), ClientKeyPEM: keyPEM.ValueString(),
		ServerName: serverName.ValueString(), InsecureSkipVerify: insecure.ValueBool()}
}
