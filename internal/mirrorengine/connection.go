package mirrorengine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ClientOpts turns a connection description into franz-go options: seed brokers, TLS and
// SASL. It checks the settings, so a bad PEM or an unknown mechanism is reported at create
// time rather than as a connection failure later.
func ClientOpts(conn SourceConnection) ([]kgo.Opt, error) {
	if len(conn.BootstrapServers) == 0 {
		return nil, errors.New("bootstrap_servers: at least one host:port is required")
	}
	for _, hp := range conn.BootstrapServers {
		if i := strings.LastIndexByte(hp, ':'); i <= 0 || i == len(hp)-1 {
			return nil, fmt.Errorf("bootstrap_servers: %q is not host:port", hp)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(conn.BootstrapServers...)}
	if t := conn.TLS; t != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName} //nolint:gosec // skip-verify is an explicit, documented opt-in
		if t.CACertPEM != "" {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(t.CACertPEM)) {
				return nil, errors.New("tls.ca_cert_pem: no certificate found in the PEM data")
			}
			cfg.RootCAs = pool
		}
		if t.ClientCertPEM != "" || t.ClientKeyPEM != "" {
			cert, err := tls.X509KeyPair([]byte(t.ClientCertPEM), []byte(t.ClientKeyPEM))
			if err != nil {
				return nil, fmt.Errorf("tls client certificate and key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s := conn.SASL; s != nil {
		if s.Username == "" {
			return nil, errors.New("sasl.username is required")
		}
		switch strings.ToUpper(s.Mechanism) {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("sasl.mechanism %q is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", s.Mechanism)
		}
	}
	return opts, nil
}

// clusterID asks a cluster for its id (never a cached value: a changed source cluster id
// must be noticed).
func clusterID(ctx context.Context, cl *kgo.Client) (string, error) {
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err == nil && resp.ErrorCode != 0 {
		err = fmt.Errorf("describe cluster: error code %d", resp.ErrorCode)
	}
	if err != nil {
		// Brokers before 2.8 have no DescribeCluster; Metadata carries the id too.
		meta, merr := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if merr != nil {
			return "", err
		}
		if meta.ClusterID == nil {
			return "", errors.New("the cluster reports no cluster id")
		}
		return *meta.ClusterID, nil
	}
	return resp.ClusterID, nil
}
