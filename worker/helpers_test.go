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
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// binPath is the worker binary built by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kafkamirror-worker-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "kafkamirror-worker")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building kafkamirror-worker:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a bytes.Buffer safe for the exec package's copying goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// workerProc is a running worker binary.
type workerProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	url            string
	token          string
	client         *api.Client
}

// testToken is the API token of the workers the tests start.
const testToken = "test-token-7f3a9c1e5b"

// workerEnv is the environment of a worker on dst; extra entries ("K=V") override.
// Nothing of the test process's environment leaks in but PATH and HOME, so a developer's
// KAFKAMIRROR_* settings cannot change what is tested.
func workerEnv(dst *kafkatest.Cluster, extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"KAFKAMIRROR_API_TOKEN=" + testToken,
		"KAFKAMIRROR_API_LISTEN=127.0.0.1:0",
		"KAFKAMIRROR_LOG_LEVEL=debug",
		"KAFKAMIRROR_LOG_FORMAT=json",
		// Retry quickly: the tests must not wait out production back-offs.
		"KAFKAMIRROR_RETRY_INITIAL_BACKOFF=50ms",
		"KAFKAMIRROR_RETRY_MAX_BACKOFF=1s",
	}
	if dst != nil {
		env = append(env, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="+strings.Join(dst.Addrs(), ","))
	}
	return append(env, extra...)
}

// startProc starts the binary and returns without waiting for it to be ready.
func startProc(t *testing.T, env []string, args ...string) *workerProc {
	t.Helper()
	w := &workerProc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{}), token: testToken}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "KAFKAMIRROR_API_TOKEN="); ok {
			w.token = v
		}
	}
	w.cmd = exec.Command(binPath, args...)
	w.cmd.Env = env
	w.cmd.Stdout, w.cmd.Stderr = w.stdout, w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.kill()
		if t.Failed() {
			t.Logf("worker stdout:\n%s\nworker stderr (last 6000 bytes):\n%s", w.stdout, tail(w.stderr.String(), 6000))
		}
	})
	return w
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

var readyLine = regexp.MustCompile(`kafkamirror-worker ready: api=(\S+)`)

// startWorker starts the binary and waits for its ready line.
func startWorker(t *testing.T, env []string, args ...string) *workerProc {
	t.Helper()
	w := startProc(t, env, args...)
	w.waitReady(t)
	return w
}

func (w *workerProc) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "the worker's ready line", func() (bool, string) {
		select {
		case <-w.done:
			t.Fatalf("the worker exited (code %d) before it was ready", w.cmd.ProcessState.ExitCode())
		default:
		}
		m := readyLine.FindStringSubmatch(w.stdout.String())
		if m == nil {
			return false, "stdout: " + w.stdout.String()
		}
		w.url = m[1]
		return true, ""
	})
	var err error
	w.client, err = api.NewClient(api.ClientConfig{URL: w.url, Token: w.token, RetryWaitMin: 20 * time.Millisecond, RetryWaitMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
}

// terminate sends SIGTERM and returns the exit code.
func (w *workerProc) terminate(t *testing.T) int {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(60 * time.Second):
		w.kill()
		t.Fatal("the worker did not exit within 60s of SIGTERM")
	}
	return w.cmd.ProcessState.ExitCode()
}

func (w *workerProc) kill() {
	select {
	case <-w.done:
	default:
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

// output is everything the worker printed.
func (w *workerProc) output() string { return w.stdout.String() + w.stderr.String() }

// cli runs a CLI subcommand of the binary against the worker.
func (w *workerProc) cli(t *testing.T, args ...string) (stdout string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, append(args, "--worker-url", w.url)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KAFKAMIRROR_API_TOKEN=" + w.token}
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
	req, err := http.NewRequest(method, w.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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

// waitFor polls cond until it holds, failing the test with cond's last words at the
// deadline.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTopic polls the topic's description until every partition passes ok.
func waitTopic(t *testing.T, c *api.Client, mirror, topic string, what string, ok func(api.Partition) bool) *api.Topic {
	t.Helper()
	var last *api.Topic
	waitFor(t, 60*time.Second, what, func() (bool, string) {
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

// produce writes n keyed records to topic and waits for their acknowledgement.
func produce(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := from + i
		recs[i] = &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(k%17)), Value: []byte("value-" + strconv.Itoa(k))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
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
