package main

// Configuration: every setting has one dotted key ("destination.bootstrap_servers") from
// which its three spellings are derived, so they can never drift apart:
//
//	YAML file    destination: {bootstrap_servers: ...}
//	environment  KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS
//	flag         --destination-bootstrap-servers
//
// Sources are applied in the order file, environment, flags: a later source overrides an
// earlier one. Values are validated once, after all sources, and an error names the
// setting in all its spellings so the operator finds it wherever it was set.

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/membership"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// envPrefix starts every environment variable of the worker.
const envPrefix = "KAFKAMIRROR_"

// configEnv names the YAML file (also --config).
const configEnv = envPrefix + "CONFIG"

// Config is the worker's configuration after all sources were applied.
type Config struct {
	Destination DestinationConfig
	API         APIConfig
	// SecretKey encrypts the source credentials stored in __mirror_state; empty means
	// mirrors with secrets are refused.
	SecretKey string
	State     StateConfig
	Retry     RetryConfig
	// StallAfter is how long a MIRRORING partition's data path sessions may fail before
	// describe and metrics report it stalled.
	StallAfter time.Duration
	// FetchBufferBytes bounds the fetched bytes each mirrored partition holds ahead of its
	// writes.
	FetchBufferBytes int64
	// FetchMemoryBytes bounds the fetched bytes all mirrored partitions hold together.
	FetchMemoryBytes int64
	Log              LogConfig
	Group            GroupConfig
}

// GroupConfig is the worker's membership in the group of the workers that share the
// destination (internal/membership).
type GroupConfig struct {
	Name     string
	WorkerID string // default: host name and API port
	// AdvertisedURL is where the other workers reach this worker's API to forward commands;
	// default: the URL of the API listener.
	AdvertisedURL     string
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
}

// DestinationConfig is the connection to the destination cluster.
type DestinationConfig struct {
	BootstrapServers []string
	TLS              TLSFiles
	SASL             SASLConfig
}

// TLSFiles configures TLS from PEM files. TLS is on when Enabled or when any file is set.
type TLSFiles struct {
	Enabled            bool
	CAFile             string
	CertFile           string
	KeyFile            string
	ServerName         string
	InsecureSkipVerify bool
}

func (t TLSFiles) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify
}

// SASLConfig configures SASL; an empty Mechanism means none.
type SASLConfig struct {
	Mechanism string
	Username  string
	Password  string
}

// APIConfig is the HTTP API's listener.
type APIConfig struct {
	Listen   string
	Token    string
	CertFile string
	KeyFile  string
}

// StateConfig are the __mirror_state settings (the KIP's mirror.state.topic.*).
type StateConfig struct {
	Topic             string
	Partitions        int32
	ReplicationFactor int16
}

// RetryConfig is the back-off of FAILED partitions (the KIP's mirror.failed.retry.*).
type RetryConfig struct {
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	MaxAttempts    int16
}

// LogConfig selects the log format and level.
type LogConfig struct {
	Format string // json or text
	Level  string // debug, info, warn, error
}

// The ranges of the retry back-offs: below them a FAILED partition reconnects to both
// clusters in a busy loop, above them a fault that has passed keeps it failed for hours.
var (
	initialBackoffRange = api.DurationRange{Min: 10 * time.Millisecond, Max: time.Hour}
	maxBackoffRange     = api.DurationRange{Min: 100 * time.Millisecond, Max: 24 * time.Hour}
	// Below a second every blip of a cluster reads as a stall; above an hour a partition
	// that copies nothing goes unreported for too long.
	stallAfterRange = api.DurationRange{Min: time.Second, Max: time.Hour}
	// The coordinator bounds the session timeout too (group.min/max.session.timeout.ms,
	// 6s and 30m by default); a short one is for tests, with a lowered minimum.
	sessionTimeoutRange    = api.DurationRange{Min: 500 * time.Millisecond, Max: 30 * time.Minute}
	heartbeatIntervalRange = api.DurationRange{Min: 50 * time.Millisecond, Max: time.Minute}
	// Below 64 KiB a partition fetches a batch at a time; above 1 GiB one partition can hold
	// more than a worker's memory.
	fetchBufferRange = struct{ min, max int64 }{64 << 10, 1 << 30}
	// Below 4 MiB a worker holds less than one partition's default buffer.
	fetchMemoryRange = struct{ min, max int64 }{4 << 20, 64 << 30}
)

