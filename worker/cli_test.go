package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIOutputHasNoSecrets runs the help, usage and error paths of every subcommand with
// secrets in the environment (and in a config file) and checks that none of them is printed.
func TestCLIOutputHasNoSecrets(t *testing.T) {
	t.Parallel()
	// Every secret value contains secretMark, and nothing else the worker prints does.
	const (
		secretMark = "-SECRET-"
		token      = "TOKEN-SECRET-0123456789abcdef"
		key        = "KEY-SECRET-0123456789abcdef"
		password   = "PASSWORD-SECRET-0123456789abcdef"
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "http://" + ln.Addr().String() // a worker URL where nothing answers
	ln.Close()
	badFile := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(badFile, []byte("api:\n  token: FILE-SECRET-0123456789abcdef\n  tokn: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"KAFKAMIRROR_API_TOKEN":                     token,
		"KAFKAMIRROR_SECRET_KEY":                    key,
		"KAFKAMIRROR_DESTINATION_SASL_PASSWORD":     password,
		"KAFKAMIRROR_DESTINATION_SASL_MECHANISM":    "PLAIN",
		"KAFKAMIRROR_DESTINATION_SASL_USERNAME":     "user",
		"KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
		"KAFKAMIRROR_WORKER_URL":                    nowhere,
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string // overrides base; "" deletes
		want string            // in the output, so that the case is not vacuous
	}{
		{"bare help", []string{"--help"}, nil, "-api-token"},
		{"run -h", []string{"run", "-h"}, nil, "-destination-sasl-password"},
		{"demo -h", []string{"demo", "-h"}, nil, "-secret-key"},
		{"describe -h", []string{"describe", "-h"}, nil, "-api-token"},
		{"describe --help", []string{"describe", "--help"}, nil, "-api-token"},
		{"list -h", []string{"list", "-h"}, nil, "-api-token"},
		{"help", []string{"help"}, nil, "Usage"},
		{"unknown command", []string{"bogus"}, nil, "unknown command"},
		{"run: unknown flag", []string{"run", "--bogus"}, nil, "-api-token"},
		{"demo: unknown flag", []string{"demo", "--bogus"}, nil, "-api-token"},
		{"describe: unknown flag", []string{"describe", "--bogus"}, nil, "-api-token"},
		{"list: unknown flag", []string{"list", "--bogus"}, nil, "-api-token"},
		{"run: unexpected argument", []string{"run", "extra"}, nil, "unexpected argument"},
		{"describe: unexpected argument", []string{"describe", "extra"}, nil, "unexpected argument"},
		{"run: invalid setting", []string{"run", "--log-level", "loud"}, nil, "log.level"},
		{"run: token with white space", nil, map[string]string{"KAFKAMIRROR_API_TOKEN": token + " x"}, "white space"},
		{"run: token too short", nil, map[string]string{"KAFKAMIRROR_API_TOKEN": "T-SECRET-"}, "at least 16"},
		{"run: secret key too short", nil, map[string]string{"KAFKAMIRROR_SECRET_KEY": "K-SECRET-"}, "secret_key"},
		{"run: password without mechanism", nil, map[string]string{"KAFKAMIRROR_DESTINATION_SASL_MECHANISM": ""}, "mechanism"},
		{"run: unknown mechanism", nil, map[string]string{"KAFKAMIRROR_DESTINATION_SASL_MECHANISM": "NOPE"}, "NOPE"},
		{"run: bad config file", nil, map[string]string{"KAFKAMIRROR_CONFIG": badFile}, "api.tokn"},
		{"demo: destination given", []string{"demo"}, nil, "embedded"},
		{"describe: worker unreachable", []string{"describe"}, nil, "kafkamirror-worker describe"},
		{"list: worker unreachable", []string{"list"}, nil, "kafkamirror-worker list"},
		{"list: token the client cannot send", []string{"list"}, map[string]string{"KAFKAMIRROR_API_TOKEN": token + "\n"}, "kafkamirror-worker list"},
		{"describe: bad CA file", []string{"describe", "--worker-ca-file", badFile}, nil, "--worker-ca-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			var stdout, stderr bytes.Buffer
			code := realMain(tc.args, &stdout, &stderr, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			out := stdout.String() + stderr.String()
			if !strings.Contains(out, tc.want) {
				t.Fatalf("exit code %d, output lacks %q:\n%s", code, tc.want, out)
			}
			if strings.Contains(out, secretMark) {
				t.Errorf("exit code %d, output shows a secret:\n%s", code, out)
			}
		})
	}
}
