package provider

// The acceptance-test harness: the real terraform CLI (TF_ACC) drives the provider, served
// in-process, against real kafkamirror-worker processes (built once in TestMain) that mirror
// between in-process test clusters (internal/kafkatest).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

var (
	// workerBin is the kafkamirror-worker binary TestMain built; empty without TF_ACC.
	workerBin string
	// accTempDir is TF_ACC_TEMP_DIR: the acceptance tests' working directories (and so
	// their terraform.tfstate files) are created under it.
	accTempDir string
	// writeOnlySupported is whether the terraform CLI has write-only attributes (1.11+).
	// Older CLIs (the 1.5.7 that scripts/lib/terraform.sh builds) use the sensitive
	// password instead.
	writeOnlySupported bool
)

func TestMain(m *testing.M) {
	os.Exit(kafkatest.Finish(testMain(m)))
}

func testMain(m *testing.M) int {
	// Acceptance tests run by default whenever a terraform CLI is at hand; the harness is
	// pointed at it, so it never downloads one. In CI a missing CLI is a failure.
	if tf := findTerraformCLI(); tf != "" {
		if os.Getenv("TF_ACC") == "" {
			os.Setenv("TF_ACC", "1")
		}
		os.Setenv("TF_ACC_TERRAFORM_PATH", tf)
	} else if os.Getenv("CI") == "true" {
		fmt.Fprintln(os.Stderr, "internal/provider: no terraform CLI on PATH or in TF_ACC_TERRAFORM_PATH; CI must run the acceptance tests")
		return 1
	} else {
		fmt.Fprintln(os.Stderr, "internal/provider: no terraform CLI on PATH or in TF_ACC_TERRAFORM_PATH; acceptance tests are skipped")
	}
	os.Setenv("CHECKPOINT_DISABLE", "1")

	dir, err := os.MkdirTemp("", "kafkamirror-provider-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	accTempDir = filepath.Join(dir, "tf")
	if err := os.Mkdir(accTempDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("TF_ACC_TEMP_DIR", accTempDir)

	if os.Getenv("TF_ACC") != "" {
		v, err := terraformVersion(os.Getenv("TF_ACC_TERRAFORM_PATH"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "internal/provider:", err)
			return 1
		}
		writeOnlySupported = v.GreaterThanOrEqual(version.Must(version.NewVersion("1.11.0")))
		fmt.Fprintf(os.Stderr, "internal/provider: acceptance tests with terraform %s (write-only attributes: %v)\n", v, writeOnlySupported)
		if workerBin, err = workertest.Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "building kafkamirror-worker:", err)
			return 1
		}
	}
	return m.Run()
}

// terraformVersion asks the CLI at path for its version.
func terraformVersion(path string) (*version.Version, error) {
	if path == "" {
		return nil, fmt.Errorf("TF_ACC is set but TF_ACC_TERRAFORM_PATH is not")
	}
	out, err := exec.Command(path, "version", "-json").Output()
	if err != nil {
		return nil, fmt.Errorf("%s version -json: %w", path, err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return nil, fmt.Errorf("%s version -json: %w", path, err)
	}
	return version.NewVersion(v.Version)
}

// findTerraformCLI returns TF_ACC_TERRAFORM_PATH when it names a file, else terraform from
// PATH, else "".
func findTerraformCLI() string {
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return ""
	}
	p, err := exec.LookPath("terraform")
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	return abs
}

// --- provider factories that record plan warnings ---

// planRecorder records the warnings the provider returns from PlanResourceChange,
// ReadResource (refresh) and ApplyResourceChange, as the terraform CLI receives them. terraform-plugin-testing does not expose warnings, so the
// tests wrap the in-process provider server.
type planRecorder struct {
	mu       sync.Mutex
	warnings []string // "summary: detail"
}

// factories serves the provider under each of the given provider names (each name is a
// separate provider instance with its own configuration).
func (r *planRecorder) factories(names ...string) map[string]func() (tfprotov6.ProviderServer, error) {
	out := map[string]func() (tfprotov6.ProviderServer, error){}
	for _, name := range names {
		out[name] = func() (tfprotov6.ProviderServer, error) {
			s, err := providerserver.NewProtocol6WithError(New("test")())()
			if err != nil {
				return nil, err
			}
			return &recordingServer{ProviderServer: s, rec: r}, nil
		}
	}
	return out
}

// stateCheckFunc runs an assertion as a state check (after the step's apply). Unlike a
// TestStep Check it needs no legacy state, which cannot represent for_each instances.
type stateCheckFunc func()

func (f stateCheckFunc) CheckState(context.Context, statecheck.CheckStateRequest, *statecheck.CheckStateResponse) {
	f()
}

// reset forgets what was recorded (call it before the plan of interest).
func (r *planRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = nil
}

func (r *planRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warnings...)
}

type recordingServer struct {
	tfprotov6.ProviderServer
	rec *planRecorder
}

