// Package kafkaconn turns the settings of a connection to a Kafka cluster (bootstrap
// servers, TLS, SASL) into franz-go client options. The engine (a mirror's source and the
// destination), the worker (its destination settings) and the provider (its plan-time
// destination checks, through DescribeTopic) all connect through it. Its settings print their secrets as
// "[redacted]" whatever the verb, so a log line or an error never leaks them.
package kafkaconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Settings is how to reach a cluster.
type Settings struct {
	// BootstrapServers are host:port seeds.
	BootstrapServers []string
	// TLS is nil for plaintext.
	TLS *TLS
	// SASL is nil for no SASL.
	SASL *SASL
}

// TLS configures TLS from inline PEM data. ClientKeyPEM is a secret.
type TLS struct {
	CACertPEM          string
	ClientCertPEM      string
	ClientKeyPEM       string // secret
	InsecureSkipVerify bool
	ServerName         string
}

// SASL configures SASL. Password is a secret.
type SASL struct {
	Mechanism string // one of Mechanisms
	Username  string
	Password  string // secret
}

// Mechanisms are the SASL mechanisms kafkamirror speaks.
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Opts turns settings into franz-go options: seed brokers, TLS and SASL. It checks the
// settings, so a bad PEM or an unknown mechanism is reported when the settings are given
// rather than as a connection failure later.
func Opts(s Settings) ([]kgo.Opt, error) {
	if len(s.BootstrapServers) == 0 {
		return nil, errors.New("bootstrap_servers: at least one host:port is required")
	}
	for _, hp := range s.BootstrapServers {
		if i := strings.LastIndexByte(hp, ':'); i <= 0 || i == len(hp)-1 {
			return nil, fmt.Errorf("bootstrap_servers: %q is not host:port", hp)
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(s.BootstrapServers...), kgo.RetryBackoffFn(retryBackoff), kgo.RequestRetries(requestRetries)}
	if s.TLS != nil {
		cfg, err := s.TLS.Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.SASL != nil {
		if s.SASL.Username == "" {
			return nil, errors.New("sasl.username is required")
		}
		m, err := s.SASL.AsMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// retryBackoff is how long a client waits before it tries a failed request again the
// fails-th time: Apache Kafka's own clients' backoff (retry.backoff.ms 100 ms doubling up to
// retry.backoff.max.ms 1 s, 20 % jitter, KIP-580) rather than franz-go's 250 ms doubling up
// to 5 s. What a retry waits for often comes piecemeal — a broker creates a new topic's
// partition logs one after another for seconds, and a request is retried whole while any of
// its partitions is not there yet — and franz-go's steps would find the last one up to twice
// as late as it came.
func retryBackoff(fails int) time.Duration {
	const first, most = 100 * time.Millisecond, time.Second
	d := most
	if fails < 5 { // 100, 200, 400, 800 ms
		d = first << max(fails-1, 0)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// requestRetries leaves the end of a request's retries to franz-go's retry timeout (30 s for
// most requests), as with its own backoff, rather than to the count its shorter steps reach
// sooner.
const requestRetries = 60

// Config builds a client TLS configuration (TLS 1.2 or later).
func (t TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName} //nolint:gosec // skip-verify is an explicit, documented opt-in
	if t.CACertPEM != "" {
		pool, err := CertPool([]byte(t.CACertPEM))
		if err != nil {
			return nil, fmt.Errorf("tls.ca_cert_pem: %w", err)
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
	return cfg, nil
}

// CertPool returns a pool of the certificates in PEM data, or an error when it holds none.
func CertPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no certificate found in the PEM data")
	}
	return pool, nil
}

// AsMechanism returns the franz-go SASL mechanism; the name is matched in any case.
func (s SASL) AsMechanism() (sasl.Mechanism, error) {
	switch strings.ToUpper(s.Mechanism) {
	case "PLAIN":
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl.mechanism %q is not supported (%s)", s.Mechanism, strings.Join(Mechanisms, ", "))
}

// Redacted is what a secret prints as.
const Redacted = "[redacted]"

func redact(s string) string {
	if s == "" {
		return ""
	}
	return Redacted
}

// Format prints the settings with ClientKeyPEM redacted, for every verb.
func (t TLS) Format(f fmt.State, verb rune) {
	type plain TLS // no methods: printed field by field
	p := plain(t)
	p.ClientKeyPEM = redact(p.ClientKeyPEM)
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String returns the settings with ClientKeyPEM redacted.
func (t TLS) String() string { return fmt.Sprintf("%+v", t) }

// Format prints the settings with Password redacted, for every verb.
func (s SASL) Format(f fmt.State, verb rune) {
	type plain SASL
	p := plain(s)
	p.Password = redact(p.Password)
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String returns the settings with Password redacted.
func (s SASL) String() string { return fmt.Sprintf("%+v", s) }
