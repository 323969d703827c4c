// Package workertest builds the kafkamirror-worker binary and runs it as a real process for
// the tests of the worker, the provider and the end-to-end flow: one way to start, wait for,
// stop and inspect a worker, so those tests exercise the binary users run.
package workertest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// Build compiles kafkamirror-worker into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "kafkamirror-worker")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/kafkamirror/terraform-provider-kafkamirror/worker")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return bin, cmd.Run()
}

// Env is a worker's environment: the API token, a free loopback API port, JSON logs, quick
// retries (tests must not wait out production back-offs) and, when given, the destination's
// bootstrap servers; extra entries ("K=V") follow and override. Nothing of the test
// process's environment but PATH and HOME leaks in, so a developer's KAFKAMIRROR_* settings
// cannot change what is tested.
func Env(destination []string, token string, extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"KAFKAMIRROR_API_TOKEN=" + token,
		"KAFKAMIRROR_API_LISTEN=127.0.0.1:0",
		"KAFKAMIRROR_LOG_FORMAT=json",
		"KAFKAMIRROR_RETRY_INITIAL_BACKOFF=50ms",
		"KAFKAMIRROR_RETRY_MAX_BACKOFF=1s",
	}
	if len(destination) > 0 {
		env = append(env, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="+strings.Join(destination, ","))
	}
	return append(env, extra...)
}

// Buffer is a bytes.Buffer safe for the exec package's copying goroutines.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proc is a running worker process.
type Proc struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *Buffer
	Token          string            // the API token from the environment
	URL            string            // the API address, once WaitReady returned
	Ready          map[string]string // the ready line's fields (api, source, destination)
	Client         *api.Client       // a client of the API, once WaitReady returned
	done           chan struct{}
}

// Start starts bin with env and args and returns without waiting for it to be ready. When
// the test ends the process gets SIGTERM (then SIGKILL after 30 s), and a failed test shows
// its output.
func Start(t kafkatest.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Stdout: &Buffer{}, Stderr: &Buffer{}, done: make(chan struct{})}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "KAFKAMIRROR_API_TOKEN="); ok {
			p.Token = v
		}
	}
	p.Cmd = exec.Command(bin, args...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p.Stdout, p.Stderr
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("%v", err)
	}
	go func() {
		_ = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(30 * time.Second)
		if t.Failed() {
			t.Logf("worker stdout:\n%s\nworker stderr (tail):\n%s", p.Stdout, Tail(p.Stderr.String(), 6000))
		}
	})
	return p
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

var readyLine = regexp.MustCompile(`kafkamirror-worker ready: (.*)`)

// WaitReady waits for the worker's ready line, then fills URL, Ready and Client. It fails
// the test if the process exits first or no ready line comes within a minute.
func (p *Proc) WaitReady(t kafkatest.TB) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if m := readyLine.FindStringSubmatch(p.Stdout.String()); m != nil {
			p.Ready = map[string]string{}
			for _, field := range strings.Fields(m[1]) {
				if k, v, ok := strings.Cut(field, "="); ok {
					p.Ready[k] = v
				}
			}
			p.URL = p.Ready["api"]
			break
		}
		select {
		case <-p.done:
			t.Fatalf("the worker exited (code %d) before it was ready: %s", p.Cmd.ProcessState.ExitCode(), Tail(p.Stderr.String(), 3000))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line from the worker within a minute; stdout: %s", p.Stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var err error
	p.Client, err = api.NewClient(api.ClientConfig{URL: p.URL, Token: p.Token, RetryWaitMin: 20 * time.Millisecond, RetryWaitMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// Terminate sends SIGTERM and returns the exit code; the test fails if the worker is still
// running a minute later.
func (p *Proc) Terminate(t kafkatest.TB) int {
	t.Helper()
	if !p.stop(time.Minute) {
		t.Fatalf("the worker did not exit within a minute of SIGTERM")
	}
	return p.Cmd.ProcessState.ExitCode()
}

// stop sends SIGTERM and, if the process is still running after grace, SIGKILL. It reports
// whether SIGTERM sufficed.
func (p *Proc) stop(grace time.Duration) bool {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

// Kill ends the process at once, as a crash would.
func (p *Proc) Kill() {
	select {
	case <-p.done:
	default:
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Output is everything the worker printed.
func (p *Proc) Output() string { return p.Stdout.String() + p.Stderr.String() }

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
