package main

// The operators' commands of the KIP's kafka-cluster-mirrors.sh: create and delete a
// mirror; start (also the restart of a stopped or FAILED topic), stop (failover, or
// promote), pause and resume topics. Like describe and list they are clients of a running
// worker's API, and print tables.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// commandCLITimeout bounds a command, retries included: a start with divergence
// "recreate" deletes and recreates a topic, a promote waits for lag 0.
const commandCLITimeout = 6 * time.Minute

func createCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	c := newClientCLI("create", "--mirror NAME --mirror-config FILE", stderr)
	mirror := c.mirrorFlag()
	config := c.fs.String("mirror-config", "", "file of the source cluster's connection, as Kafka client properties: "+
		strings.Join(mirrorConfigKeys, ", ")+" (required)")
	c.require("mirror-config", config)
	return c.run(args, getenv, commandCLITimeout, func(ctx context.Context, cl *api.Client) error {
		src, clusterID, err := readMirrorConfig(*config)
		if err != nil {
			return err
		}
		m, err := cl.CreateMirror(ctx, api.CreateMirrorRequest{Name: *mirror, Source: src, SourceClusterID: clusterID})
		if err != nil {
			return err
		}
		return printMirrors(stdout, []api.Mirror{*m})
	})
}

func deleteCommand(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	c := newClientCLI("delete", "--mirror NAME", stderr)
	mirror := c.mirrorFlag()
	return c.run(args, getenv, commandCLITimeout, func(ctx context.Context, cl *api.Client) error {
		if err := cl.DeleteMirror(ctx, *mirror); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MIRROR\tRESULT")
		fmt.Fprintf(tw, "%s\tDELETED\n", *mirror)
		return tw.Flush()
	})
}

// topicCommandCLI is start, stop, pause or resume. --topics takes names or regular
// expressions, comma-separated, each matching whole names: a start matches them against
// the source's topics, the others against the mirror's.
func topicCommandCLI(action string) func(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
	return func(args []string, stdout, stderr io.Writer, getenv func(string) (string, bool)) int {
		c := newClientCLI(action, "--mirror NAME --topics NAMES-OR-REGEXES", stderr)
		mirror := c.mirrorFlag()
		topics := c.fs.String("topics", "", "comma-separated topic names or regular expressions matching whole names (required)")
		c.require("topics", topics)
		var req api.TopicsRequest
		var promote bool
		switch action {
		case api.ActionStart:
			c.fs.StringVar(&req.Divergence, "divergence", api.DivergenceFail,
				`what to do with a destination that has records the source lacks: "fail" or "recreate" the destination topic`)
		case api.ActionStop:
			c.fs.BoolVar(&promote, "promote", false, "wait for lag 0 and a final consumer group offset sync before stopping (default: fail over at once)")
			c.fs.StringVar(&req.PromoteTimeout, "promote-timeout", "", "with --promote: how long to wait for lag 0 (default 1m)")
		}
		return c.run(args, getenv, commandCLITimeout, func(ctx context.Context, cl *api.Client) error {
			if promote {
				req.Mode = api.StopPromote
			}
			var err error
			if req.Topics, err = resolveTopics(ctx, cl, action, *mirror, *topics); err != nil {
				return err
			}
			results, err := cl.TopicCommand(ctx, *mirror, action, req)
			if err != nil {
				return err
			}
			return printTopicResults(ctx, cl, stdout, c.stderr, action, *mirror, results)
		})
	}
}

// resolveTopics turns --topics into topic names. An item that matches no candidate is kept
// when it is a topic name, so that the worker says what is wrong with it.
func resolveTopics(ctx context.Context, cl *api.Client, action, mirror, list string) ([]string, error) {
	var candidates []string
	if action == api.ActionStart {
		names, err := cl.SourceTopics(ctx, mirror, "")
		if err != nil {
			return nil, err
		}
		candidates = names
	} else {
		m, err := cl.GetMirror(ctx, mirror)
		if err != nil {
			return nil, err
		}
		candidates = m.Topics
	}
	var out []string
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + item + ")$")
		if err != nil {
			return nil, fmt.Errorf("--topics: %q is neither a topic name nor a regular expression: %v", item, err)
		}
		matched := false
		for _, t := range candidates {
			if re.MatchString(t) {
				matched = true
				if !slices.Contains(out, t) {
					out = append(out, t)
				}
			}
		}
		switch {
		case matched:
		case !topicName.MatchString(item):
			return nil, fmt.Errorf("--topics: %q matches no topic of %s", item, candidateSource(action, mirror))
		case !slices.Contains(out, item):
			out = append(out, item)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--topics names no topic")
	}
	return out, nil
}

// topicName is Kafka's topic name alphabet.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

