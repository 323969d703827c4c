package mirrorengine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/metadatasync"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

var fastRetry = partitionstate.RetryPolicy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond, MaxAttempts: 50}

// openEngine opens an engine mirroring into dst, closed when the test ends.
func openEngine(t *testing.T, dst *kafkatest.Cluster) *Engine {
	t.Helper()
	return openEngineRetrying(t, dst, fastRetry)
}

// openEngineRetrying is openEngine with the given retry policy for FAILED partitions.
func openEngineRetrying(t *testing.T, dst *kafkatest.Cluster, retry partitionstate.RetryPolicy) *Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sealer, err := mirrorstate.NewSealer("a test key of more than sixteen bytes")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(ctx, Config{
		Destination: dst.Client(t), Store: mirrorstate.StoreConfig{Sealer: sealer}, Retry: retry,
		SourceOpts: []kgo.Opt{kgo.RetryTimeout(5 * time.Second)},
	})
	if err != nil {
		t.Fatalf("opening the engine: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

func sourceOf(c *kafkatest.Cluster) mirrorstate.SourceConnection {
	return mirrorstate.SourceConnection{BootstrapServers: c.Addrs()}
}

func createMirror(t *testing.T, e *Engine, name string, src *kafkatest.Cluster) {
	t.Helper()
	if _, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: name, Source: sourceOf(src)}); err != nil {
		t.Fatalf("creating mirror %s: %v", name, err)
	}
}

// topicCmd runs a topic command for one topic and fails the test on any error.
func topicCmd(t *testing.T, cmd func(context.Context, string, []string) ([]TopicResult, error), mirror, topic string) {
	t.Helper()
	res, err := cmd(context.Background(), mirror, []string{topic})
	if err == nil && res[0].Err != nil {
		err = res[0].Err
	}
	if err != nil {
		t.Fatalf("command on %s/%s: %v", mirror, topic, err)
	}
}

func start(t *testing.T, e *Engine, mirror, topic, divergence string) {
	t.Helper()
	topicCmd(t, func(ctx context.Context, m string, ts []string) ([]TopicResult, error) {
		return e.StartMirrorTopics(ctx, m, ts, divergence)
	}, mirror, topic)
}

