package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// load runs the configuration path of `run` in-process: flags, then loadConfig, then
// validate.
func load(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	values, configPath := registerSettings(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := loadConfig(values, *configPath, getenv)
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.validate(false)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigNames(t *testing.T) {
	// Scripts and docs rely on these exact names (the README's table).
	for key, want := range map[string][2]string{
		"destination.bootstrap_servers": {"KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS", "destination-bootstrap-servers"},
		"api.listen":                    {"KAFKAMIRROR_API_LISTEN", "api-listen"},
		"api.token":                     {"KAFKAMIRROR_API_TOKEN", "api-token"},
		"secret_key":                    {"KAFKAMIRROR_SECRET_KEY", "secret-key"},
	} {
		s := settingByKey(key)
		if s == nil || s.env() != want[0] || s.flag() != want[1] {
			t.Errorf("%s: got %v", key, s)
		}
	}
	if configEnv != "KAFKAMIRROR_CONFIG" {
		t.Errorf("config env %s", configEnv)
	}
	if d := defaultConfig(); d.API.Listen != "127.0.0.1:8080" {
		t.Errorf("default listen %s", d.API.Listen)
	}
}

func TestConfigPrecedenceFileEnvFlags(t *testing.T) {
	file := writeFile(t, "worker.yaml", `
destination:
  bootstrap_servers: [file-a:9092, file-b:9092]
  sasl:
    mechanism: SCRAM-SHA-512
    username: file-user
    password: file-pass
api:
  listen: 127.0.0.1:1001
  token: file-token-0123456789
secret_key: file-secret-key-0123456789
retry:
  max_attempts: 3
  initial_backoff: 1s
  max_backoff: 10s
log:
  format: text
  level: debug
state:
  topic: __custom_state
fetch_buffer_bytes: 1048576
fetch_memory_bytes: 67108864
`)
	env := map[string]string{
		"KAFKAMIRROR_CONFIG":     file,
		"KAFKAMIRROR_API_LISTEN": "127.0.0.1:1002",
		"KAFKAMIRROR_API_TOKEN":  "env-token-0123456789",
		"KAFKAMIRROR_LOG_LEVEL":  "warn",
	}
	cfg, err := load(t, []string{"--api-listen", "127.0.0.1:1003", "--log-level=error", "--destination-tls-enabled"}, env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"bootstrap from the file (a YAML list)", cfg.Destination.BootstrapServers, []string{"file-a:9092", "file-b:9092"}},
		{"listen: flag over env over file", cfg.API.Listen, "127.0.0.1:1003"},
		{"token: env over file", cfg.API.Token, "env-token-0123456789"},
		{"log level: flag over env", cfg.Log.Level, "error"},
		{"log format from the file", cfg.Log.Format, "text"},
		{"secret key from the file", cfg.SecretKey, "file-secret-key-0123456789"},
		{"sasl from the file", cfg.Destination.SASL, SASLConfig{"SCRAM-SHA-512", "file-user", "file-pass"}},
		{"retry", cfg.Retry, RetryConfig{time.Second, 10 * time.Second, 3}},
		{"state topic", cfg.State.Topic, "__custom_state"},
		{"fetch buffer from the file", cfg.FetchBufferBytes, int64(1 << 20)},
		{"fetch memory from the file", cfg.FetchMemoryBytes, int64(64 << 20)},
		{"bool flag without a value", cfg.Destination.TLS.Enabled, true},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}

	// --config wins over KAFKAMIRROR_CONFIG; the environment still wins over that file.
	other := writeFile(t, "other.yaml", "destination:\n  bootstrap_servers: other:1\napi:\n  token: other-token-0123456789\n")
	cfg, err = load(t, []string{"--config", other}, env)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(cfg.Destination.BootstrapServers, []string{"other:1"}) || cfg.API.Token != "env-token-0123456789" {
		t.Errorf("--config: bootstrap %v token %q", cfg.Destination.BootstrapServers, cfg.API.Token)
	}

	// Environment over file for a list given as a comma-separated string.
	cfg, err = load(t, nil, map[string]string{"KAFKAMIRROR_CONFIG": other, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS": "e1:1, e2:2"})
	if err != nil {
		t.Fatal(err)
	}
	if !equal(cfg.Destination.BootstrapServers, []string{"e1:1", "e2:2"}) {
		t.Errorf("env bootstrap %v", cfg.Destination.BootstrapServers)
	}
}

func equal(a, b any) bool {
	if as, ok := a.([]string); ok {
		bs, ok := b.([]string)
		return ok && slices.Equal(as, bs)
	}
	return a == b
}

func TestConfigValidationNamesTheSetting(t *testing.T) {
	ok := map[string]string{"KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS": "h:9092", "KAFKAMIRROR_API_TOKEN": "t0ken-0123456789ab"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range ok {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	badFile := writeFile(t, "bad.yaml", "api:\n  listen: 127.0.0.1:1\n  tokn: x\n")
	fastFile := writeFile(t, "fast.yaml", "retry:\n  max_backoff: 1ms\n")
	laughsFile := writeFile(t, "laughs.yaml", nestedAliases(9))
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		want    []string // substrings of the message
		notWant string   // a secret that must not be echoed
	}{
		{"no destination", nil, with("KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS", ""),
			[]string{"destination.bootstrap_servers", "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS", "--destination-bootstrap-servers", "required"}, ""},
		{"bad bootstrap", []string{"--destination-bootstrap-servers", "nohostport"}, ok,
			[]string{"--destination-bootstrap-servers", `"nohostport" is not host:port`}, ""},
		{"bootstrap port out of range", nil, with("KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS", "h:9092,127.0.0.1:99999"),
			[]string{"destination.bootstrap_servers", `"127.0.0.1:99999" has port "99999"; a port is a number from 1 to 65535`}, ""},
		{"bootstrap port zero", []string{"--destination-bootstrap-servers", "h:0"}, ok,
			[]string{"--destination-bootstrap-servers", `"h:0" has port "0"`}, ""},
		{"bootstrap without host", []string{"--destination-bootstrap-servers", ":9092"}, ok,
			[]string{"--destination-bootstrap-servers", `":9092" has no host`}, ""},
		{"no token", nil, with("KAFKAMIRROR_API_TOKEN", ""),
			[]string{"api.token", "KAFKAMIRROR_API_TOKEN", "--api-token", "required"}, ""},
		{"short token", nil, with("KAFKAMIRROR_API_TOKEN", "tiny-token"),
			[]string{"api.token", "KAFKAMIRROR_API_TOKEN", "at least 16 characters", "this one has 10"}, "tiny-token"},
		{"bad listen", nil, with("KAFKAMIRROR_API_LISTEN", "localhost"),
			[]string{"KAFKAMIRROR_API_LISTEN", `"localhost" is not host:port`}, ""},
		{"listen port out of range", nil, with("KAFKAMIRROR_API_LISTEN", "127.0.0.1:65536"),
			[]string{"KAFKAMIRROR_API_LISTEN", `has port "65536"; a port is a number from 0 (any free port) to 65535`}, ""},
		{"short secret key", []string{"--secret-key", "tiny-secret"}, ok,
			[]string{"KAFKAMIRROR_SECRET_KEY", "11 bytes", "at least 16"}, "tiny-secret"},
		{"bad bool", nil, with("KAFKAMIRROR_DESTINATION_TLS_ENABLED", "maybe"),
			[]string{"KAFKAMIRROR_DESTINATION_TLS_ENABLED", "from the environment", `"maybe" is not a boolean`}, ""},
		{"bad duration", []string{"--retry-max-backoff", "soon"}, ok,
			[]string{"retry.max_backoff", "from the command line", "not a duration"}, ""},
		{"initial backoff below the floor", nil, with("KAFKAMIRROR_RETRY_INITIAL_BACKOFF", "1ns"),
			[]string{"retry.initial_backoff", "from the environment", `"1ns" is out of range: it must be from 10ms to 1h`}, ""},
		{"initial backoff above the ceiling", []string{"--retry-initial-backoff", "2h"}, ok,
			[]string{"--retry-initial-backoff", `"2h" is out of range: it must be from 10ms to 1h`}, ""},
		{"max backoff below the floor", []string{"--retry-max-backoff", "99ms"}, ok,
			[]string{"--retry-max-backoff", `"99ms" is out of range: it must be from 100ms to 24h`}, ""},
		{"max backoff above the ceiling", nil, with("KAFKAMIRROR_RETRY_MAX_BACKOFF", "48h"),
			[]string{"KAFKAMIRROR_RETRY_MAX_BACKOFF", `"48h" is out of range: it must be from 100ms to 24h`}, ""},
		{"negative backoff", []string{"--retry-initial-backoff", "-1s"}, ok,
			[]string{"--retry-initial-backoff", "from 10ms to 1h"}, ""},
		{"max backoff in the file", []string{"--config", fastFile}, ok,
			[]string{"retry.max_backoff", fastFile, `"1ms" is out of range: it must be from 100ms to 24h`}, ""},
		{"backoffs inverted", []string{"--retry-initial-backoff", "10s", "--retry-max-backoff", "1s"}, ok,
			[]string{"retry.max_backoff", "shorter than", "retry.initial_backoff"}, ""},
		{"bad log format", []string{"--log-format", "xml"}, ok, []string{"log.format", "KAFKAMIRROR_LOG_FORMAT", `json or text, not "xml"`}, ""},
		{"bad log level", nil, with("KAFKAMIRROR_LOG_LEVEL", "loud"), []string{"--log-level", `not "loud"`}, ""},
		{"unknown mechanism", []string{"--destination-sasl-mechanism", "GSSAPI", "--destination-sasl-username", "u"}, ok,
			[]string{"destination.sasl.mechanism", "GSSAPI"}, ""},
		{"sasl without user", []string{"--destination-sasl-mechanism", "PLAIN", "--destination-sasl-password", "pw-secret-1"}, ok,
			[]string{"destination.sasl.username", "required"}, "pw-secret-1"},
		{"password without mechanism", []string{"--destination-sasl-password", "pw-secret-2"}, ok,
			[]string{"destination.sasl.mechanism", "required"}, "pw-secret-2"},
		{"missing CA file", []string{"--destination-tls-ca-file", "/nonexistent/ca.pem"}, ok,
			[]string{"destination.tls.ca_file", "KAFKAMIRROR_DESTINATION_TLS_CA_FILE", "/nonexistent/ca.pem"}, ""},
		{"api cert without key", []string{"--api-tls-cert-file", "/x.pem"}, ok,
			[]string{"api.tls.cert_file", "api.tls.key_file", "together"}, ""},
		{"state partitions", nil, with("KAFKAMIRROR_STATE_PARTITIONS", "0"), []string{"state.partitions", "at least 1"}, ""},
		{"state partitions not a number", nil, with("KAFKAMIRROR_STATE_PARTITIONS", "many"), []string{"KAFKAMIRROR_STATE_PARTITIONS", "not an integer"}, ""},
		{"fetch buffer below the floor", []string{"--fetch-buffer-bytes", "1024"}, ok,
			[]string{"fetch_buffer_bytes", "KAFKAMIRROR_FETCH_BUFFER_BYTES", "--fetch-buffer-bytes", "from 65536 to 1073741824 bytes, not 1024"}, ""},
		{"fetch buffer above the ceiling", nil, with("KAFKAMIRROR_FETCH_BUFFER_BYTES", "2147483648"),
			[]string{"fetch_buffer_bytes", "not 2147483648"}, ""},
		{"fetch buffer not a number", nil, with("KAFKAMIRROR_FETCH_BUFFER_BYTES", "4MiB"),
			[]string{"KAFKAMIRROR_FETCH_BUFFER_BYTES", "not an integer"}, ""},
		{"fetch memory below the floor", []string{"--fetch-memory-bytes", "1048576"}, ok,
			[]string{"fetch_memory_bytes", "KAFKAMIRROR_FETCH_MEMORY_BYTES", "--fetch-memory-bytes", "from 4194304 to 68719476736 bytes, not 1048576"}, ""},
		{"fetch memory above the ceiling", nil, with("KAFKAMIRROR_FETCH_MEMORY_BYTES", "137438953472"),
			[]string{"fetch_memory_bytes", "not 137438953472"}, ""},
		{"bad state topic", []string{"--state-topic", "a/b"}, ok, []string{"state.topic", `"a/b"`}, ""},
		{"unknown file key", []string{"--config", badFile}, ok, []string{badFile, "line 3", `unknown setting "api.tokn"`}, ""},
		{"nested aliases", []string{"--config", laughsFile}, ok, []string{laughsFile, "more than 64 YAML aliases"}, ""},
		{"missing file", nil, with("KAFKAMIRROR_CONFIG", "/nonexistent/worker.yaml"), []string{"KAFKAMIRROR_CONFIG", "/nonexistent/worker.yaml"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.args, c.env)
			if err == nil {
				t.Fatal("accepted")
			}
			if _, ok := err.(*configError); !ok {
				t.Errorf("error %T, want *configError (exit code 2)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
			if c.notWant != "" && strings.Contains(err.Error(), c.notWant) {
				t.Errorf("message %q echoes a secret", err)
			}
		})
	}
}

// nestedAliases is a YAML "billion laughs" of the given depth: every level names the one
// below nine times, so following its aliases visits 9^depth mappings.
func nestedAliases(depth int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 {}\n")
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {", i, i)
		for j, k := range "abcdefghi" {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%c: *l%d", k, i-1)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// A few aliases are YAML's way to share a block; they stay allowed.
func TestConfigAliasesWithinTheBound(t *testing.T) {
	file := writeFile(t, "shared.yaml", "destination: &d {bootstrap_servers: [h:1]}\nretry: {initial_backoff: &b 2s, max_backoff: *b}\n")
	cfg, err := load(t, []string{"--config", file}, map[string]string{"KAFKAMIRROR_API_TOKEN": "token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retry.MaxBackoff != 2*time.Second {
		t.Errorf("retry.max_backoff %v, want the aliased 2s", cfg.Retry.MaxBackoff)
	}
}

func TestConfigDurationLimitsAccepted(t *testing.T) {
	for _, backoffs := range [][2]string{{"10ms", "100ms"}, {"1h", "24h"}} {
		env := map[string]string{
			"KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS": "h:65535", "KAFKAMIRROR_API_TOKEN": "token-0123456789",
			"KAFKAMIRROR_RETRY_INITIAL_BACKOFF": backoffs[0], "KAFKAMIRROR_RETRY_MAX_BACKOFF": backoffs[1],
		}
		if _, err := load(t, nil, env); err != nil {
			t.Errorf("backoffs %v: %v", backoffs, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := load(t, nil, map[string]string{"KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS": "h:1", "KAFKAMIRROR_API_TOKEN": "token-0123456789"})
	if err != nil {
		t.Fatal(err)
	}
	want := defaultConfig()
	want.Destination.BootstrapServers = []string{"h:1"}
	want.API.Token = "token-0123456789"
	if cfg.API != want.API || cfg.State != want.State || cfg.Retry != want.Retry || cfg.Log != want.Log || cfg.SecretKey != "" ||
		cfg.FetchBufferBytes != 4<<20 || cfg.FetchMemoryBytes != 256<<20 {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
}

func TestInvalidConfigExitsWithCode2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"run", "--destination-bootstrap-servers", "h:1"}, &stdout, &stderr, func(string) (string, bool) { return "", false })
	if code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "KAFKAMIRROR_API_TOKEN") {
		t.Fatalf("stderr %q does not name the setting", stderr.String())
	}
	if code := realMain([]string{"bogus"}, &stdout, &stderr, func(string) (string, bool) { return "", false }); code != 2 {
		t.Fatalf("unknown command: exit code %d", code)
	}
}