// minTokenLen is the shortest API token the worker accepts: a guessable token is no
// authentication. Embedded mode's generated tokens have 32 characters.
const minTokenLen = 16

func defaultConfig() Config {
	return Config{
		API:   APIConfig{Listen: "127.0.0.1:8080"},
		State: StateConfig{Topic: kip.StateTopic, Partitions: 1, ReplicationFactor: -1},
		// The KIP's defaults: mirror.failed.retry.initial.backoff.ms 100,
		// .max.backoff.ms 300000, .max.attempts 20.
		Retry:            RetryConfig{InitialBackoff: kip.RetryInitialBackoff, MaxBackoff: kip.RetryMaxBackoff, MaxAttempts: kip.RetryMaxAttempts},
		StallAfter:       mirrorengine.DefaultStallAfter,
		FetchBufferBytes: datapath.DefaultFetchBufferBytes,
		FetchMemoryBytes: datapath.DefaultFetchMemoryBytes,
		Log:              LogConfig{Format: "json", Level: "info"},
		Group:            GroupConfig{Name: membership.DefaultGroup, SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second},
	}
}

// setting is one configuration value with its parser.
type setting struct {
	key    string
	usage  string
	kind   settingKind
	secret bool // never echoed in errors or logs
	set    func(c *Config, v string) error
}

type settingKind int8

const (
	kindString settingKind = iota
	kindBool
	kindList // comma-separated, or a YAML sequence
)

func (s *setting) env() string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(s.key, ".", "_"))
}

func (s *setting) flag() string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(s.key)
}

// names spells the setting in all three forms for error messages.
func (s *setting) names() string {
	return fmt.Sprintf("%s (%s, --%s)", s.key, s.env(), s.flag())
}

func str(p func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *p(c) = v; return nil }
}

func boolean(p func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (true or false)", v)
		}
		*p(c) = b
		return nil
	}
}

func duration(r api.DurationRange, p func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := r.Parse(v)
		if err != nil {
			return err
		}
		*p(c) = d
		return nil
	}
}

func integer(bits int, set func(*Config, int64)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
		if err != nil {
			return fmt.Errorf("%q is not an integer of %d bits", v, bits)
		}
		set(c, n)
		return nil
	}
}

func list(p func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		*p(c) = out
		return nil
	}
}