// waitState polls until every partition of the topic is in state, and returns the description.
func waitState(t *testing.T, e *Engine, mirror, topic string, partitions int, state partitionstate.State) TopicDescription {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var d TopicDescription
	var err error
	for time.Now().Before(deadline) {
		d, err = e.DescribeMirrorTopic(context.Background(), mirror, topic)
		if err == nil && len(d.Partitions) == partitions {
			all := true
			for _, p := range d.Partitions {
				all = all && p.State == state
			}
			if all {
				return d
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s/%s did not reach %s: %+v (%v)", mirror, topic, state, d, err)
	return d
}

func TestEngineMirrorPauseResumeStop(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "orders", 3, map[string]*string{"retention.ms": kadm.StringPtr("604800000")})
	prod := src.ManualProducer(t)
	for p := range int32(3) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("orders", p, 100, "first")...)
	}
	e := openEngine(t, dst)
	createMirror(t, e, "a-to-b", src)
	start(t, e, "a-to-b", "orders", "")

	// The destination topic is created like the source's and mirrored identically.
	waitState(t, e, "a-to-b", "orders", 3, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)

	// Pause: no fetcher runs, records produced now stay on the source.
	topicCmd(t, e.PauseMirrorTopics, "a-to-b", "orders")
	d := waitState(t, e, "a-to-b", "orders", 3, partitionstate.StatePaused)
	if d.MirrorName != "a-to-b.paused" {
		t.Fatalf("mirror.name %q while paused", d.MirrorName)
	}
	before := dst.EndOffsets(t, "orders")
	kafkatest.ProduceSync(t, prod, kafkatest.Records("orders", 1, 50, "paused")...)
	for _, r := range e.topicRunners("a-to-b", "orders") {
		if _, fetching := r.progress(); fetching {
			t.Fatalf("partition %d still fetching while paused", r.key.partition)
		}
	}
	if after := dst.EndOffsets(t, "orders"); after[1] != before[1] {
		t.Fatalf("destination moved from %d to %d while paused", before[1], after[1])
	}

	topicCmd(t, e.ResumeMirrorTopics, "a-to-b", "orders")
	waitState(t, e, "a-to-b", "orders", 3, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)

	// A source transaction still open at failover is aborted on the destination.
	txn := src.ManualProducer(t, kgo.TransactionalID("open-at-failover"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, txn, kafkatest.Records("orders", 2, 5, "open")...)
	kafkatest.WaitIdentical(t, src, dst, "orders", kafkatest.IdenticalWithin)

	topicCmd(t, e.StopMirrorTopics, "a-to-b", "orders")
	d = waitState(t, e, "a-to-b", "orders", 3, partitionstate.StateStopped)
	ends := dst.EndOffsets(t, "orders")
	lso, err := dst.Admin(t).ListCommittedOffsets(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	srcTopics, err := src.Admin(t).ListTopics(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Partitions {
		if p.LastMirroredOffset != ends[p.Partition] {
			t.Fatalf("partition %d: last mirrored offset %d, destination end %d", p.Partition, p.LastMirroredOffset, ends[p.Partition])
		}
		// Every partition copied data in the source leader's one epoch: the next start
		// checks the source's lineage from it (a truncated source fails, KIP-320).
		if want := srcTopics["orders"].Partitions[p.Partition].LeaderEpoch; p.LastMirroredEpoch != want {
			t.Fatalf("partition %d: last mirrored epoch %d, the source leader epoch is %d", p.Partition, p.LastMirroredEpoch, want)
		}
		if o, _ := lso.Lookup("orders", p.Partition); o.Offset != ends[p.Partition] {
			t.Fatalf("partition %d: last stable offset %d behind the end %d: the open transaction was not aborted", p.Partition, o.Offset, ends[p.Partition])
		}
	}
	// Failed over: the destination takes writes, and the mirror can be deleted.
	kafkatest.ProduceSync(t, dst.ManualProducer(t), &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("written after failover")})
	if err := e.DeleteClusterMirror(context.Background(), "a-to-b"); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// Mirrored topics are read-only on the destination while they are mirrored: the partitions
// of two topics started by one command share CREATE ACL rounds, and each topic gets its own
// ACL, lifted when that topic stops.
func TestEngineReadOnlyDestinationWithACLs(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("app", "app-secret"))
	topics := map[string]int{"payments": 3, "refunds": 2}
	for topic, partitions := range topics {
		src.CreateTopic(t, topic, int32(partitions), nil)
		for p := range int32(partitions) {
			kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records(topic, p, 20, "p")...)
		}
	}
	e := openEngine(t, dst)
	if _, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "a-to-b", Source: mirrorstate.SourceConnection{
		BootstrapServers: src.Addrs(), SASL: &mirrorstate.SASLSettings{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: "admin-secret"},
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := e.StartMirrorTopics(context.Background(), "a-to-b", []string{"payments", "refunds"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("start %s: %v", r.Topic, r.Err)
		}
	}
	for topic, partitions := range topics {
		waitState(t, e, "a-to-b", topic, partitions, partitionstate.StateMirroring)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	}

	// The application may write the topics by its own ACLs, yet not while they are mirrored.
	acl := kadm.NewACLs().Allow("User:app").AllowHosts("*").Topics("payments", "refunds").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite, kadm.OpDescribe)
	dst.CreateACLs(t, acl)
	appWrite := func(topic string) error { return dst.ProduceAs(t, "app", "app-secret", topic, []byte("app")) }
	for topic := range topics {
		if err := appWrite(topic); err == nil {
			t.Fatalf("the application wrote to mirrored topic %s", topic)
		}
	}
	// The topic stays read-only until its last partition stopped: one still copying would
	// fail at a foreign write.
	release := make(chan struct{})
	testHookAction = func(k partitionKey, a partitionstate.Action) {
		if k.topic == "payments" && k.partition == 2 && a.Kind == partitionstate.ActionStop {
			<-release
		}
	}
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }); testHookAction = nil })
	// The failover waits (a bounded while) for every partition to be STOPPED.
	failedOver := make(chan error, 1)
	go func() {
		_, err := e.StopMirrorTopics(context.Background(), "a-to-b", []string{"payments"})
		failedOver <- err
	}()
	kafkatest.WaitUntil(t, 60*time.Second, "partitions 0 and 1 of payments STOPPED", func() bool {
		d, err := e.DescribeMirrorTopic(context.Background(), "a-to-b", "payments")
		stopped := 0
		for _, p := range d.Partitions {
			if p.Partition < 2 && p.State == partitionstate.StateStopped {
				stopped++
			}
		}
		return err == nil && stopped == 2
	})
	if err := appWrite("payments"); err == nil {
		t.Fatal("the application wrote to payments while its partition 2 was still mirrored")
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-failedOver; err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "a-to-b", "payments", topics["payments"], partitionstate.StateStopped)
	if err := appWrite("payments"); err != nil {
		t.Fatalf("the application cannot write after failover: %v", err)
	}
	if err := appWrite("refunds"); err == nil {
		t.Fatal("the application wrote to refunds, still mirrored, after payments failed over")
	}
}

