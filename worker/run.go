package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/embedded"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/membership"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// shutdownTimeout bounds how long in-flight API requests may finish at shutdown.
const shutdownTimeout = 20 * time.Second

var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// embeddedOptions are the demo mode's settings; they are flags only, since they make no
// sense in a production configuration file.
type embeddedOptions struct {
	on                    bool
	sourcePort, destPort  int
	dataDir               string
	generatedToken        bool
	sourceAddrs, dstAddrs []string
	workerPassword        string // the destination super user's (embeddedWorkerPassword)
}

// runCommand is `run` (and `demo`, with demo set): parse, validate, then serve until
// SIGTERM or SIGINT.
func runCommand(args []string, demo bool, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	name := "run"
	if demo {
		name = "demo"
	}
	fs := flag.NewFlagSet("kafkamirror-worker "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	values, configPath := registerSettings(fs)
	var emb embeddedOptions
	fs.BoolVar(&emb.on, "embedded", demo, "start two in-process Kafka clusters (source and destination) and mirror between them")
	fs.IntVar(&emb.sourcePort, "source-port", 19092, "embedded mode: port of the source cluster (0: any free port)")
	fs.IntVar(&emb.destPort, "destination-port", 29092, "embedded mode: port of the destination cluster (0: any free port)")
	fs.StringVar(&emb.dataDir, "data-dir", "", "embedded mode: directory that keeps the clusters' data across restarts (default: in memory)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kafkamirror-worker %s [flags]\n\nEvery setting can also come from the YAML file (--config) or the environment variable in brackets;\nflags win over the environment, which wins over the file.\n\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafkamirror-worker %s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	cfg, err := loadConfig(values, *configPath, getenv)
	if err == nil {
		err = cfg.validate(emb.on)
	}
	if err == nil && emb.on && len(cfg.Destination.BootstrapServers) > 0 {
		err = cfgErr("%s cannot be combined with embedded mode, which runs its own destination", settingByKey("destination.bootstrap_servers").names())
	}
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker: %v\n", err)
		return 2
	}
	if emb.on && cfg.API.Token == "" {
		// Embedded mode is for trying things out on one machine: a printed random token
		// keeps the API authenticated without asking a newcomer for one.
		cfg.API.Token, emb.generatedToken = randomToken(), true
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, cfg, emb, stdout, stderr)
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[c.Level]}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(stringerHandler{slog.NewJSONHandler(w, opts)})
}

// stringerHandler logs values that have a String method as that string. The JSON handler
// would otherwise marshal them as their underlying type, so a partition state would be
// logged as 2 instead of MIRRORING; the text handler already uses String. Errors are left
// alone: the JSON handler prints their messages already.
type stringerHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h stringerHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(stringify(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h stringerHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	conv := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		conv[i] = stringify(a)
	}
	return stringerHandler{h.Handler.WithAttrs(conv)}
}

// WithGroup implements slog.Handler.
func (h stringerHandler) WithGroup(name string) slog.Handler {
	return stringerHandler{h.Handler.WithGroup(name)}
}

func stringify(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		g := v.Group()
		conv := make([]any, len(g))
		for i, ga := range g {
			conv[i] = stringify(ga)
		}
		return slog.Group(a.Key, conv...)
	case slog.KindAny:
		x := v.Any()
		if _, isErr := x.(error); isErr {
			return a
		}
		if s, ok := x.(fmt.Stringer); ok {
			return slog.String(a.Key, s.String())
		}
	}
	return a
}

