package main

// describe and list: the KIP tool's (kafka-cluster-mirrors.sh) tables, read through the
// HTTP API like any other client, so they work against a remote worker too; and what the
// client commands share (cli_commands.go has the others).

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
)

// cliTimeout bounds a whole describe or list, retries included.
const cliTimeout = time.Minute

type clientFlags struct {
	url, token, caFile string
}

// register adds the flags with empty defaults: the environment is read only after parsing
// (see client), because -h prints a flag's default, and an environment value there would
// print the API token.
func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "worker-url", "", "URL of the worker's API (default "+defaultWorkerURL+") [KAFKAMIRROR_WORKER_URL]")
	fs.StringVar(&c.token, "api-token", "", "the worker's API token [KAFKAMIRROR_API_TOKEN]")
	fs.StringVar(&c.caFile, "worker-ca-file", "", "PEM CA file for an https worker URL [KAFKAMIRROR_WORKER_CA_FILE]")
}

const defaultWorkerURL = "http://127.0.0.1:8080"

// client fills what the flags left empty from the environment, then the defaults, and
// returns the API client.
func (c *clientFlags) client(getenv func(string) (string, bool)) (*api.Client, error) {
	for _, f := range []struct {
		value    *string
		env, def string
	}{
		{&c.url, "KAFKAMIRROR_WORKER_URL", defaultWorkerURL},
		{&c.token, "KAFKAMIRROR_API_TOKEN", ""},
		{&c.caFile, "KAFKAMIRROR_WORKER_CA_FILE", ""},
	} {
		if *f.value != "" {
			continue
		}
		if v, ok := getenv(f.env); ok {
			*f.value = v
		} else {
			*f.value = f.def
		}
	}
	if c.token == "" {
		return nil, errors.New("no API token: set --api-token or KAFKAMIRROR_API_TOKEN")
	}
	cfg := api.ClientConfig{URL: c.url, Token: c.token, UserAgent: "kafkamirror-worker-cli", RetryMax: 2}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--worker-ca-file: %w", err)
		}
		pool, err := kafkaconn.CertPool(pem)
		if err != nil {
			return nil, fmt.Errorf("--worker-ca-file %s: %w", c.caFile, err)
		}
		cfg.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return api.NewClient(cfg)
}

// clientCLI is a subcommand that talks to a running worker: its flags (the worker
// connection's and its own) and the required ones among them.
type clientCLI struct {
	name     string
	fs       *flag.FlagSet
	cf       clientFlags
	required map[string]*string
	stderr   io.Writer
}

// newClientCLI starts a subcommand's flags; synopsis follows its name in the usage line.
func newClientCLI(name, synopsis string, stderr io.Writer) *clientCLI {
	c := &clientCLI{name: name, fs: flag.NewFlagSet("kafkamirror-worker "+name, flag.ContinueOnError), required: map[string]*string{}, stderr: stderr}
	c.fs.SetOutput(stderr)
	c.fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kafkamirror-worker %s %s [flags]\n\n", name, synopsis)
		c.fs.PrintDefaults()
	}
	c.cf.register(c.fs)
	return c
}

// mirrorFlag registers the required --mirror.
func (c *clientCLI) mirrorFlag() *string {
	m := c.fs.String("mirror", "", "name of the cluster mirror (required)")
	c.require("mirror", m)
	return m
}

func (c *clientCLI) require(flagName string, v *string) { c.required[flagName] = v }