// A worker that crashed after a topic's last partitions recorded STOPPED but before one of
// them lifted the read-only ACL left the failed-over topic read-only; the next worker to run
// its partitions makes it writable.
func TestEngineLiftsReadOnlyOfStoppedTopicOnResume(t *testing.T) {
	dst, appWrite := crashedBeforeTheLift(t)
	openEngine(t, dst)
	kafkatest.WaitUntil(t, 30*time.Second, "the failed-over topic writable again", func() bool { return appWrite() == nil })
}

// crashedBeforeTheLift mirrors topic "orders" (2 partitions) by mirror "a-to-b" into a
// destination with ACLs, fails it over and leaves what a worker that crashed before lifting
// the read-only ACL leaves: every partition STOPPED, the ACL still there, no engine. It
// returns the destination and a write as an application allowed to write the topic.
func crashedBeforeTheLift(t *testing.T) (*kafkatest.Cluster, func() error) {
	t.Helper()
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("app", "app-secret"))
	src.CreateTopic(t, "orders", 2, nil)
	e := openEngine(t, dst)
	if _, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "a-to-b", Source: mirrorstate.SourceConnection{
		BootstrapServers: src.Addrs(), SASL: &mirrorstate.SASLSettings{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: "admin-secret"},
	}}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "a-to-b", "orders", "")
	waitState(t, e, "a-to-b", "orders", 2, partitionstate.StateMirroring)
	dst.CreateACLs(t, kadm.NewACLs().Allow("User:app").AllowHosts("*").Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite, kadm.OpDescribe))
	appWrite := func() error { return dst.ProduceAs(t, "app", "app-secret", "orders", []byte("app")) }
	topicCmd(t, e.StopMirrorTopics, "a-to-b", "orders")
	waitState(t, e, "a-to-b", "orders", 2, partitionstate.StateStopped)
	if err := appWrite(); err != nil {
		t.Fatalf("the application cannot write after failover: %v", err)
	}
	e.Close()
	dst.CreateACLs(t, readOnlyACL("orders"))
	if err := appWrite(); err == nil {
		t.Fatal("the application wrote through the read-only ACL")
	}
	return dst, appWrite
}

