package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
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
	nowhere := fmt.Sprintf("http://127.0.0.1:%d", kafkatest.FreePort(t)) // a worker URL where nothing answers
	badFile := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(badFile, []byte("api:\n  token: FILE-SECRET-0123456789abcdef\n  tokn: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretConfig := filepath.Join(t.TempDir(), "mirror.properties")
	if err := os.WriteFile(secretConfig, []byte("bootstrap.servers=127.0.0.1:9092\nsecurity.protocol=SASL_SSL\n"+
		"sasl.jaas.config=x required username=\"u\" password=\""+password+"\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingCA := filepath.Join(t.TempDir(), "ca.properties")
	if err := os.WriteFile(missingCA, []byte("bootstrap.servers=127.0.0.1:9092\nsecurity.protocol=SASL_SSL\n"+
		"sasl.password="+password+"\nsasl.username=u\nssl.ca.location=/nonexistent/ca.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unknownKey := filepath.Join(t.TempDir(), "unknown.properties")
	if err := os.WriteFile(unknownKey, []byte("bootstrap.servers=127.0.0.1:9092\nsasl.passwrd="+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notKeyValue := filepath.Join(t.TempDir(), "broken.properties")
	if err := os.WriteFile(notKeyValue, []byte(password+"\n"), 0o600); err != nil {
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
		{"bare help lists the commands", []string{"--help"}, nil, "kafkamirror-worker stop --mirror M"},
		{"bare -h", []string{"-h"}, nil, "kafkamirror-worker create --mirror M"},
		{"create -h", []string{"create", "-h"}, nil, "-mirror-config"},
		{"delete -h", []string{"delete", "-h"}, nil, "-api-token"},
		{"start -h", []string{"start", "-h"}, nil, "-divergence"},
		{"stop -h", []string{"stop", "-h"}, nil, "-promote"},
		{"pause -h", []string{"pause", "-h"}, nil, "-topics"},
		{"resume -h", []string{"resume", "-h"}, nil, "-topics"},
		{"stop: unknown flag", []string{"stop", "--bogus"}, nil, "-api-token"},
		{"create: unexpected argument", []string{"create", "extra"}, nil, "unexpected argument"},
		{"stop: no mirror", []string{"stop", "--topics", "orders"}, nil, "--mirror is required"},
		{"pause: no topics", []string{"pause", "--mirror", "m"}, nil, "--topics is required"},
		{"create: no config", []string{"create", "--mirror", "m"}, nil, "--mirror-config is required"},
		{"start: worker unreachable", []string{"start", "--mirror", "m", "--topics", "orders"}, nil, "kafkamirror-worker start"},
		{"delete: worker unreachable", []string{"delete", "--mirror", "m"}, nil, "kafkamirror-worker delete"},
		{"create: worker unreachable", []string{"create", "--mirror", "m", "--mirror-config", secretConfig}, nil, "kafkamirror-worker create"},
		{"create: missing CA file", []string{"create", "--mirror", "m", "--mirror-config", missingCA}, nil, "ssl.ca.location"},
		{"create: unknown key", []string{"create", "--mirror", "m", "--mirror-config", unknownKey}, nil, `unknown key "sasl.passwrd"`},
		{"create: not key=value", []string{"create", "--mirror", "m", "--mirror-config", notKeyValue}, nil, "line 1 is not key=value"},
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

// TestReadMirrorConfig: the Kafka client properties of --mirror-config.
func TestReadMirrorConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("CA PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := func(content string) string {
		t.Helper()
		f, err := os.CreateTemp(dir, "*.properties")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return f.Name()
	}
	for _, tc := range []struct {
		name, content, want, wantID, err string
	}{
		{"plaintext", "# a comment\nbootstrap.servers = a:9092, b:9092\n", `{"bootstrap_servers":["a:9092","b:9092"]}`, "", ""},
		{"SASL_SSL with a JAAS line", "bootstrap.servers=a:9093\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n" +
			`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="p w";` + "\n" +
			"ssl.ca.location=" + ca + "\nsource.cluster.id=abc\n",
			`{"bootstrap_servers":["a:9093"],"tls":{"ca_cert_pem":"CA PEM"},"sasl":{"mechanism":"SCRAM-SHA-512","username":"mirror","password":"p w"}}`, "abc", ""},
		{"librdkafka names, default mechanism", "bootstrap.servers: a:9092\nsecurity.protocol: SASL_PLAINTEXT\nsasl.username: u\nsasl.password: p\n",
			`{"bootstrap_servers":["a:9092"],"sasl":{"mechanism":"PLAIN","username":"u","password":"p"}}`, "", ""},
		{"no bootstrap", "security.protocol=SSL\n", "", "", "bootstrap.servers is required"},
		{"SASL without a password", "bootstrap.servers=a:1\nsecurity.protocol=SASL_SSL\nsasl.username=u\n", "", "", "needs a user name and a password"},
		{"unknown protocol", "bootstrap.servers=a:1\nsecurity.protocol=KERBEROS\n", "", "", `security.protocol "KERBEROS"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, id, err := readMirrorConfig(file(tc.content))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			got, _ := json.Marshal(src)
			if err != nil || string(got) != tc.want || id != tc.wantID {
				t.Fatalf("got %s, %q, %v\nwant %s, %q", got, id, err, tc.want, tc.wantID)
			}
		})
	}
}

func TestPartitionNote(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name string
		p    api.Partition
		want string
	}{
		{"both answered", api.Partition{SourceOffsetAt: now, DestinationOffsetAt: now}, ""},
		{"source stale and stalled", api.Partition{SourceOffsetAt: now.Add(-41 * time.Second), DestinationOffsetAt: now, Unreachable: []string{"source"},
			Error: "stalled: source unreachable,\nmirroring sessions failing for 38s"},
			"source unreachable, its offset from 41s ago; stalled: source unreachable, mirroring sessions failing for 38s"},
		{"destination never read", api.Partition{SourceOffsetAt: now, Unreachable: []string{"destination"}}, "destination unreachable, its offset never read"},
	} {
		if got := partitionNote(c.p, now); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