// settings is every configuration setting; the order is the order of --help.
var settings = []*setting{
	{key: "destination.bootstrap_servers", kind: kindList, usage: "comma-separated host:port list of the destination cluster",
		set: list(func(c *Config) *[]string { return &c.Destination.BootstrapServers })},
	{key: "destination.tls.enabled", kind: kindBool, usage: "connect to the destination with TLS (implied by any other destination TLS setting)",
		set: boolean(func(c *Config) *bool { return &c.Destination.TLS.Enabled })},
	{key: "destination.tls.ca_file", usage: "PEM file of the CAs that sign the destination brokers' certificates (default: system roots)",
		set: str(func(c *Config) *string { return &c.Destination.TLS.CAFile })},
	{key: "destination.tls.cert_file", usage: "PEM client certificate for the destination (mutual TLS)",
		set: str(func(c *Config) *string { return &c.Destination.TLS.CertFile })},
	{key: "destination.tls.key_file", usage: "PEM client key for the destination (mutual TLS)",
		set: str(func(c *Config) *string { return &c.Destination.TLS.KeyFile })},
	{key: "destination.tls.server_name", usage: "TLS server name to verify instead of the broker host",
		set: str(func(c *Config) *string { return &c.Destination.TLS.ServerName })},
	{key: "destination.tls.insecure_skip_verify", kind: kindBool, usage: "do not verify the destination's certificates (testing only)",
		set: boolean(func(c *Config) *bool { return &c.Destination.TLS.InsecureSkipVerify })},
	{key: "destination.sasl.mechanism", usage: "SASL mechanism for the destination: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		set: str(func(c *Config) *string { return &c.Destination.SASL.Mechanism })},
	{key: "destination.sasl.username", usage: "SASL user name for the destination",
		set: str(func(c *Config) *string { return &c.Destination.SASL.Username })},
	{key: "destination.sasl.password", secret: true, usage: "SASL password for the destination",
		set: str(func(c *Config) *string { return &c.Destination.SASL.Password })},
	{key: "api.listen", usage: "host:port of the HTTP API (default 127.0.0.1:8080; port 0 picks a free port)",
		set: str(func(c *Config) *string { return &c.API.Listen })},
	{key: "api.token", secret: true, usage: fmt.Sprintf("bearer token every /v1 request must carry, at least %d characters (required)", minTokenLen),
		set: str(func(c *Config) *string { return &c.API.Token })},
	{key: "api.tls.cert_file", usage: "PEM certificate: serve the API over HTTPS",
		set: str(func(c *Config) *string { return &c.API.CertFile })},
	{key: "api.tls.key_file", usage: "PEM key of api.tls.cert_file",
		set: str(func(c *Config) *string { return &c.API.KeyFile })},
	{key: "secret_key", secret: true, usage: fmt.Sprintf("key (at least %d bytes) that encrypts source credentials stored in __mirror_state; required when a mirror has secrets", mirrorstate.MinSecretKeyLen),
		set: str(func(c *Config) *string { return &c.SecretKey })},
	{key: "state.topic", usage: "name of the metadata topic on the destination (default __mirror_state)",
		set: str(func(c *Config) *string { return &c.State.Topic })},
	{key: "state.partitions", usage: "partition count of the metadata topic when the worker creates it (default 1; never change it afterwards)",
		set: integer(32, func(c *Config, n int64) { c.State.Partitions = int32(n) })},
	{key: "state.replication_factor", usage: "replication factor of the metadata topic when the worker creates it (default -1: the broker default)",
		set: integer(16, func(c *Config, n int64) { c.State.ReplicationFactor = int16(n) })},
	{key: "retry.initial_backoff", usage: fmt.Sprintf("first back-off of a FAILED partition's automatic retry, %s (default 100ms)", initialBackoffRange),
		set: duration(initialBackoffRange, func(c *Config) *time.Duration { return &c.Retry.InitialBackoff })},
	{key: "retry.max_backoff", usage: fmt.Sprintf("longest back-off between automatic retries, %s (default 5m)", maxBackoffRange),
		set: duration(maxBackoffRange, func(c *Config) *time.Duration { return &c.Retry.MaxBackoff })},
	{key: "retry.max_attempts", usage: "automatic retries before a failure waits for the operator (default 20; 0 disables)",
		set: integer(16, func(c *Config, n int64) { c.Retry.MaxAttempts = int16(n) })},
	{key: "stall_after", usage: fmt.Sprintf("how long a MIRRORING partition's data path may fail to reach a cluster before describe and metrics report it stalled, %s (default %v)", stallAfterRange, mirrorengine.DefaultStallAfter),
		set: duration(stallAfterRange, func(c *Config) *time.Duration { return &c.StallAfter })},
	{key: "fetch_buffer_bytes", usage: fmt.Sprintf("fetched bytes each mirrored partition may hold ahead of its writes (its next fetches are in flight while it writes), %d to %d (default %d: a worker with many busy partitions holds about partitions × this much)", fetchBufferRange.min, fetchBufferRange.max, datapath.DefaultFetchBufferBytes),
		set: integer(64, func(c *Config, n int64) { c.FetchBufferBytes = n })},
	{key: "fetch_memory_bytes", usage: fmt.Sprintf("fetched bytes all mirrored partitions may hold together ahead of their writes, with the fetches in flight; when they do, fetching waits for the writes to make room, source brokers in turn, %d to %d (default %d)", fetchMemoryRange.min, fetchMemoryRange.max, datapath.DefaultFetchMemoryBytes),
		set: integer(64, func(c *Config, n int64) { c.FetchMemoryBytes = n })},
	{key: "group.name", usage: fmt.Sprintf("group of the workers that share the destination and split its work (default %s)", membership.DefaultGroup),
		set: str(func(c *Config) *string { return &c.Group.Name })},
	{key: "group.worker_id", usage: "this worker's name in the group (default: host name and API port)",
		set: str(func(c *Config) *string { return &c.Group.WorkerID })},
	{key: "group.advertised_url", usage: "URL at which the other workers reach this worker's API to forward commands (default: the API listener's URL)",
		set: str(func(c *Config) *string { return &c.Group.AdvertisedURL })},
	{key: "group.session_timeout", usage: fmt.Sprintf("how long the group waits for a silent worker before moving its work, %s (default 10s)", sessionTimeoutRange),
		set: duration(sessionTimeoutRange, func(c *Config) *time.Duration { return &c.Group.SessionTimeout })},
	{key: "group.heartbeat_interval", usage: fmt.Sprintf("how often a worker proves its membership, %s (default 1s)", heartbeatIntervalRange),
		set: duration(heartbeatIntervalRange, func(c *Config) *time.Duration { return &c.Group.HeartbeatInterval })},
	{key: "log.format", usage: "log format: json or text (default json)",
		set: str(func(c *Config) *string { return &c.Log.Format })},
	{key: "log.level", usage: "log level: debug, info, warn or error (default info)",
		set: str(func(c *Config) *string { return &c.Log.Level })},
}

func settingByKey(key string) *setting {
	for _, s := range settings {
		if s.key == key {
			return s
		}
	}
	return nil
}

// configError is an invalid configuration; the worker exits with code 2.
type configError struct{ msg string }

// Error implements error.
func (e *configError) Error() string { return "invalid configuration: " + e.msg }

func cfgErr(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// settingFlag collects a flag's value; values are applied after the file and the
// environment so that flags win whatever order things were parsed in.
type settingFlag struct {
	s      *setting
	values map[string]string
}

// String implements flag.Value; defaults are shown in the usage text instead.
func (f settingFlag) String() string { return "" }

// Set implements flag.Value.
func (f settingFlag) Set(v string) error {
	f.values[f.s.key] = v
	return nil
}

// IsBoolFlag lets boolean settings be given as a bare --flag.
func (f settingFlag) IsBoolFlag() bool { return f.s.kind == kindBool }

// registerSettings adds a flag per setting, and --config, to fs. The returned map is
// filled by fs.Parse.
func registerSettings(fs *flag.FlagSet) (values map[string]string, configPath *string) {
	values = map[string]string{}
	for _, s := range settings {
		fs.Var(settingFlag{s: s, values: values}, s.flag(), s.usage+" ["+s.env()+"]")
	}
	configPath = fs.String("config", "", "YAML file with settings (keys as in the flags, nested: destination: {bootstrap_servers: ...}) ["+configEnv+"]")
	return values, configPath
}

// loadConfig applies the YAML file, then the environment, then the flag values, to the
// defaults. getenv is os.LookupEnv outside tests. It does not validate; see validate.
func loadConfig(flagValues map[string]string, configPath string, getenv func(string) (string, bool)) (Config, error) {
	cfg := defaultConfig()
	if configPath == "" {
		configPath, _ = getenv(configEnv)
	}
	if configPath != "" {
		values, err := readConfigFile(configPath)
		if err != nil {
			return cfg, err
		}
		for _, s := range settings {
			if v, ok := values[s.key]; ok {
				if err := s.set(&cfg, v); err != nil {
					return cfg, cfgErr("%s in %s: %v", s.names(), configPath, describeErr(s, err))
				}
			}
		}
	}
	for _, s := range settings {
		if v, ok := getenv(s.env()); ok {
			if err := s.set(&cfg, v); err != nil {
				return cfg, cfgErr("%s from the environment: %v", s.names(), describeErr(s, err))
			}
		}
	}
	for _, s := range settings {
		if v, ok := flagValues[s.key]; ok {
			if err := s.set(&cfg, v); err != nil {
				return cfg, cfgErr("%s from the command line: %v", s.names(), describeErr(s, err))
			}
		}
	}
	return cfg, nil
}

// describeErr hides a secret setting's value, which parse errors would otherwise quote.
func describeErr(s *setting, err error) error {
	if s.secret {
		return errors.New("invalid value")
	}
	return err
}

// readConfigFile reads a YAML file into dotted keys. Unknown keys are errors: a misspelt
// setting silently ignored is worse than a refusal to start.
func readConfigFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, cfgErr("config file (%s, --config): %v", configEnv, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, cfgErr("config file %s: %v", path, err)
	}
	out := map[string]string{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return out, nil // an empty file
	}
	aliases := maxYAMLAliases
	if err := flattenYAML(path, "", doc.Content[0], out, &aliases); err != nil {
		return nil, err
	}
	return out, nil
}

// maxYAMLAliases bounds how many aliases (*name) one file may follow: each is expanded
// in full, so nested aliases grow a small file exponentially (a 740-byte file expands to
// hundreds of millions of nodes). A configuration needs a handful.
const maxYAMLAliases = 64

// flattenYAML adds the settings under n to out; aliases counts down the aliases it may
// still follow.
func flattenYAML(path, prefix string, n *yaml.Node, out map[string]string, aliases *int) error {
	if n.Kind == yaml.AliasNode {
		if *aliases == 0 {
			return cfgErr("config file %s, line %d: more than %d YAML aliases to expand; write the settings out instead", path, n.Line, maxYAMLAliases)
		}
		*aliases--
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if prefix != "" {
				key = prefix + "." + key
			}
			if err := flattenYAML(path, key, v, out, aliases); err != nil {
				return err
			}
		}
		return nil
	}
	if prefix == "" {
		return cfgErr("config file %s: the top level must be a mapping of settings", path)
	}
	s := settingByKey(prefix)
	if s == nil {
		return cfgErr("config file %s, line %d: unknown setting %q (known: %s)", path, n.Line, prefix, knownKeys())
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		out[prefix] = n.Value
	case yaml.SequenceNode:
		if s.kind != kindList {
			return cfgErr("config file %s, line %d: %s takes one value, not a list", path, n.Line, s.names())
		}
		var items []string
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return cfgErr("config file %s, line %d: %s: list items must be strings", path, item.Line, s.names())
			}
			items = append(items, item.Value)
		}
		out[prefix] = strings.Join(items, ",")
	default:
		return cfgErr("config file %s, line %d: %s: unexpected YAML value", path, n.Line, s.names())
	}
	return nil
}