// A→B mirrored, failed over to B, B written; mirroring B→A on A copies only B's new
// records. A divergent A (written after the failover) fails with the record count under
// "fail" and is recreated identical to B under "recreate".
func TestEngineFailback(t *testing.T) {
	a, b := kafkatest.Pair(t)
	a.CreateTopic(t, "ledger", 2, nil)
	for p := range int32(2) {
		kafkatest.ProduceSync(t, a.ManualProducer(t), kafkatest.Records("ledger", p, 200, "from-a")...)
	}
	onB := openEngine(t, b)
	createMirror(t, onB, "a-to-b", a)
	start(t, onB, "a-to-b", "ledger", "")
	waitState(t, onB, "a-to-b", "ledger", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, a, b, "ledger", kafkatest.IdenticalWithin)
	idBefore := topicID(t, a, "ledger")

	// Mirroring back is refused while B still mirrors the topic from A.
	onA := openEngine(t, a)
	createMirror(t, onA, "b-to-a", b)
	start(t, onA, "b-to-a", "ledger", "")
	refused := waitState(t, onA, "b-to-a", "ledger", 2, partitionstate.StateFailed).Partitions[0]
	if !strings.Contains(refused.Error, "still mirrors") || refused.RetryAttempt < 1 {
		t.Fatalf("failback while B still mirrors from A: %+v", refused)
	}

	topicCmd(t, onB.StopMirrorTopics, "a-to-b", "ledger")
	waitState(t, onB, "a-to-b", "ledger", 2, partitionstate.StateStopped)
	// Applications move to B and write there; the retried failback then copies them.
	for p := range int32(2) {
		kafkatest.ProduceSync(t, b.ManualProducer(t), kafkatest.Records("ledger", p, 30, "from-b")...)
	}
	waitState(t, onA, "b-to-a", "ledger", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, b, a, "ledger", kafkatest.IdenticalWithin)
	if topicID(t, a, "ledger") != idBefore {
		t.Fatal("failback recreated A's topic instead of copying only the new records")
	}

	// Fail over to A again, and have both sides written: B diverged from A.
	topicCmd(t, onA.StopMirrorTopics, "b-to-a", "ledger")
	waitState(t, onA, "b-to-a", "ledger", 2, partitionstate.StateStopped)
	for p := range int32(2) {
		kafkatest.ProduceSync(t, a.ManualProducer(t), kafkatest.Records("ledger", p, 10, "a-again")...)
		kafkatest.ProduceSync(t, b.ManualProducer(t), kafkatest.Records("ledger", p, 7, "b-diverged")...)
	}

	start(t, onB, "a-to-b", "ledger", "fail")
	d := waitState(t, onB, "a-to-b", "ledger", 2, partitionstate.StateFailed)
	if !strings.Contains(d.Partitions[0].Error, "7 records") || d.Partitions[0].RetryAttempt != -1 {
		t.Fatalf("divergence under \"fail\": %+v", d.Partitions[0])
	}
	start(t, onB, "a-to-b", "ledger", "recreate")
	waitState(t, onB, "a-to-b", "ledger", 2, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, a, b, "ledger", kafkatest.IdenticalWithin)
}