// run serves the API and runs the engine until ctx ends; it returns the exit code.
func run(ctx context.Context, cfg Config, emb embeddedOptions, stdout, stderr io.Writer) int {
	log := newLogger(cfg.Log, stderr)
	slog.SetDefault(log) // libraries that log through the default logger get the same format

	if emb.on {
		stopClusters, err := startEmbedded(&emb, log)
		if err != nil {
			log.Error("starting the embedded clusters failed", "error", err)
			return 1
		}
		defer stopClusters()
		cfg.Destination.BootstrapServers = emb.dstAddrs
		cfg.Destination.SASL = SASLConfig{Mechanism: "SCRAM-SHA-256", Username: embeddedWorkerUser, Password: emb.workerPassword}
		fmt.Fprintf(stdout, "kafkamirror-worker embedded clusters:\n  source:      %s (cluster id %q)\n  destination: %s (cluster id %q)\n",
			strings.Join(emb.sourceAddrs, ","), embeddedSourceID, strings.Join(emb.dstAddrs, ","), embeddedDestinationID)
		fmt.Fprintf(stdout, "  destination user: %s, password %s (SCRAM-SHA-256; reads and writes topics and groups, never a mirrored topic)\n",
			EmbeddedDemoUser, EmbeddedDemoPassword)
		if emb.generatedToken {
			// Printed on stdout for the person at the terminal, never logged.
			fmt.Fprintf(stdout, "  api token:   %s (generated; set KAFKAMIRROR_API_TOKEN to choose one)\n", cfg.API.Token)
		}
	}

	var sealer *mirrorstate.Sealer
	if cfg.SecretKey != "" {
		var err error
		if sealer, err = mirrorstate.NewSealer(cfg.SecretKey); err != nil {
			fmt.Fprintf(stderr, "kafkamirror-worker: invalid configuration: %v\n", err)
			return 2
		}
	}
	conn, err := cfg.connection()
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker: %v\n", err)
		return 2
	}
	opts, err := kafkaconn.Opts(conn)
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker: invalid configuration: destination: %v\n", err)
		return 2
	}
	dst, err := kgo.NewClient(append(opts, kgo.ClientID("kafkamirror-worker"))...)
	if err != nil {
		log.Error("creating the destination client failed", "error", err)
		return 1
	}
	defer dst.Close()
	// The group's heartbeats prove this worker's leases: on a client of their own they never
	// wait behind the engine's requests (a broker answers one request per connection at a
	// time), which a busy worker could otherwise make last longer than a lease.
	grpClient, err := kgo.NewClient(append(opts, kgo.ClientID("kafkamirror-worker-group"))...)
	if err != nil {
		log.Error("creating the destination client failed", "error", err)
		return 1
	}
	defer grpClient.Close()

	log.Info("kafkamirror worker starting",
		"destination", strings.Join(cfg.Destination.BootstrapServers, ","),
		"destination_tls", cfg.Destination.TLS.on(), "destination_sasl_mechanism", cfg.Destination.SASL.Mechanism,
		"api_listen", cfg.API.Listen, "api_tls", cfg.API.CertFile != "", "state_topic", cfg.State.Topic,
		"secret_key_set", cfg.SecretKey != "", "retry_max_attempts", cfg.Retry.MaxAttempts)

	slot := &engineSlot{}
	fetchMemory := datapath.NewFetchMemory(cfg.FetchMemoryBytes)
	m := newMetrics(slot, fetchMemory, log)
	grp := newGroup(log, 2*cfg.Group.SessionTimeout)
	grp.dst = dst
	m.reg.MustRegister(grp)
	srv := newServer(cfg.API.Token, sealer != nil, log, slot, m.handler(log))
	srv.group = grp
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		log.Error("the HTTP API cannot listen", "address", cfg.API.Listen, "error", err)
		return 1
	}
	scheme := "http"
	if cfg.API.CertFile != "" {
		scheme = "https"
	}
	apiURL := scheme + "://" + ln.Addr().String()
	httpSrv := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() {
		if cfg.API.CertFile != "" {
			serveErr <- httpSrv.ServeTLS(ln, cfg.API.CertFile, cfg.API.KeyFile)
		} else {
			serveErr <- httpSrv.Serve(ln)
		}
	}()
	log.Info("HTTP API listening", "url", apiURL)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan *mirrorengine.Engine, 1)
	go func() {
		e := openEngine(runCtx, mirrorengine.Config{
			Destination: dst,
			Store: mirrorstate.StoreConfig{
				Topic: cfg.State.Topic, Partitions: cfg.State.Partitions, ReplicationFactor: cfg.State.ReplicationFactor,
				Sealer: sealer, Logger: log,
			},
			Retry:            partitionstate.RetryPolicy{Initial: cfg.Retry.InitialBackoff, Max: cfg.Retry.MaxBackoff, MaxAttempts: cfg.Retry.MaxAttempts},
			StallAfter:       cfg.StallAfter,
			FetchBufferBytes: int(cfg.FetchBufferBytes),
			FetchMemory:      fetchMemory,
			Logger:           log,
			Observer:         m,
			Placement:        grp,
		}, slot, log)
		if e != nil && !joinGroup(runCtx, grp, cfg, grpClient, e, apiURL, slot, log) {
			e.Close()
			e = nil
		}
		if e != nil {
			slot.set(e)
			line := "kafkamirror-worker ready: api=" + apiURL
			if emb.on {
				line += " source=" + strings.Join(emb.sourceAddrs, ",")
			}
			line += " destination=" + strings.Join(cfg.Destination.BootstrapServers, ",")
			fmt.Fprintln(stdout, line)
			log.Info("worker ready", "url", apiURL)
		}
		opened <- e
	}()

	code := 0
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		log.Error("the HTTP API stopped", "error", err)
		code = 1
	}
	// Order matters: first let in-flight API commands finish, then stop the engine (which
	// stops fetching and waits for in-flight produces), then the clients and clusters.
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelShutdown()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		log.Warn("HTTP API shutdown incomplete", "error", err)
	}
	cancel()
	if e := <-opened; e != nil {
		if member := grp.member.Load(); member != nil {
			// Leaving first hands the units over at once: the others need not wait out
			// this worker's session timeout.
			if err := member.Leave(shutdownCtx); err != nil {
				log.Warn("leaving the group failed", "error", err)
			}
		}
		e.Close()
	}
	log.Info("kafkamirror worker stopped")
	return code
}

