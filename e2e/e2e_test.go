// Package e2e runs kafkamirror as a user does: the worker binary in embedded mode, the
// provider binary through the real terraform CLI with dev_overrides, and a consumer group that
// fails over with its committed offsets.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

var (
	bin       string // directory with the built worker and provider
	workerBin string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kafkamirror-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	if workerBin, err = workertest.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building the worker:", err)
		os.Exit(1)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "terraform-provider-kafkamirror"), "..").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the provider: %v\n%s", err, out)
		os.Exit(1)
	}
	code := kafkatest.Finish(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// startWorker runs the worker in embedded mode (two in-process clusters) on free ports.
func startWorker(t *testing.T, token string) *workertest.Proc {
	t.Helper()
	env := workertest.Env(nil, token, "KAFKAMIRROR_SECRET_KEY=e2e-secret-key-0123456789", "KAFKAMIRROR_LOG_FORMAT=text")
	w := workertest.Start(t, workerBin, env, "demo",
		"--source-port", fmt.Sprint(kafkatest.FreePort(t)), "--destination-port", fmt.Sprint(kafkatest.FreePort(t)),
		"--api-listen", fmt.Sprintf("127.0.0.1:%d", kafkatest.FreePort(t)))
	w.WaitReady(t)
	return w
}

// terraform runs the real CLI on dir with the provider binary through dev_overrides.
func terraform(t *testing.T, dir string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("terraform")
	if p := os.Getenv("TF_ACC_TERRAFORM_PATH"); p != "" {
		path, err = p, nil
	}
	if err != nil {
		t.Fatal("terraform not found; ./scripts/test.sh installs it")
	}
	rc := filepath.Join(dir, "terraformrc")
	if err := os.WriteFile(rc, fmt.Appendf(nil, "provider_installation {\n  dev_overrides {\n    \"kafkamirror/kafkamirror\" = %q\n  }\n  direct {}\n}\n", bin), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, append([]string{"-chdir=" + dir}, args...)...)
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const config = `
terraform {
  required_providers {
    kafkamirror = { source = "kafkamirror/kafkamirror" }
  }
}
variable "state" { default = "mirroring" }
provider "kafkamirror" {
  worker_url   = %q
  worker_token = %q
}
resource "kafkamirror_cluster_mirror" "primary" {
  name   = "primary-to-dr"
  source = { bootstrap_servers = [%q] }
  sync   = { interval = "1s", consumer_groups = true, topic_configs = true }
}
resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.primary.name
  topic       = "orders"
  state       = var.state
}
`

func TestQuickstartFlowWithRealProcesses(t *testing.T) {
	kafkatest.RequireFake(t)
	const token = "e2e-token-0123456789"
	w := startWorker(t, token)
	// The embedded destination enforces ACLs: its demo user writes everything but a
	// mirrored topic.
	quickstartFlow(t, w, token, w.Ready["source"], w.Ready["destination"],
		kgo.SASL(scram.Auth{User: "demo", Pass: "demo-secret"}.AsSha256Mechanism()))
}

// The same flow with the worker in its production mode against real Apache Kafka clusters:
// the newest Kafka as the source, each Kafka version of the tier as the destination.
func TestQuickstartFlowOnKafka(t *testing.T) {
	kafkatest.RequireKafka(t)
	versions := kafkatest.KafkaVersions()
	for _, v := range versions {
		t.Run("kafka-"+versions[0]+"-to-"+v, func(t *testing.T) {
			src := kafkatest.New(t, kafkatest.Kafka(versions[0]))
			dst := kafkatest.New(t, kafkatest.Kafka(v))
			kafkatest.Tally(t, src.Broker()+" → "+dst.Broker())
			const token = "e2e-token-0123456789"
			env := workertest.Env(dst.Addrs(), token, "KAFKAMIRROR_SECRET_KEY=e2e-secret-key-0123456789", "KAFKAMIRROR_LOG_FORMAT=text")
			w := workertest.Start(t, workerBin, env, "run")
			w.WaitReady(t)
			quickstartFlow(t, w, token, src.Addrs()[0], dst.Addrs()[0], nil)
		})
	}
}

// quickstartFlow is the quickstart as a user runs it: sample data, a consumer group that
// commits half way, terraform apply, identical logs and group offsets, a failover by apply,
// and the group carrying on at the destination with nothing skipped or repeated. dstAuth,
// when set, authenticates to a destination that enforces ACLs: a write to the mirrored topic
// must then be refused until the failover.
func quickstartFlow(t *testing.T, w *workertest.Proc, token, source, destination string, dstAuth kgo.Opt) {
	t.Helper()
	ctx := context.Background()
	client := func(addr string, opts ...kgo.Opt) *kgo.Client {
		if addr == destination && dstAuth != nil {
			opts = append(opts, dstAuth)
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	// Sample data: plain and compressed records on the source.
	if _, err := kadm.NewClient(client(source)).CreateTopic(ctx, 3, -1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	prod := client(source, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	const total = 300
	for i := range total {
		prod.Produce(ctx, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i%11), Value: fmt.Appendf(nil, "order-%d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// A consumer group reads half on the source and commits.
	seen := map[string]bool{}
	consume := func(addr string, n int) {
		cl := client(addr, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(300), kgo.FetchMaxBytes(300))
		for got := 0; got < n; {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			fs := cl.PollRecords(pctx, n-got)
			cancel()
			if err := fs.Err0(); err != nil {
				t.Fatalf("consuming from %s: %v", addr, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if seen[string(r.Value)] {
					t.Fatalf("%s delivered twice", r.Value)
				}
				seen[string(r.Value)] = true
				got++
			})
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	consume(source, total/2)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), fmt.Appendf(nil, config, w.URL, token, source), 0o600); err != nil {
		t.Fatal(err)
	}
	terraform(t, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	cmp := func() error {
		d, err := kafkatest.CompareTopic(ctx, client(source), client(destination), "orders")
		if err == nil && d != nil {
			err = d
		}
		return err
	}
	eventually(t, "identical logs", cmp)

	// The group's offsets reach the destination as they are.
	srcOffsets, err := kadm.NewClient(client(source)).FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "group offsets on the destination", func() error {
		dstOffsets, err := kadm.NewClient(client(destination)).FetchOffsets(ctx, "billing")
		if err != nil {
			return err
		}
		var diff error
		srcOffsets.Each(func(o kadm.OffsetResponse) {
			if d, ok := dstOffsets.Lookup(o.Topic, o.Partition); !ok || d.At != o.At {
				diff = fmt.Errorf("%s[%d]: source %d, destination %v", o.Topic, o.Partition, o.At, d.At)
			}
		})
		return diff
	})

	if dstAuth != nil {
		err := client(destination).ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("while mirrored")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Fatalf("writing to the mirrored topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
		}
	}

	// Fail over with one apply, then the group continues on the destination.
	out := terraform(t, dir, "apply", "-auto-approve", "-input=false", "-no-color", "-var", "state=stopped")
	if !strings.Contains(out, "Apply complete") {
		t.Fatalf("failover apply: %s", out)
	}
	consume(destination, total/2)
	if len(seen) != total {
		t.Fatalf("%d distinct records across the failover, want %d", len(seen), total)
	}
	// The failed-over topic is writable.
	if err := client(destination).ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("after failover")}).FirstErr(); err != nil {
		t.Fatalf("writing after failover: %v", err)
	}
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("worker exit code %d after SIGTERM", code)
	}
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}
