package main

// Helpers for the tests that run the real kafkamirror-worker binary: it is built once in
// TestMain, started as a subprocess against in-process test clusters, and driven only over
// HTTP (internal/api's client, or raw requests) and its CLI.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

// binPath is the worker binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kafkamirror-worker-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binPath, err = workertest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building kafkamirror-worker:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := kafkatest.Finish(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// testToken is the API token of the workers the tests start.
const testToken = "test-token-7f3a9c1e5b"

// workerProc is a running worker binary, with the worker tests' ways of talking to it.
type workerProc struct{ *workertest.Proc }

// sourceTopic is a topic filledPair creates on the source with its first records.
type sourceTopic struct {
	name       string
	partitions int32
	records    int
}

// filledPair starts a source and a destination cluster with the topics on the source, and
// returns a producer to the source.
func filledPair(t *testing.T, topics ...sourceTopic) (src, dst *kafkatest.Cluster, prod *kgo.Client) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	prod = src.Client(t)
	for _, st := range topics {
		src.CreateTopic(t, st.name, st.partitions, nil)
		kafkatest.ProduceKeyed(t, prod, st.name, 0, st.records)
	}
	return src, dst, prod
}

// mirrorTopics creates mirror, its source the cluster at addrs, and starts topics in it.
func mirrorTopics(ctx context.Context, t *testing.T, c *api.Client, mirror string, addrs []string, topics ...string) {
	t.Helper()
	if _, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: mirror, Source: api.SourceConnection{BootstrapServers: addrs}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.StartTopics(ctx, mirror, topics, "")
	if err != nil || len(res) != len(topics) {
		t.Fatalf("start %v: %+v, %v", topics, res, err)
	}
	for _, r := range res {
		if r.Err() != nil {
			t.Fatalf("start %v: %+v", topics, res)
		}
	}
}

// workerEnv is the environment of a worker on dst (none when nil), logging at debug level;
// extra entries ("K=V") override.
func workerEnv(dst *kafkatest.Cluster, extra ...string) []string {
	var addrs []string
	if dst != nil {
		addrs = dst.Addrs()
	}
	return workertest.Env(addrs, testToken, append([]string{"KAFKAMIRROR_LOG_LEVEL=debug"}, extra...)...)
}

// startProc starts the binary and returns without waiting for it to be ready.
func startProc(t *testing.T, env []string, args ...string) *workerProc {
	t.Helper()
	return &workerProc{workertest.Start(t, binPath, env, args...)}
}

// startWorker starts the binary and waits for its ready line.
func startWorker(t *testing.T, env []string, args ...string) *workerProc {
	t.Helper()
	w := startProc(t, env, args...)
	w.WaitReady(t)
	return w
}

// cli runs a CLI subcommand of the binary against the worker.
func (w *workerProc) cli(t *testing.T, args ...string) (stdout string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, append(args, "--worker-url", w.URL)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KAFKAMIRROR_API_TOKEN=" + w.Token}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if errb.Len() > 0 {
		t.Logf("%v stderr: %s", args, errb.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// raw sends a request without the api client, for what the client would never send.
func (w *workerProc) raw(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	return w.rawTyped(t, method, path, token, "", body)
}

// rawTyped is raw with a Content-Type header; none when contentType is empty.
func (w *workerProc) rawTyped(t *testing.T, method, path, token, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, w.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// waitTopic polls the topic's description until every partition passes ok.
func waitTopic(t *testing.T, c *api.Client, mirror, topic string, what string, ok func(api.Partition) bool) *api.Topic {
	t.Helper()
	var last *api.Topic
	kafkatest.WaitFor(t, 60*time.Second, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := c.GetTopic(ctx, mirror, topic)
		if err != nil {
			return false, err.Error()
		}
		last = d
		if len(d.Partitions) == 0 {
			return false, "no partitions yet"
		}
		for _, p := range d.Partitions {
			if !ok(p) {
				return false, fmt.Sprintf("partition %+v", p)
			}
		}
		return true, ""
	})
	return last
}

func caughtUp(state string) func(api.Partition) bool {
	return func(p api.Partition) bool {
		return p.State == state && p.SourceOffset >= 0 && p.DestinationOffset == p.SourceOffset && p.Lag == 0
	}
}

func inState(state string) func(api.Partition) bool {
	return func(p api.Partition) bool { return p.State == state }
}

// wantAPIError checks that err is an *api.Error with the status and code.
func wantAPIError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Fatalf("%s: error %v, want HTTP %d %s", what, err, status, code)
	}
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads /metrics and parses the text format: enough of it for these tests (no
// escaped quotes or commas inside label values).
func scrape(t *testing.T, url string) []sample {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		s := sample{name: line[:i], labels: map[string]string{}, value: v}
		if j := strings.IndexByte(s.name, '{'); j >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(s.name[j+1:], "}"), ",") {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = strings.Trim(v, `"`)
			}
			s.name = s.name[:j]
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// metric returns the value of the sample with the name and (a superset of) the labels.
func metric(samples []sample, name string, labels ...string) (float64, bool) {
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}