func knownKeys() string {
	keys := make([]string, len(settings))
	for i, s := range settings {
		keys[i] = s.key
	}
	return strings.Join(keys, ", ")
}

// validate checks the whole configuration. embedded relaxes what embedded mode provides
// itself (the destination). Files named by settings are read here, so a missing
// certificate fails at start and not at the first connection.
func (c *Config) validate(embedded bool) error {
	named := func(key string) string { return settingByKey(key).names() }
	if len(c.Destination.BootstrapServers) == 0 && !embedded {
		return cfgErr("%s is required", named("destination.bootstrap_servers"))
	}
	for _, hp := range c.Destination.BootstrapServers {
		if err := api.CheckBrokerAddress(hp); err != nil {
			return cfgErr("%s: %v", named("destination.bootstrap_servers"), err)
		}
	}
	if _, err := c.Destination.TLS.load("destination.tls"); err != nil {
		return err
	}
	if err := c.Destination.SASL.check(); err != nil {
		return err
	}
	if err := checkListen(c.API.Listen); err != nil {
		return cfgErr("%s: %v", named("api.listen"), err)
	}
	if c.API.Token == "" && !embedded {
		return cfgErr("%s is required: every /v1 request must carry it as a bearer token", named("api.token"))
	}
	if n := utf8.RuneCountInString(c.API.Token); n > 0 && n < minTokenLen {
		// Only the length is shown, never the token.
		return cfgErr("%s must be at least %d characters long; this one has %d", named("api.token"), minTokenLen, n)
	}
	if strings.ContainsAny(c.API.Token, " \t\r\n") {
		return cfgErr("%s must not contain white space", named("api.token"))
	}
	if (c.API.CertFile == "") != (c.API.KeyFile == "") {
		return cfgErr("%s and %s must be set together", named("api.tls.cert_file"), named("api.tls.key_file"))
	}
	if c.API.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.API.CertFile, c.API.KeyFile); err != nil {
			return cfgErr("%s / %s: %v", named("api.tls.cert_file"), named("api.tls.key_file"), err)
		}
	}
	if c.SecretKey != "" && len(c.SecretKey) < mirrorstate.MinSecretKeyLen {
		// The key is never echoed, only its length.
		return cfgErr("%s is %d bytes long; at least %d are needed", named("secret_key"), len(c.SecretKey), mirrorstate.MinSecretKeyLen)
	}
	if err := partitionstate.ValidateMirrorName(c.State.Topic); err != nil {
		// Topic names follow the same character rules as mirror names.
		return cfgErr("%s: %q is not a valid topic name", named("state.topic"), c.State.Topic)
	}
	if c.State.Partitions < 1 {
		return cfgErr("%s must be at least 1, not %d", named("state.partitions"), c.State.Partitions)
	}
	if c.State.ReplicationFactor < -1 || c.State.ReplicationFactor == 0 {
		return cfgErr("%s must be -1 (broker default) or at least 1, not %d", named("state.replication_factor"), c.State.ReplicationFactor)
	}
	if c.Retry.MaxAttempts < 0 {
		return cfgErr("%s must not be negative", named("retry.max_attempts"))
	}
	if c.Retry.MaxBackoff < c.Retry.InitialBackoff {
		return cfgErr("%s (%v) is shorter than %s (%v)", named("retry.max_backoff"), c.Retry.MaxBackoff, named("retry.initial_backoff"), c.Retry.InitialBackoff)
	}
	if c.FetchBufferBytes < fetchBufferRange.min || c.FetchBufferBytes > fetchBufferRange.max {
		return cfgErr("%s must be from %d to %d bytes, not %d", named("fetch_buffer_bytes"), fetchBufferRange.min, fetchBufferRange.max, c.FetchBufferBytes)
	}
	if c.FetchMemoryBytes < fetchMemoryRange.min || c.FetchMemoryBytes > fetchMemoryRange.max {
		return cfgErr("%s must be from %d to %d bytes, not %d", named("fetch_memory_bytes"), fetchMemoryRange.min, fetchMemoryRange.max, c.FetchMemoryBytes)
	}
	if c.Group.Name == "" {
		return cfgErr("%s must not be empty", named("group.name"))
	}
	if c.Group.SessionTimeout < 4*c.Group.HeartbeatInterval {
		// The lease (60% of the session timeout) must cover two heartbeat intervals.
		return cfgErr("%s (%v) must be at least four times %s (%v)", named("group.session_timeout"), c.Group.SessionTimeout, named("group.heartbeat_interval"), c.Group.HeartbeatInterval)
	}
	if u := c.Group.AdvertisedURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return cfgErr("%s must be an http:// or https:// URL, not %q", named("group.advertised_url"), u)
	}
	if !slices.Contains([]string{"json", "text"}, c.Log.Format) {
		return cfgErr("%s must be json or text, not %q", named("log.format"), c.Log.Format)
	}
	if _, ok := logLevels[c.Log.Level]; !ok {
		return cfgErr("%s must be debug, info, warn or error, not %q", named("log.level"), c.Log.Level)
	}
	return nil
}