func topicID(t *testing.T, c *kafkatest.Cluster, topic string) [16]byte {
	t.Helper()
	meta, err := kafkareq.NewCluster("test", c.Client(t)).Metadata(context.Background(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return meta.ID
}

// The engine process dies in the middle of PREPARING or STOPPING; a new engine on the same
// __mirror_state finishes the work.
func TestEngineResumesInterruptedWork(t *testing.T) {
	for _, at := range []partitionstate.ActionKind{partitionstate.ActionPrepare, partitionstate.ActionStop} {
		t.Run(at.String(), func(t *testing.T) {
			src, dst := kafkatest.Pair(t)
			src.CreateTopic(t, "t", 2, nil)
			kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("t", 0, 50, "x")...)
			e := openEngine(t, dst)
			createMirror(t, e, "m", src)

			var once sync.Once
			crashed := make(chan struct{})
			testHookAction = func(_ partitionKey, a partitionstate.Action) {
				if a.Kind == at {
					once.Do(func() { e.cancel(); close(crashed) })
				}
			}
			t.Cleanup(func() { testHookAction = nil })

			start(t, e, "m", "t", "")
			if at == partitionstate.ActionStop {
				waitState(t, e, "m", "t", 2, partitionstate.StateMirroring)
				topicCmd(t, e.StopMirrorTopics, "m", "t")
			}
			<-crashed
			e.Close()
			testHookAction = nil
			want := partitionstate.StateMirroring
			if at == partitionstate.ActionStop {
				want = partitionstate.StateStopped
			} else if rec, _ := e.store.Partition("m", "t", 0); rec.Status.State != partitionstate.StatePreparing {
				t.Fatalf("the crash left state %s, want PREPARING recorded", rec.Status.State)
			}

			again := openEngine(t, dst)
			waitState(t, again, "m", "t", 2, want)
			if want == partitionstate.StateMirroring {
				kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
			}
		})
	}
}

func TestEngineSourceClusterIDChanged(t *testing.T) {
	port := kafkatest.FreePort(t)
	src := kafkatest.New(t, kafkatest.ClusterID("source-one"), kafkatest.Ports(port))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination"))
	src.CreateTopic(t, "t", 1, nil)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("t", 0, 10, "x")...)
	e := openEngine(t, dst)
	if _, err := e.CreateClusterMirror(context.Background(), mirrorstate.MirrorRecord{Name: "m", Source: sourceOf(src), Sync: mirrorstate.SyncSettings{Interval: 50 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	start(t, e, "m", "t", "")
	waitState(t, e, "m", "t", 1, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)

	// Another cluster now answers at the source's address.
	src.Close()
	other := kafkatest.New(t, kafkatest.ClusterID("source-two"), kafkatest.Ports(port))
	other.CreateTopic(t, "t", 1, nil)
	kafkatest.ProduceSync(t, other.ManualProducer(t), kafkatest.Records("t", 0, 20, "y")...)

	d := waitState(t, e, "m", "t", 1, partitionstate.StateFailed)
	p := d.Partitions[0]
	if p.RetryAttempt != -1 || !strings.Contains(p.Error, "source-one") || !strings.Contains(p.Error, "source-two") {
		t.Fatalf("after the source cluster changed: %+v", p)
	}
	// The metadata sync halts with the same finding.
	eventually(t, "sync reports the changed cluster id", func() error {
		st, err := e.SyncStatus("m")
		if msg := st.Errors[metadatasync.ErrorTopicMetadata]; err != nil || !strings.Contains(msg, "source-two") || !strings.Contains(msg, kip.CodeSourceClusterIDMismatch) {
			return fmt.Errorf("sync status %+v %v", st, err)
		}
		return nil
	})
}

func TestEngineSourceTopicRecreated(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "t", 1, nil)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("t", 0, 10, "x")...)
	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "t", "")
	waitState(t, e, "m", "t", 1, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)

	if _, err := src.Admin(t).DeleteTopic(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	src.CreateTopic(t, "t", 1, nil)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("t", 0, 3, "new")...)

	p := waitState(t, e, "m", "t", 1, partitionstate.StateFailed).Partitions[0]
	if p.RetryAttempt != -1 || !(strings.Contains(p.Error, "recreated") || strings.Contains(p.Error, "deleted") || strings.Contains(p.Error, "topic id")) {
		t.Fatalf("after the source topic was recreated: %+v", p)
	}
}

