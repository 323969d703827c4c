package main

// describe and list: the KIP tool's (kafka-cluster-mirrors.sh) tables, read through the
// HTTP API like any other client, so they work against a remote worker too.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
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
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--worker-ca-file %s: no PEM certificate", c.caFile)
		}
		cfg.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return api.NewClient(cfg)
}

func parseCLI(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return false, 2
	}
	return true, 0
}

func describeCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("kafkamirror-worker describe", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	mirror := fs.String("mirror", "", "describe only this mirror")
	failed := fs.Bool("failed", false, "only FAILED partitions, with their retry attempt and error")
	asJSON := fs.Bool("json", false, "print the topic descriptions as JSON")
	if ok, code := parseCLI(fs, args, stderr); !ok {
		return code
	}
	cl, err := cf.client(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker describe: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	topics, err := describeTopics(ctx, cl, *mirror)
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker describe: %v\n", err)
		return 1
	}
	if *failed {
		topics = onlyFailed(topics)
	}
	if *asJSON {
		return printJSON(stdout, stderr, topics)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if *failed {
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tRETRY\tERROR")
	} else {
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSOURCE-OFFSET\tDESTINATION-OFFSET\tLAG\tSTATE")
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			if *failed {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.Mirror, t.Topic, p.Partition, retryText(p.RetryAttempt), oneLine(p.Error))
				continue
			}
			lag := "-"
			if p.SourceOffset >= 0 && p.DestinationOffset >= 0 {
				lag = strconv.FormatInt(p.Lag, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.Mirror, t.Topic, p.Partition, offsetText(p.SourceOffset), offsetText(p.DestinationOffset), lag, p.State)
		}
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
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
	fs := flag.NewFlagSet("kafkamirror-worker list", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the mirrors as JSON")
	if ok, code := parseCLI(fs, args, stderr); !ok {
		return code
	}
	cl, err := cf.client(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker list: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	mirrors, err := cl.ListMirrors(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker list: %v\n", err)
		return 1
	}
	if *asJSON {
		return printJSON(stdout, stderr, mirrors)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPICS\tSOURCE-CLUSTER-ID\tSOURCE-BOOTSTRAP")
	for _, m := range mirrors {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.Name, m.TopicCount, m.SourceClusterID, strings.Join(m.Source.BootstrapServers, ","))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "kafkamirror-worker: %v\n", err)
		return 1
	}
	return 0
}