// checkListen checks the API's listen address. Unlike a broker address its host may be
// empty (every interface) and its port 0 (any free port).
func checkListen(hp string) error {
	_, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("%q is not host:port", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has port %q; a port is a number from 0 (any free port) to 65535", hp, port)
	}
	return nil
}

// load reads the PEM files into the engine's connection settings; nil when TLS is off.
// prefix is the settings' key prefix, for messages.
func (t TLSFiles) load(prefix string) (*mirrorstate.TLSSettings, error) {
	if !t.on() {
		return nil, nil
	}
	named := func(k string) string { return settingByKey(prefix + "." + k).names() }
	out := &mirrorstate.TLSSettings{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	read := func(key, file string) (string, error) {
		if file == "" {
			return "", nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return "", cfgErr("%s: %v", named(key), err)
		}
		return string(b), nil
	}
	var err error
	if out.CACertPEM, err = read("ca_file", t.CAFile); err != nil {
		return nil, err
	}
	if out.ClientCertPEM, err = read("cert_file", t.CertFile); err != nil {
		return nil, err
	}
	if out.ClientKeyPEM, err = read("key_file", t.KeyFile); err != nil {
		return nil, err
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, cfgErr("%s and %s must be set together", named("cert_file"), named("key_file"))
	}
	if _, err := out.Config(); err != nil {
		// Not a PEM, or a key that does not match the certificate.
		return nil, cfgErr("%s.*: %v", prefix, err)
	}
	return out, nil
}

func (s SASLConfig) check() error {
	named := func(k string) string { return settingByKey("destination.sasl." + k).names() }
	switch m := strings.ToUpper(s.Mechanism); {
	case m == "":
		if s.Username != "" || s.Password != "" {
			return cfgErr("%s is required when a SASL user name or password is set", named("mechanism"))
		}
		return nil
	case !slices.Contains(kafkaconn.Mechanisms, m):
		return cfgErr("%s must be one of %s, not %q", named("mechanism"), strings.Join(kafkaconn.Mechanisms, ", "), s.Mechanism)
	}
	if s.Username == "" {
		return cfgErr("%s is required with SASL", named("username"))
	}
	return nil
}

// connection is the destination connection in the engine's terms; ClientOpts turns it
// into franz-go options exactly as it does for a mirror's source.
func (c *Config) connection() (mirrorstate.SourceConnection, error) {
	conn := mirrorstate.SourceConnection{BootstrapServers: c.Destination.BootstrapServers}
	t, err := c.Destination.TLS.load("destination.tls")
	if err != nil {
		return conn, err
	}
	conn.TLS = t
	if s := c.Destination.SASL; s.Mechanism != "" {
		conn.SASL = &mirrorstate.SASLSettings{Mechanism: s.Mechanism, Username: s.Username, Password: s.Password}
	}
	return conn, nil
}
