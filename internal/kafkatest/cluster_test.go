package kafkatest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func clusterIDOf(t *testing.T, cl *kgo.Client) string {
	t.Helper()
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ClusterID
}

func TestNewDefaults(t *testing.T) {
	a, b := New(t), New(t)
	if len(a.Addrs()) != 1 || !strings.HasPrefix(a.Addrs()[0], "127.0.0.1:") {
		t.Fatalf("addrs %v, want one 127.0.0.1 broker", a.Addrs())
	}
	if !strings.HasPrefix(a.ID(), "kafkatest-") || a.ID() == b.ID() {
		t.Fatalf("ids %q and %q, want distinct kafkatest- ids", a.ID(), b.ID())
	}
	if got := clusterIDOf(t, a.Client(t)); got != a.ID() {
		t.Fatalf("cluster reports id %q, ID() is %q", got, a.ID())
	}
	if a.Fake() == nil {
		t.Fatal("no kfake cluster")
	}
}

func TestBrokersAndPorts(t *testing.T) {
	c := New(t, Brokers(3), ClusterID("three"))
	if len(c.Addrs()) != 3 || c.ID() != "three" {
		t.Fatalf("addrs %v id %q", c.Addrs(), c.ID())
	}
	brokers, err := c.Admin(t).ListBrokers(testCtx(t))
	if err != nil || len(brokers) != 3 {
		t.Fatalf("brokers %v, %v", brokers, err)
	}

	ports := []int{FreePort(t), FreePort(t)}
	p := New(t, Ports(ports...))
	if got := p.Addrs(); len(got) != 2 || !strings.HasSuffix(got[0], ":"+strconv.Itoa(ports[0])) || !strings.HasSuffix(got[1], ":"+strconv.Itoa(ports[1])) {
		t.Fatalf("addrs %v, want ports %v", got, ports)
	}
}

func TestDataDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	c, err := Start(DataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	id := c.ID()
	c.CreateTopic(t, "t", 1, nil)
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	mustProduce(t, cl, "t", 0, kv("k", "v", t0), kv("k", "w", t0))
	cl.Close()
	c.Close()
	c.Close() // idempotent

	c2 := New(t, DataDir(dir))
	if c2.ID() != id {
		t.Fatalf("restarted with id %q, was %q", c2.ID(), id)
	}
	if got := layout(readLog(t, c2.Client(t), "t", 0)); got != "dd" {
		t.Fatalf("log after restart %q, want dd", got)
	}
}

func TestWithACLs(t *testing.T) {
	c := New(t, WithACLs("admin", "s3cret"))
	c.CreateTopic(t, "t", 1, nil)
	ctx := testCtx(t)

	// ClientOpts authenticates (SCRAM-SHA-256) as the super user.
	cl := c.Client(t)
	mustProduce(t, cl, "t", 0, kv("k", "v", t0))
	if _, err := c.Admin(t).CreateACLs(ctx, kadm.NewACLs().Allow("User:reader").Topics("t").Operations(kadm.OpRead)); err != nil {
		t.Fatal(err)
	}

	// The comparator reads clusters that require SASL.
	other := New(t, WithACLs("admin", "s3cret"))
	other.CreateTopic(t, "t", 1, nil)
	mustProduce(t, other.Client(t), "t", 0, kv("k", "v", t0))
	WaitIdentical(t, c, other, "t", 5*time.Second)

	// PLAIN works for the same user.
	p := c.Client(t, kgo.SASL(plain.Auth{User: "admin", Pass: "s3cret"}.AsMechanism()))
	if got := partitionOffsets(t, p, "t", 0).hw; got != 1 {
		t.Fatalf("PLAIN client sees high watermark %d", got)
	}

	// Without credentials, or with wrong ones, nothing works.
	for name, opts := range map[string][]kgo.Opt{
		"no SASL":        {kgo.SeedBrokers(c.Addrs()...)},
		"wrong password": {kgo.SeedBrokers(c.Addrs()...), kgo.SASL(scram.Auth{User: "admin", Pass: "nope"}.AsSha256Mechanism())},
	} {
		bad, err := kgo.NewClient(append(opts, kgo.RetryTimeout(time.Second), kgo.DialTimeout(time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(pctx, bad)
		cancel()
		bad.Close()
		if err == nil {
			t.Errorf("%s: metadata succeeded", name)
		}
	}
}

func TestPairIDs(t *testing.T) {
	src, dst := Pair(t, Lenient())
	if src.ID() != "source-cluster" || dst.ID() != "destination-cluster" {
		t.Fatalf("ids %q, %q", src.ID(), dst.ID())
	}
	if clusterIDOf(t, src.Client(t)) != "source-cluster" || clusterIDOf(t, dst.Client(t)) != "destination-cluster" {
		t.Fatal("clusters report other ids")
	}
	if src.strict != nil || dst.strict != nil {
		t.Fatal("Lenient not applied to both")
	}
}

func TestPairDataDir(t *testing.T) {
	dir := t.TempDir()
	src, dst := Pair(t, DataDir(dir))
	src.CreateTopic(t, "t", 1, nil)
	dst.CreateTopic(t, "t", 1, nil)
	for _, sub := range []string{"source", "destination"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); err != nil {
			t.Errorf("%s: %v", sub, err)
		}
	}
}

func TestPairRefusesPorts(t *testing.T) {
	f := &fakeTB{TB: t}
	if src, dst := Pair(f, Ports(0)); src != nil || dst != nil || f.failed == "" {
		t.Fatalf("Pair with Ports: %v %v %q", src, dst, f.failed)
	}
}