func TestEngineCommandErrors(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "t", 1, nil)
	src.CreateTopic(t, "u", 1, nil)
	e := openEngine(t, dst)
	ctx := context.Background()
	code := func(err error) string {
		var ce *CommandError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			return string("not a CommandError: " + err.Error())
		}
		return ""
	}
	create := func(name string, conn mirrorstate.SourceConnection, id string) string {
		_, err := e.CreateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: name, Source: conn, SourceClusterID: id})
		return code(err)
	}
	for _, tc := range []struct {
		what string
		got  string
		want string
	}{
		{"invalid name", create("bad/name", sourceOf(src), ""), kip.CodeInvalidClusterMirrorName},
		{"reserved suffix", create("m.paused", sourceOf(src), ""), kip.CodeInvalidClusterMirrorName},
		{"no bootstrap", create("m", mirrorstate.SourceConnection{}, ""), kip.CodeInvalidClusterMirrorConfig},
		{"bad mechanism", create("m", mirrorstate.SourceConnection{BootstrapServers: src.Addrs(), SASL: &mirrorstate.SASLSettings{Mechanism: "GSSAPI", Username: "u"}}, ""), kip.CodeInvalidClusterMirrorConfig},
		{"unreachable", create("m", mirrorstate.SourceConnection{BootstrapServers: []string{fmt.Sprintf("127.0.0.1:%d", kafkatest.FreePort(t))}}, ""), kip.CodeSourceClusterUnreachable},
		{"wrong cluster id", create("m", sourceOf(src), "someone-else"), kip.CodeSourceClusterIDMismatch},
		{"itself", create("m", sourceOf(dst), ""), kip.CodeInvalidClusterMirrorConfig},
		{"created", create("m", sourceOf(src), "source-cluster"), ""},
		{"again, as a retry would", create("m", sourceOf(src), ""), ""},
		{"again, the expected cluster id", create("m", sourceOf(src), "source-cluster"), ""},
		{"again, another source", create("m", mirrorstate.SourceConnection{BootstrapServers: append(src.Addrs(), src.Addrs()[0])}, ""), kip.CodeClusterMirrorAlreadyExists},
	} {
		if tc.got != tc.want {
			t.Errorf("create, %s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	createMirror(t, e, "other", src)
	update := func(name string, conn mirrorstate.SourceConnection) string {
		_, err := e.UpdateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: name, Source: conn})
		return code(err)
	}
	for _, tc := range []struct {
		what      string
		got, want string
	}{
		{"update unknown", update("nope", sourceOf(src)), kip.CodeUnknownClusterMirror},
		{"update to another cluster", update("other", sourceOf(dst)), kip.CodeSourceClusterIDMismatch},
		{"update same cluster", update("other", sourceOf(src)), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}

	topicCode := func(res []TopicResult, err error) string {
		if err != nil {
			return code(err)
		}
		if res[0].Err != nil {
			return res[0].Err.Code
		}
		return ""
	}
	start := func(mirror, topic, divergence string) string {
		return topicCode(e.StartMirrorTopics(ctx, mirror, []string{topic}, divergence))
	}
	for _, tc := range []struct {
		what      string
		got, want string
	}{
		{"unknown mirror", start("nope", "t", ""), kip.CodeUnknownClusterMirror},
		{"unknown topic", start("m", "missing", ""), kip.CodeUnknownTopicOrPartition},
		{"invalid topic", start("m", "bad topic", ""), kip.CodeInvalidTopic},
		{"bad divergence", start("m", "t", "sometimes"), kip.CodeInvalidRequest},
		{"started", start("m", "t", ""), ""},
		{"twice, as a retry would", start("m", "t", "fail"), ""},
		{"twice, another divergence", start("m", "t", "recreate"), kip.CodeTopicAlreadyInClusterMirror},
		{"in another mirror", start("other", "t", ""), kip.CodeTopicAlreadyInClusterMirror},
		{"stop not in mirror", topicCode(e.StopMirrorTopics(ctx, "m", []string{"u"})), kip.CodeTopicNotInClusterMirror},
		{"pause unknown mirror", topicCode(e.PauseMirrorTopics(ctx, "nope", []string{"t"})), kip.CodeUnknownClusterMirror},
		{"delete unknown", code(e.DeleteClusterMirror(ctx, "nope")), kip.CodeUnknownClusterMirror},
		{"delete while mirroring", code(e.DeleteClusterMirror(ctx, "m")), kip.CodeClusterMirrorNotEmpty},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	if err := e.DeleteClusterMirror(ctx, "m"); err == nil || !strings.Contains(err.Error(), "t") {
		t.Errorf("delete refusal does not name the mirrored topic: %v", err)
	}
	topicCmd(t, e.StopMirrorTopics, "m", "t")
	waitState(t, e, "m", "t", 1, partitionstate.StateStopped)
	for _, tc := range []struct {
		what      string
		got, want string
	}{
		{"stop stopped", topicCode(e.StopMirrorTopics(ctx, "m", []string{"t"})), kip.CodeMirrorTopicAlreadyStopped},
		{"pause stopped", topicCode(e.PauseMirrorTopics(ctx, "m", []string{"t"})), kip.CodeInvalidMirrorPartitionState},
		{"resume stopped", topicCode(e.ResumeMirrorTopics(ctx, "m", []string{"t"})), kip.CodeInvalidMirrorPartitionState},
		{"delete when stopped", code(e.DeleteClusterMirror(ctx, "m")), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, tc.got, tc.want)
		}
	}
}

// A fresh engine on the same __mirror_state reports the same states.
func TestEngineReopenReportsSameStates(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	for _, topic := range []string{"running", "resting", "done"} {
		src.CreateTopic(t, topic, 2, nil)
		kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records(topic, 1, 10, topic)...)
	}
	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	for _, topic := range []string{"running", "resting", "done"} {
		start(t, e, "m", topic, "")
		waitState(t, e, "m", topic, 2, partitionstate.StateMirroring)
	}
	topicCmd(t, e.PauseMirrorTopics, "m", "resting")
	topicCmd(t, e.StopMirrorTopics, "m", "done")
	want := map[string]partitionstate.State{"running": partitionstate.StateMirroring, "resting": partitionstate.StatePaused, "done": partitionstate.StateStopped}
	for topic, s := range want {
		waitState(t, e, "m", topic, 2, s)
	}
	e.Close()

	again := openEngine(t, dst)
	for topic, s := range want {
		waitState(t, again, "m", topic, 2, s)
	}
	if got := again.ListClusterMirrors(); len(got) != 1 || got[0].SourceClusterID != "source-cluster" || len(got[0].Topics) != 3 {
		t.Fatalf("reopened mirrors: %+v", got)
	}
	kafkatest.WaitIdentical(t, src, dst, "running", kafkatest.IdenticalWithin)
}

