package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// destinationConn is the provider's read-only connection to the destination cluster, for
// plan-time checks. A client is opened per check and closed after it: providers have no
// shutdown hook, and checks are rare.
type destinationConn struct {
	bootstrap []string
	tls       *tls.Config
	sasl      sasl.Mechanism
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
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.bootstrap...),
		kgo.ClientID("terraform-provider-kafkamirror"),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(10 * time.Second),
	}
	if d.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(d.tls.Clone()))
	}
	if d.sasl != nil {
		opts = append(opts, kgo.SASL(d.sasl))
	}
	cl, err := kgo.NewClient(opts...)
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
	diags.Append(m.BootstrapServers.ElementsAs(ctx, &d.bootstrap, false)...)
	if !m.TLS.IsNull() {
		var t kafkaTLSModel
		diags.Append(m.TLS.As(ctx, &t, basetypes.ObjectAsOptions{})...)
		if diags.HasError() {
			return nil, diags
		}
		on := t.Enabled.ValueBool() || t.CACertPEM.ValueString() != "" || t.ClientCertPEM.ValueString() != "" ||
			t.ServerName.ValueString() != "" || t.InsecureSkipVerify.ValueBool()
		if on {
			cfg, err := buildTLSConfig(t.CACertPEM.ValueString(), t.ClientCertPEM.ValueString(), t.ClientKeyPEM.ValueString(),
				t.ServerName.ValueString(), t.InsecureSkipVerify.ValueBool())
			if err != nil {
				diags.AddAttributeError(path.Root("destination").AtName("tls"), "Invalid destination TLS settings",
					fmt.Sprintf("Building the TLS configuration for the destination cluster failed: %v.", err))
				return nil, diags
			}
			d.tls = cfg
		}
	}
	if !m.SASL.IsNull() {
		var s kafkaSASLModel
		diags.Append(m.SASL.As(ctx, &s, basetypes.ObjectAsOptions{})...)
		if diags.HasError() {
			return nil, diags
		}
		mech, err := saslMechanism(s.Mechanism.ValueString(), s.Username.ValueString(), s.Password.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("destination").AtName("sasl").AtName("mechanism"), "Invalid destination SASL settings", err.Error())
			return nil, diags
		}
		d.sasl = mech
	}
	return d, diags
}

func saslMechanism(mechanism, user, pass string) (sasl.Mechanism, error) {
	switch strings.ToUpper(mechanism) {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("SASL mechanism %q is not one of %s", mechanism, strings.Join(saslMechanisms, ", "))
}

// buildTLSConfig builds a client TLS configuration from inline PEM data.
func buildTLSConfig(caPEM, certPEM, keyPEM, serverName string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: insecure} //nolint:gosec // insecure_skip_verify is the user's explicit choice
	if caPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caPEM)) {
			return nil, errors.New("ca_cert_pem holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	if certPEM != "" || keyPEM != "" {
		cert, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
		if err != nil {
			return nil, fmt.Errorf("client certificate and key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