func candidateSource(action, mirror string) string {
	if action == api.ActionStart {
		return fmt.Sprintf("cluster mirror %q's source", mirror)
	}
	return fmt.Sprintf("cluster mirror %q", mirror)
}

// printTopicResults prints one line a topic, and a note for every changed topic that
// Terraform manages: its next apply undoes an operator's change its configuration does
// not say. A failed topic makes the command fail.
func printTopicResults(ctx context.Context, cl *api.Client, stdout, stderr io.Writer, action, mirror string, results []api.TopicResult) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tTOPIC\tRESULT\tMESSAGE")
	failed := 0
	var managed []string
	for _, r := range results {
		result, msg := "OK", ""
		if r.FinalSync != "" {
			msg = "final group offset sync: " + r.FinalSync
		}
		if r.ErrorCode != "" {
			result, msg = r.ErrorCode, r.Message
			failed++
		} else if t, err := cl.GetTopic(ctx, mirror, r.Topic); err == nil && t.Owner != "" {
			managed = append(managed, r.Topic)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mirror, r.Topic, result, oneLine(msg))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(managed) > 0 {
		want := map[string]string{api.ActionStop: "stopped", api.ActionPause: "paused"}[action]
		if want == "" {
			want = "mirroring"
		}
		fmt.Fprintf(stderr, "note: Terraform manages %s (kafkamirror_mirror_topic): the next terraform apply changes it back "+
			"unless its configuration says state = %q.\n", strings.Join(managed, ", "), want)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d topics failed", failed, len(results))
	}
	return nil
}

// mirrorConfigKeys are the Kafka client properties --mirror-config understands, with the
// KIP's source.cluster.id; the PEM files are read here and sent inline.
var mirrorConfigKeys = []string{
	"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
	"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "source.cluster.id",
}

// jaasValue finds key="value" in a sasl.jaas.config line.
var jaasValue = regexp.MustCompile(`(\w+)\s*=\s*"([^"]*)"`)

// readMirrorConfig reads a source connection from a properties file. Its errors name keys
// and lines, never values: a value may be a password.
func readMirrorConfig(path string) (api.SourceConnection, string, error) {
	var src api.SourceConnection
	f, err := os.Open(path)
	if err != nil {
		return src, "", fmt.Errorf("--mirror-config: %w", err)
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return src, "", fmt.Errorf("--mirror-config %s: line %d is not key=value", path, n)
		}
		key := strings.TrimSpace(line[:i])
		if !slices.Contains(mirrorConfigKeys, key) {
			return src, "", fmt.Errorf("--mirror-config %s: line %d: unknown key %q (known: %s)", path, n, key, strings.Join(mirrorConfigKeys, ", "))
		}
		props[key] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return src, "", fmt.Errorf("--mirror-config %s: %w", path, err)
	}
	for s := range strings.SplitSeq(props["bootstrap.servers"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			src.BootstrapServers = append(src.BootstrapServers, s)
		}
	}
	if len(src.BootstrapServers) == 0 {
		return src, "", fmt.Errorf("--mirror-config %s: bootstrap.servers is required", path)
	}
	protocol := strings.ToUpper(props["security.protocol"])
	switch protocol {
	case "", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
	default:
		return src, "", fmt.Errorf("--mirror-config %s: security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", path, props["security.protocol"])
	}
	if strings.HasPrefix(protocol, "SASL_") {
		sasl := &api.SASL{Mechanism: strings.ToUpper(props["sasl.mechanism"]), Username: props["sasl.username"], Password: props["sasl.password"]}
		if sasl.Mechanism == "" {
			sasl.Mechanism = "PLAIN" // Kafka's default
		}
		for _, m := range jaasValue.FindAllStringSubmatch(props["sasl.jaas.config"], -1) {
			switch m[1] {
			case "username":
				sasl.Username = m[2]
			case "password":
				sasl.Password = m[2]
			}
		}
		if sasl.Username == "" || sasl.Password == "" {
			return src, "", fmt.Errorf("--mirror-config %s: security.protocol %s needs a user name and a password "+
				`(sasl.jaas.config with username="..." password="...", or sasl.username and sasl.password)`, path, protocol)
		}
		src.SASL = sasl
	}
	if strings.HasSuffix(protocol, "SSL") {
		src.TLS = &api.TLS{}
		for key, dst := range map[string]*string{
			"ssl.ca.location": &src.TLS.CACertPEM, "ssl.certificate.location": &src.TLS.ClientCertPEM, "ssl.key.location": &src.TLS.ClientKeyPEM,
		} {
			if props[key] == "" {
				continue
			}
			pem, err := os.ReadFile(props[key])
			if err != nil {
				return src, "", fmt.Errorf("--mirror-config %s: %s: %w", path, key, err)
			}
			*dst = string(pem)
		}
	}
	return src, props["source.cluster.id"], nil
}