// The engine is closed and reopened again and again while applications keep producing;
// the destination ends identical.
func TestEngineRestartsUnderContinuousProduction(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "busy", 3, nil)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	prod := src.Client(t, kgo.ProducerLinger(time.Millisecond))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			prod.Produce(ctx, &kgo.Record{Topic: "busy", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint("v", i))}, nil)
			if i%50 == 0 {
				_ = prod.Flush(ctx)
			}
		}
	}()
	e := openEngine(t, dst)
	createMirror(t, e, "m", src)
	start(t, e, "m", "busy", "")
	waitState(t, e, "m", "busy", 3, partitionstate.StateMirroring)
	for range 8 {
		eventually(t, "some mirroring progress", func() error {
			if ends := dst.EndOffsets(t, "busy"); ends[0]+ends[1]+ends[2] == 0 {
				return fmt.Errorf("nothing mirrored yet")
			}
			return nil
		})
		e.Close()
		e = openEngine(t, dst)
	}
	stop()
	wg.Wait()
	if err := prod.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "m", "busy", 3, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, src, dst, "busy", kafkatest.IdenticalWithin)
}

func TestEngineMirrorSecretsAndSyncOnlyUpdate(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"))
	ctx := context.Background()
	withSASL := mirrorstate.MirrorRecord{Name: "m", Source: mirrorstate.SourceConnection{
		BootstrapServers: src.Addrs(), SASL: &mirrorstate.SASLSettings{Mechanism: "SCRAM-SHA-256", Username: "admin", Password: "admin-secret"},
	}}

	// Without a secret key, a credential cannot be stored: the caller's configuration error.
	keyless, err := Open(ctx, Config{Destination: dst.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = keyless.CreateClusterMirror(ctx, withSASL)
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Code != kip.CodeInvalidClusterMirrorConfig || !strings.Contains(ce.Message, "KAFKAMIRROR_SECRET_KEY") {
		t.Fatalf("secret without a key: %v", err)
	}
	keyless.Close()

	e := openEngine(t, dst)
	if _, err := e.CreateClusterMirror(ctx, withSASL); err != nil {
		t.Fatal(err)
	}
	// A sync-only update keeps the stored connection, password included.
	if _, err := e.UpdateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: "m", Sync: mirrorstate.SyncSettings{Interval: time.Minute, ACLs: true}}); err != nil {
		t.Fatal(err)
	}
	got, _ := e.store.Mirror("m")
	if got.Source.SASL == nil || got.Source.SASL.Password != "admin-secret" || !got.Sync.ACLs || got.Sync.Interval != time.Minute {
		t.Fatalf("after a sync-only update: source %+v sync %+v", got.Source, got.Sync)
	}
}