// run parses args and calls fn with a client of the worker, within timeout. It returns the
// exit code: 2 for a usage error, 1 when fn fails.
func (c *clientCLI) run(args []string, getenv func(string) (string, bool), timeout time.Duration, fn func(context.Context, *api.Client) error) int {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if c.fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "kafkamirror-worker %s: unexpected argument %q\n", c.name, c.fs.Arg(0))
		return 2
	}
	for _, name := range slices.Sorted(maps.Keys(c.required)) {
		if *c.required[name] == "" {
			fmt.Fprintf(c.stderr, "kafkamirror-worker %s: --%s is required\n", c.name, name)
			return 2
		}
	}
	cl, err := c.cf.client(getenv)
	if err != nil {
		fmt.Fprintf(c.stderr, "kafkamirror-worker %s: %v\n", c.name, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := fn(ctx, cl); err != nil {
		fmt.Fprintf(c.stderr, "kafkamirror-worker %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

func describeCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	c := newClientCLI("describe", "[--mirror NAME] [--failed] [--json]", stderr)
	mirror := c.fs.String("mirror", "", "describe only this mirror")
	failed := c.fs.Bool("failed", false, "only FAILED partitions, with their retry attempt and error")
	asJSON := c.fs.Bool("json", false, "print the topic descriptions as JSON")
	workers := c.fs.Bool("workers", false, "add a WORKER column: the worker of the group that runs each partition")
	return c.run(args, getenv, cliTimeout, func(ctx context.Context, cl *api.Client) error {
		topics, err := describeTopics(ctx, cl, *mirror)
		if err != nil {
			return err
		}
		if *failed {
			topics = onlyFailed(topics)
		}
		if *asJSON {
			return printJSON(stdout, topics)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		worker := func(p api.Partition) string { return "" }
		if *workers {
			worker = func(p api.Partition) string { return "\t" + cmp.Or(p.Worker, "-") }
		}
		if *failed {
			fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tRETRY\tERROR"+worker(api.Partition{Worker: "WORKER"}))
		} else {
			fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE"+worker(api.Partition{Worker: "WORKER"})+"\tNOTE")
		}
		for _, t := range topics {
			for _, p := range t.Partitions {
				if *failed {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s%s\n", t.Mirror, t.Topic, p.Partition, retryText(p.RetryAttempt), oneLine(p.Error), worker(p))
					continue
				}
				lag := "-"
				if p.SourceOffset >= 0 && p.DestinationOffset >= 0 {
					lag = strconv.FormatInt(p.Lag, 10)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s%s\t%s\n", t.Mirror, t.Topic, p.Partition, offsetText(p.SourceOffset), offsetText(p.DestinationOffset), lag, p.State, worker(p), partitionNote(p, time.Now()))
			}
		}
		return tw.Flush()
	})
}

// partitionNote is what a describe row adds to its numbers: the clusters that did not answer,
// with the age of the offsets shown for them, and the partition's error (a FAILED or stalled
// partition's reason). Empty when there is nothing to add.
func partitionNote(p api.Partition, now time.Time) string {
	var notes []string
	for _, side := range []struct {
		name string
		at   time.Time
	}{{"source", p.SourceOffsetAt}, {"destination", p.DestinationOffsetAt}} {
		if !slices.Contains(p.Unreachable, side.name) {
			continue
		}
		if side.at.IsZero() {
			notes = append(notes, side.name+" unreachable, its offset never read")
		} else {
			notes = append(notes, fmt.Sprintf("%s unreachable, its offset from %v ago", side.name, now.Sub(side.at).Round(time.Second)))
		}
	}
	if p.Error != "" {
		notes = append(notes, oneLine(p.Error))
	}
	return strings.Join(notes, "; ")
}

// describeTopics describes every topic of one mirror, or of all mirrors.
func describeTopics(ctx context.Context, cl *api.Client, mirror string) ([]api.Topic, error) {
	var mirrors []api.Mirror
	if mirror != "" {
		m, err := cl.GetMirror(ctx, mirror)
		if err != nil {
			return nil, err
		}
		mirrors = []api.Mirror{*m}
	} else {
		var err error
		if mirrors, err = cl.ListMirrors(ctx); err != nil {
			return nil, err
		}
	}
	out := []api.Topic{}
	for _, m := range mirrors {
		for _, topic := range m.Topics {
			t, err := cl.GetTopic(ctx, m.Name, topic)
			if api.IsCode(err, api.CodeTopicNotInClusterMirror) {
				continue // moved to another mirror since the list
			}
			if err != nil {
				return nil, err
			}
			out = append(out, *t)
		}
	}
	return out, nil
}

func onlyFailed(topics []api.Topic) []api.Topic {
	out := []api.Topic{}
	for _, t := range topics {
		var ps []api.Partition
		for _, p := range t.Partitions {
			if p.State == api.StateFailed {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			t.Partitions = ps
			out = append(out, t)
		}
	}
	return out
}

func offsetText(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

// retryText is the KIP tool's RETRY column; the worker's maximum is not part of the API, so
// only the attempt is shown.
func retryText(attempt int16) string {
	if attempt < 0 {
		return "NonRetryable"
	}
	return strconv.Itoa(int(attempt))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func listCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	c := newClientCLI("list", "[--json]", stderr)
	asJSON := c.fs.Bool("json", false, "print the mirrors as JSON")
	return c.run(args, getenv, cliTimeout, func(ctx context.Context, cl *api.Client) error {
		mirrors, err := cl.ListMirrors(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, mirrors)
		}
		return printMirrors(stdout, mirrors)
	})
}

// groupCommand lists the workers of the group and what each one runs.
func groupCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	c := newClientCLI("group", "[--json]", stderr)
	asJSON := c.fs.Bool("json", false, "print the group as JSON")
	return c.run(args, getenv, cliTimeout, func(ctx context.Context, cl *api.Client) error {
		g, err := cl.Group(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(stdout, g)
		}
		fmt.Fprintf(stdout, "group %s, generation %d, %d workers\n", g.Name, g.Generation, len(g.Members))
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKER\tVERSION\tAPI\tPARTITIONS\tMIRROR-SYNCS\tCOMMANDS")
		for _, m := range g.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%t\n", m.WorkerID, m.Version, m.APIURL, m.Partitions, strings.Join(m.MirrorSyncs, ","), m.Commands)
		}
		return tw.Flush()
	})
}

// printMirrors prints the KIP tool's list table.
func printMirrors(stdout io.Writer, mirrors []api.Mirror) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPICS\tSOURCE-CLUSTER-ID\tSOURCE-BOOTSTRAP")
	for _, m := range mirrors {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.Name, m.TopicCount, m.SourceClusterID, strings.Join(m.Source.BootstrapServers, ","))
	}
	return tw.Flush()
}

func printJSON(stdout io.Writer, v any) error {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