// joinGroup joins the group of the destination's workers, retrying until ctx ends; it
// reports false when ctx ended first or the group refused this worker for good.
func joinGroup(ctx context.Context, g *group, cfg Config, dst *kgo.Client, e *mirrorengine.Engine, apiURL string, slot *engineSlot, log *slog.Logger) bool {
	gc := cfg.Group
	if gc.WorkerID == "" {
		gc.WorkerID = defaultWorkerID(apiURL)
	}
	if gc.AdvertisedURL != "" {
		apiURL = gc.AdvertisedURL
	}
	g.self = apiURL
	backoff := 500 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second+gc.SessionTimeout)
		member, err := g.join(attempt, gc, dst, e, apiURL, cfg.State.Topic)
		cancel()
		if err == nil {
			log.Info("joined the group of the destination's workers", "group", gc.Name, "worker_id", gc.WorkerID,
				"members", len(member.Members()), "owned_units", len(member.Owned()))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		var refused *membership.IncompatibleError
		if errors.As(err, &refused) {
			log.Error("the group of the destination's workers refused this worker; it will not mirror", "error", err)
			slot.setWaiting(err.Error())
			return false
		}
		log.Warn("joining the group failed; retrying", "group", gc.Name, "error", err, "backoff", backoff)
		slot.setWaiting("joining group " + gc.Name + ": " + err.Error())
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// openEngine opens the engine, retrying with back-off until it succeeds or ctx ends (nil):
// a destination that is down at start must not need a restart of the worker once it is up.
func openEngine(ctx context.Context, cfg mirrorengine.Config, slot *engineSlot, log *slog.Logger) *mirrorengine.Engine {
	backoff := 500 * time.Millisecond
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		e, err := mirrorengine.Open(attemptCtx, cfg)
		cancel()
		if err == nil {
			if ctx.Err() != nil {
				e.Close()
				return nil
			}
			return e
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, mirrorstate.ErrSecretKeyMismatch) || errors.Is(err, mirrorstate.ErrNoSecretKey) {
			// Retrying cannot fix the key; say so loudly but keep serving /healthz.
			log.Error("cannot load __mirror_state: the secret key does not open the stored credentials", "error", err)
		} else {
			log.Warn("opening the engine failed; retrying", "error", err, "backoff", backoff)
		}
		slot.setWaiting(err.Error())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// The embedded clusters' ids, fixed so that a restarted demo (same --data-dir) and the
// quickstart's examples agree.
const (
	embeddedSourceID      = "source"
	embeddedDestinationID = "destination"
)

// The embedded destination enforces ACLs, so that a mirrored topic is read-only there as on
// a production cluster: the worker is its super user, and the demo user, for the person
// trying things out, may read and write every topic and group by explicit ACLs, except
// what the worker's DENY WRITE covers (a mirrored topic). The source stays open.
const (
	embeddedWorkerUser   = "kafkamirror-worker"
	EmbeddedDemoUser     = "demo"
	EmbeddedDemoPassword = "demo-secret"
)

// demoUserACLs are the demo user's rights on the embedded destination: every topic ("*")
// and every consumer group.
func demoUserACLs() []*kadm.ACLBuilder {
	allow := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow("User:" + EmbeddedDemoUser).AllowHosts().ResourcePatternType(kadm.ACLPatternLiteral)
	}
	return []*kadm.ACLBuilder{
		allow().Topics("*").Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe, kadm.OpDescribeConfigs, kadm.OpCreate, kadm.OpDelete),
		allow().Groups("*").Operations(kadm.OpRead, kadm.OpDescribe, kadm.OpDelete),
	}
}