// A pause waits for the replayed transactions open on the destination to reach their source
// markers, so a paused partition holds no transaction the destination's coordinator would
// abort at an offset the source uses otherwise.
func TestEnginePauseClosesReplayedTransactions(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "payments", 1, nil)
	e := openEngine(t, dst)
	createMirror(t, e, "a-to-b", src)
	start(t, e, "a-to-b", "payments", "")
	waitState(t, e, "a-to-b", "payments", 1, partitionstate.StateMirroring)

	txn := src.ManualProducer(t, kgo.TransactionalID("open-at-pause"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, txn, kafkatest.Records("payments", 0, 5, "open")...)
	kafkatest.WaitIdentical(t, src, dst, "payments", kafkatest.IdenticalWithin)

	ctx := context.Background()
	topicCmd(t, e.PauseMirrorTopics, "a-to-b", "payments")
	// The source transaction ends while the partition is PAUSING.
	kafkatest.WaitUntil(t, 30*time.Second, "the partition to be PAUSING", func() bool {
		d, err := e.DescribeMirrorTopic(ctx, "a-to-b", "payments")
		return err == nil && len(d.Partitions) == 1 && d.Partitions[0].State == partitionstate.StatePausing
	})
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, "a-to-b", "payments", 1, partitionstate.StatePaused)
	kafkatest.WaitIdentical(t, src, dst, "payments", kafkatest.IdenticalWithin)
	lso, err := dst.Admin(t).ListCommittedOffsets(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lso.Lookup("payments", 0); o.Offset != dst.EndOffsets(t, "payments")[0] {
		t.Fatalf("paused with a replayed transaction open: last stable offset %d, end %d", o.Offset, dst.EndOffsets(t, "payments")[0])
	}
}

// A topic started again while the lift of its read-only ACL is under way ends up read-only:
// here the restart records its partitions and makes the topic read-only between the lift's
// look at the states and its DELETE ACL. (The lift paused here is the one a resuming worker makes for a
// topic left read-only by a crash, as in the test above.)
func TestEngineRestartDuringTheLiftKeepsTheTopicReadOnly(t *testing.T) {
	dst, appWrite := crashedBeforeTheLift(t)
	atLift, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	testHookBeforeLift = func(string) { once.Do(func() { close(atLift); <-resume }) }
	t.Cleanup(func() { testHookBeforeLift = nil })
	e := openEngine(t, dst)
	select {
	case <-atLift:
	case <-time.After(30 * time.Second):
		t.Fatal("the resuming worker did not look at the stopped topic")
	}
	start(t, e, "a-to-b", "orders", "recreate") // the application wrote after the failover
	waitState(t, e, "a-to-b", "orders", 2, partitionstate.StateMirroring)
	if err := appWrite(); err == nil {
		t.Fatal("the application wrote to the restarted topic")
	}
	close(resume)
	kafkatest.WaitUntil(t, 30*time.Second, "the lift to end", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return !e.stoppedLooks[partitionKey{"a-to-b", "orders", 0}]
	})
	if err := appWrite(); err == nil {
		t.Fatal("the application wrote to the mirrored topic after the lift that the restart raced")
	}
}
