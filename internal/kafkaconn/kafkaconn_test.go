package kafkaconn

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestOpts(t *testing.T) {
	seeds := []string{"kafka-1:9092"}
	for _, tt := range []struct {
		name    string
		s       Settings
		wantErr string // "" = valid
		opts    int
	}{
		{"plaintext", Settings{BootstrapServers: seeds}, "", 3},
		{"tls and scram", Settings{BootstrapServers: seeds, TLS: &TLS{ServerName: "kafka"}, SASL: &SASL{Mechanism: "scram-sha-512", Username: "u", Password: "p"}}, "", 5},
		{"plain", Settings{BootstrapServers: seeds, SASL: &SASL{Mechanism: "PLAIN", Username: "u"}}, "", 4},
		{"no servers", Settings{}, "at least one host:port is required", 0},
		{"no port", Settings{BootstrapServers: []string{"kafka-1"}}, `"kafka-1" is not host:port`, 0},
		{"empty port", Settings{BootstrapServers: []string{"kafka-1:"}}, "is not host:port", 0},
		{"bad CA", Settings{BootstrapServers: seeds, TLS: &TLS{CACertPEM: "junk"}}, "tls.ca_cert_pem: no certificate found", 0},
		{"cert without key", Settings{BootstrapServers: seeds, TLS: &TLS{ClientCertPEM: "junk"}}, "tls client certificate and key", 0},
		{"no user", Settings{BootstrapServers: seeds, SASL: &SASL{Mechanism: "PLAIN"}}, "sasl.username is required", 0},
		{"unknown mechanism", Settings{BootstrapServers: seeds, SASL: &SASL{Mechanism: "GSSAPI", Username: "u"}}, `sasl.mechanism "GSSAPI" is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)`, 0},
	} {
		opts, err := Opts(tt.s)
		switch {
		case tt.wantErr == "" && (err != nil || len(opts) != tt.opts):
			t.Errorf("%s: %d options, error %v; want %d options", tt.name, len(opts), err, tt.opts)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	cfg, err := TLS{ServerName: "kafka", InsecureSkipVerify: true}.Config()
	if err != nil || cfg.ServerName != "kafka" || !cfg.InsecureSkipVerify || cfg.MinVersion == 0 || cfg.RootCAs != nil {
		t.Fatalf("Config() = %+v, %v", cfg, err)
	}
}

// TestSecretsRedacted: settings print their secrets as [redacted] whatever the verb.
func TestSecretsRedacted(t *testing.T) {
	s := Settings{BootstrapServers: []string{"k:1"}, TLS: &TLS{ClientKeyPEM: "KEY-SECRET"}, SASL: &SASL{Mechanism: "PLAIN", Username: "u", Password: "PW-SECRET"}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		for _, v := range []any{*s.TLS, s.TLS, *s.SASL, s.SASL, s} {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, "SECRET") {
				t.Errorf("%s of %T prints a secret: %s", verb, v, out)
			}
		}
	}
	if got := s.SASL.String(); !strings.Contains(got, Redacted) || !strings.Contains(got, "u") {
		t.Errorf("SASL.String() = %q", got)
	}
}

// Retries wait as Kafka's own clients do: 100 ms doubling up to 1 s, each within 20 %.
func TestRetryBackoff(t *testing.T) {
	for _, tt := range []struct {
		fails int
		want  time.Duration
	}{{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {40, time.Second}, {requestRetries, time.Second}} {
		for range 100 {
			if got := retryBackoff(tt.fails); got < tt.want*8/10 || got > tt.want*12/10 {
				t.Fatalf("retryBackoff(%d) = %v, want %v ± 20 %%", tt.fails, got, tt.want)
			}
		}
	}
}