// startEmbedded starts the demo's source and destination clusters.
func startEmbedded(emb *embeddedOptions, log *slog.Logger) (stop func(), err error) {
	if emb.workerPassword, err = embeddedWorkerPassword(emb.dataDir); err != nil {
		return nil, err
	}
	start := func(cfg embedded.Config, port int) (*embedded.Cluster, error) {
		if port != 0 {
			cfg.Ports = []int{port}
		}
		if emb.dataDir != "" {
			cfg.DataDir = filepath.Join(emb.dataDir, cfg.ID)
		}
		c, err := embedded.Start(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s cluster (port %d): %w", cfg.ID, port, err)
		}
		return c, nil
	}
	src, err := start(embedded.Config{ID: embeddedSourceID}, emb.sourcePort)
	if err != nil {
		return nil, err
	}
	dst, err := start(embedded.Config{ID: embeddedDestinationID, SuperUser: embeddedWorkerUser, SuperPassword: emb.workerPassword,
		Users: map[string]string{EmbeddedDemoUser: EmbeddedDemoPassword}}, emb.destPort)
	if err == nil {
		err = grantDemoUser(dst)
	}
	if err != nil {
		if dst != nil {
			dst.Close()
		}
		src.Close()
		return nil, err
	}
	emb.sourceAddrs, emb.dstAddrs = src.Addrs(), dst.Addrs()
	log.Info("embedded clusters started", "source", strings.Join(emb.sourceAddrs, ","), "destination", strings.Join(emb.dstAddrs, ","), "data_dir", emb.dataDir)
	return func() {
		dst.Close()
		src.Close()
	}, nil
}

func grantDemoUser(dst *embedded.Cluster) error {
	cl, err := kgo.NewClient(dst.ClientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, acls := range demoUserACLs() {
		res, err := kadm.NewClient(cl).CreateACLs(ctx, acls)
		for _, r := range res {
			if err == nil {
				err = r.Err
			}
		}
		if err != nil {
			return fmt.Errorf("granting the demo user its ACLs on the destination: %w", err)
		}
	}
	return nil
}

// embeddedWorkerPassword is the embedded destination's super user password: random, and kept
// in the data directory when there is one, since the cluster kept there keeps its users.
func embeddedWorkerPassword(dataDir string) (string, error) {
	if dataDir == "" {
		return randomToken(), nil
	}
	path := filepath.Join(dataDir, "worker-password")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	password := randomToken()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(password), 0o600); err != nil {
		return "", fmt.Errorf("keeping the embedded worker password: %w", err)
	}
	return password, nil
}
