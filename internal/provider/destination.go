package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
)

// destinationConn is the provider's read-only connection to the destination cluster, for
// plan-time checks. A client is opened per check and closed after it: providers have no
// shutdown hook, and checks are rare.
type destinationConn struct {
	settings kafkaconn.Settings
}

// destinationTopic is what a plan-time check learns about a destination topic.
type destinationTopic struct {
	exists     bool
	partitions int
	// records is the sum over partitions of end offset - start offset: the records (and
	// transaction markers) the topic holds.
	records int64
}

// describeTopic reports whether topic exists on the destination and how many records it
// holds. It bounds itself to 15 seconds: a plan must not hang on an unreachable cluster.
func (d *destinationConn) describeTopic(ctx context.Context, topic string) (destinationTopic, error) {
	opts, err := kafkaconn.Opts(d.settings)
	if err != nil {
		return destinationTopic{}, err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ClientID("terraform-provider-kafkamirror"),
		kgo.DialTimeout(5*time.Second),
		kgo.RetryTimeout(10*time.Second),
	)...)
	if err != nil {
		return destinationTopic{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	meta, err := adm.Metadata(ctx, topic)
	if err != nil {
		return destinationTopic{}, fmt.Errorf("metadata of %q: %w", topic, err)
	}
	if !meta.Topics.Has(topic) {
		return destinationTopic{}, nil
	}
	if terr := meta.Topics[topic].Err; terr != nil {
		return destinationTopic{}, fmt.Errorf("metadata of %q: %w", topic, terr)
	}
	out := destinationTopic{exists: true, partitions: len(meta.Topics[topic].Partitions)}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return out, fmt.Errorf("start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return out, fmt.Errorf("end offsets of %q: %w", topic, err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			out.records += o.Offset - s.Offset
		}
	})
	return out, nil
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