func (s *recordingServer) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	resp, err := s.ProviderServer.ReadResource(ctx, req)
	if resp != nil {
		s.rec.record(resp.Diagnostics)
	}
	return resp, err
}

func (r *planRecorder) record(ds []*tfprotov6.Diagnostic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		if d.Severity == tfprotov6.DiagnosticSeverityWarning {
			r.warnings = append(r.warnings, d.Summary+": "+d.Detail)
		}
	}
}

func (s *recordingServer) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	resp, err := s.ProviderServer.ApplyResourceChange(ctx, req)
	if resp != nil {
		s.rec.record(resp.Diagnostics)
	}
	return resp, err
}

func (s *recordingServer) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := s.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		s.rec.record(resp.Diagnostics)
	}
	return resp, err
}

// expectWarning is a plan check: some recorded plan warning contains every one of want.
type expectWarning struct {
	rec  *planRecorder
	want []string
}

var _ plancheck.PlanCheck = expectWarning{}

func (c expectWarning) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	ws := c.rec.all()
next:
	for _, w := range ws {
		for _, s := range c.want {
			if !strings.Contains(w, s) {
				continue next
			}
		}
		return
	}
	resp.Error = fmt.Errorf("no plan warning contains all of %q; the plan's warnings were:\n%s", c.want, strings.Join(ws, "\n---\n"))
}

// --- the worker under test ---

// testToken is the API token of the workers the tests start.
const testToken = "provider-test-token-3b9e"

// testSecretKey encrypts stored source credentials in the workers the tests start.
const testSecretKey = "provider-test-secret-key-0123456789"

// testWorker is a running kafkamirror-worker process.
type testWorker struct {
	url    string
	client *api.Client
}

// startWorker starts a worker mirroring into dst and waits until it is ready. extraEnv
// ("K=V") adds settings, such as the destination's SASL credentials.
func startWorker(t *testing.T, dst *kafkatest.Cluster, extraEnv ...string) *testWorker {
	t.Helper()
	env := workertest.Env(dst.Addrs(), testToken, append([]string{
		"KAFKAMIRROR_SECRET_KEY=" + testSecretKey, "KAFKAMIRROR_LOG_LEVEL=info",
	}, extraEnv...)...)
	p := workertest.Start(t, workerBin, env)
	p.WaitReady(t)
	return &testWorker{url: p.URL, client: p.Client}
}

// providerBlock is the provider configuration for w, under provider name name
// ("kafkamirror" when empty), with extra attributes (HCL) appended.
func (w *testWorker) providerBlock(name string, extra ...string) string {
	if name == "" {
		name = "kafkamirror"
	}
	return fmt.Sprintf("provider %q {\n  worker_url   = %q\n  worker_token = %q\n%s}\n", name, w.url, testToken, strings.Join(extra, "\n"))
}

// waitTopicState polls the worker until every partition of the topic is in state.
func (w *testWorker) waitTopicState(t *testing.T, mirror, topic, state string) *api.Topic {
	t.Helper()
	var last *api.Topic
	kafkatest.WaitFor(t, 60*time.Second, fmt.Sprintf("topic %s of %s in %s", topic, mirror, state), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := w.client.GetTopic(ctx, mirror, topic)
		if err != nil {
			return false, err.Error()
		}
		last = d
		done, _ := reached(d.Partitions, state)
		return done, describePartitions(d.Partitions)
	})
	return last
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noSecretInState is a state check that reads every terraform.tfstate the acceptance tests
// wrote (under TF_ACC_TEMP_DIR) that mentions marker, and fails when one holds secret. It
// also fails when no such state file exists, so it cannot pass by looking nowhere. skip
// turns it off (a CLI without write-only attributes keeps the sensitive password).
type noSecretInState struct {
	marker, secret string
	skip           bool
}

var _ statecheck.StateCheck = noSecretInState{}

func (c noSecretInState) CheckState(_ context.Context, _ statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	if c.skip {
		return
	}
	var checked []string
	err := filepath.WalkDir(accTempDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // working directories of parallel tests come and go
		}
		if d.IsDir() || (d.Name() != "terraform.tfstate" && d.Name() != "terraform.tfstate.backup") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte(c.marker)) {
			return nil
		}
		if bytes.Contains(data, []byte(c.secret)) {
			return fmt.Errorf("the state file %s holds the credential", p)
		}
		checked = append(checked, p)
		return nil
	})
	switch {
	case err != nil:
		resp.Error = err
	case len(checked) == 0:
		resp.Error = fmt.Errorf("no terraform.tfstate under %s mentions %q", accTempDir, c.marker)
	}
}

// accTest marks an acceptance test that runs in parallel with the others.
func accTest(t *testing.T) {
	t.Helper()
	t.Parallel()
	requireAcc(t)
}

// requireAcc skips t without TF_ACC and a terraform CLI.
func requireAcc(t *testing.T) {
	t.Helper()
	if workerBin == "" {
		t.Skip("acceptance tests need TF_ACC and a terraform CLI")
	}
}
