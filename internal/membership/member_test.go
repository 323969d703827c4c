package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// Short timings so the tests wait seconds; real brokers must allow the session timeout.
const (
	testSession   = 3 * time.Second
	testHeartbeat = 200 * time.Millisecond
	testLease     = 1500 * time.Millisecond
)

// onEveryTier runs f on a kfake destination and on each real Kafka version.
func onEveryTier(t *testing.T, f func(t *testing.T, dst *kafkatest.Cluster)) {
	t.Run("kfake", func(t *testing.T) {
		kafkatest.RequireFake(t)
		dst := kafkatest.New(t)
		// kafkatest's BrokerConfig is for real brokers; kfake takes the setting at run time.
		min := "500"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := dst.Admin(t).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "group.min.session.timeout.ms", Value: &min}}); err != nil {
			t.Fatal(err)
		}
		f(t, dst)
	})
	for _, v := range kafkatest.KafkaVersions() {
		t.Run("kafka-"+v, func(t *testing.T) {
			dst := kafkatest.Shared(t, "membership-"+v, kafkatest.Kafka(v),
				kafkatest.BrokerConfig("group.min.session.timeout.ms", "500"))
			kafkatest.Tally(t, dst.Broker())
			f(t, dst)
		})
	}
}

// span is one Run of a unit on one worker.
type span struct {
	worker     string
	start, end time.Time // end is zero while running
	cause      error
}

// ledger records every Run of every unit across the group's workers.
type ledger struct {
	mu    sync.Mutex
	spans map[Unit][]*span
}

func (l *ledger) run(worker string) func(ctx context.Context, u Unit) {
	return func(ctx context.Context, u Unit) {
		s := &span{worker: worker, start: time.Now()}
		l.mu.Lock()
		l.spans[u] = append(l.spans[u], s)
		l.mu.Unlock()
		<-ctx.Done()
		l.mu.Lock()
		s.end, s.cause = time.Now(), context.Cause(ctx)
		l.mu.Unlock()
	}
}

// since returns the runs of u that started after mark (a snapshot of the ledger's lengths).
func (l *ledger) since(u Unit, mark map[Unit]int) []span {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []span
	for _, s := range l.spans[u][mark[u]:] {
		out = append(out, *s)
	}
	return out
}

// mark snapshots how many runs each unit had, and the one running now, for since.
func (l *ledger) mark() map[Unit]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Unit]int{}
	for u, spans := range l.spans {
		out[u] = len(spans) - 1
	}
	return out
}

// running maps each unit to the workers running it now.
func (l *ledger) running() map[Unit][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[Unit][]string{}
	for u, spans := range l.spans {
		for _, s := range spans {
			if s.end.IsZero() {
				out[u] = append(out[u], s.worker)
			}
		}
	}
	return out
}

// overlaps lists every time two workers ran one unit at once: never two writers.
func (l *ledger) overlaps() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for u, spans := range l.spans {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				aEnd, bEnd := a.end, b.end
				if aEnd.IsZero() {
					aEnd = time.Now()
				}
				if bEnd.IsZero() {
					bEnd = time.Now()
				}
				if a.start.Before(bEnd) && b.start.Before(aEnd) {
					out = append(out, fmt.Sprintf("%v on %s and %s", u, a.worker, b.worker))
				}
			}
		}
	}
	return out
}

// settled waits until every unit runs on exactly one worker and returns who runs what.
func (l *ledger) settled(t *testing.T, units []Unit, within time.Duration) map[string][]Unit {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		running := l.running()
		byWorker := map[string][]Unit{}
		ok := len(running) == len(units)
		for _, u := range units {
			ws := running[u]
			if len(ws) != 1 {
				ok = false
				break
			}
			byWorker[ws[0]] = append(byWorker[ws[0]], u)
		}
		if ok {
			return byWorker
		}
		if time.Now().After(deadline) {
			t.Fatalf("units not settled on one worker each within %v: %d of %d running", within, len(running), len(units))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gate freezes a worker's connections, as SIGSTOP would (its timers still run; the ownership
// contexts' Err reads the clock for the real thing).
type gate struct {
	mu     sync.Mutex
	closed chan struct{} // nil while open
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = make(chan struct{})
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.closed)
	g.closed = nil
}

func (g *gate) wait() {
	g.mu.Lock()
	c := g.closed
	g.mu.Unlock()
	if c != nil {
		<-c
	}
}

type gatedConn struct {
	net.Conn
	g *gate
}

func (c gatedConn) Read(b []byte) (int, error) {
	c.g.wait()
	n, err := c.Conn.Read(b)
	c.g.wait()
	return n, err
}

func (c gatedConn) Write(b []byte) (int, error) {
	c.g.wait()
	return c.Conn.Write(b)
}

type worker struct {
	name string
	m    *Member
	gate *gate
}

func testUnits() []Unit {
	units := []Unit{Commands(), MirrorSync("m")}
	for _, topic := range []string{"orders", "payments", "audit"} {
		for i := range 100 {
			units = append(units, Partition("m", topic, int32(i)))
		}
	}
	return units
}

func startWorker(t *testing.T, dst *kafkatest.Cluster, group, name, fingerprint string, units func() []Unit, l *ledger) (*worker, error) {
	g := &gate{}
	var d net.Dialer
	cl := dst.Client(t, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return gatedConn{Conn: c, g: g}, nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Join(ctx, Config{Client: cl, Group: group, WorkerID: name, WorkerVersion: "test", APIAddress: name + ":8080",
		Fingerprint: fingerprint, Units: units, Run: l.run(name),
		SessionTimeout: testSession, HeartbeatInterval: testHeartbeat, Lease: testLease, RebalanceTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Leave(lctx)
	})
	return &worker{name: name, m: m, gate: g}, nil
}

func startGroup(t *testing.T, dst *kafkatest.Cluster, units func() []Unit, l *ledger, n int) (string, []*worker) {
	group := "kafkamirror-test-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	var ws []*worker
	for i := range n {
		w, err := startWorker(t, dst, group, fmt.Sprintf("w%d", i+1), "same", units, l)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return group, ws
}

func checkBalanced(t *testing.T, byWorker map[string][]Unit, workers int, units int) {
	t.Helper()
	lo, hi := units, 0
	for _, us := range byWorker {
		lo, hi = min(lo, len(us)), max(hi, len(us))
	}
	if len(byWorker) != workers || hi-lo > 1 {
		counts := map[string]int{}
		for w, us := range byWorker {
			counts[w] = len(us)
		}
		t.Fatalf("units per worker %v, want %d workers within one unit of each other", counts, workers)
	}
}

// threeSettled starts three workers on 302 units and waits until they are spread evenly:
// who runs what, and a mark of the ledger at that point.
func threeSettled(t *testing.T, dst *kafkatest.Cluster) ([]Unit, *ledger, []*worker, map[string][]Unit, map[Unit]int) {
	units := testUnits()
	l := &ledger{spans: map[Unit][]*span{}}
	_, ws := startGroup(t, dst, func() []Unit { return units }, l, 3)
	before := l.settled(t, units, time.Minute)
	checkBalanced(t, before, 3, len(units))
	return units, l, ws, before, l.mark()
}

// Three workers spread 302 units evenly; when one leaves, only its units move, each started
// by its new owner after the leaver stopped it, and the others never pause.
func TestGroupSpreadsAndMovesOnlyTheLeaversUnits(t *testing.T) {
	onEveryTier(t, func(t *testing.T, dst *kafkatest.Cluster) {
		units, l, ws, before, mark := threeSettled(t, dst)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ws[2].m.Leave(ctx); err != nil {
			t.Fatal(err)
		}
		after := l.settled(t, units, time.Minute)
		checkBalanced(t, after, 2, len(units))
		for _, w := range ws[:2] {
			for _, u := range before[w.name] {
				if spans := l.since(u, mark); len(spans) != 1 || !spans[0].end.IsZero() {
					t.Fatalf("%v of the staying %s was stopped: runs %+v", u, w.name, spans)
				}
			}
		}
		for _, u := range before["w3"] {
			spans := l.since(u, mark)
			if len(spans) != 2 || spans[0].worker != "w3" || !errors.Is(spans[0].cause, ErrLeft) {
				t.Fatalf("%v: runs %+v, want w3's ended by leaving, then one other", u, spans)
			}
		}
		if o := l.overlaps(); len(o) > 0 {
			t.Fatalf("two writers: %v", o)
		}
	})
}

// New units that every worker learns of cost one rebalance, not one per worker, and any
// worker reads from the coordinator which worker runs each unit.
func TestGroupRebalancesOnceForNewUnits(t *testing.T) {
	onEveryTier(t, func(t *testing.T, dst *kafkatest.Cluster) {
		var current atomic.Pointer[[]Unit]
		units := testUnits()[:102]
		current.Store(&units)
		l := &ledger{spans: map[Unit][]*span{}}
		_, ws := startGroup(t, dst, func() []Unit { return *current.Load() }, l, 3)
		checkBalanced(t, l.settled(t, units, time.Minute), 3, len(units))
		gen := ws[0].m.Generation()

		more := testUnits()
		current.Store(&more)
		for _, w := range ws {
			w.m.Rebalance()
		}
		byWorker := l.settled(t, more, time.Minute)
		checkBalanced(t, byWorker, 3, len(more))
		if got := ws[0].m.Generation(); got != gen+1 {
			t.Fatalf("generation %d after new units, want one rebalance after %d", got, gen)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		owners, err := ws[1].m.Owners(ctx, dst.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		for w, us := range byWorker {
			for _, u := range us {
				if owners[u] != w {
					t.Fatalf("the coordinator names %q as the owner of %v, which runs on %s", owners[u], u, w)
				}
			}
		}
	})
}

// A paused worker loses its lease and stops every unit before the coordinator gives them to
// the others; resumed, it rejoins and takes its share again, never overlapping anyone.
func TestGroupPausedWorkerStandsDownFirst(t *testing.T) {
	onEveryTier(t, func(t *testing.T, dst *kafkatest.Cluster) {
		units, l, ws, before, mark := threeSettled(t, dst)
		ws[2].gate.pause()
		kafkatest.WaitUntil(t, time.Minute, "w3's units running elsewhere", func() bool {
			running := l.running()
			return !slices.ContainsFunc(before["w3"], func(u Unit) bool { return len(running[u]) != 1 || running[u][0] == "w3" })
		})
		after := l.settled(t, units, time.Minute)
		checkBalanced(t, after, 2, len(units))
		for _, u := range before["w3"] {
			spans := l.since(u, mark)
			if len(spans) != 2 || !errors.Is(spans[0].cause, ErrLeaseExpired) {
				t.Fatalf("%v: runs %+v, want w3's ended by its lease, then one other", u, spans)
			}
			if gap := spans[1].start.Sub(spans[0].end); gap <= 0 {
				t.Fatalf("%v started on %s %v before w3 stopped it", u, spans[1].worker, -gap)
			}
		}
		ws[2].gate.resume()
		kafkatest.WaitUntil(t, time.Minute, "w3 back with a share", func() bool {
			return len(ws[2].m.Owned()) > 0 && len(l.running()) == len(units)
		})
		checkBalanced(t, l.settled(t, units, time.Minute), 3, len(units))
		if o := l.overlaps(); len(o) > 0 {
			t.Fatalf("two writers: %v", o)
		}
	})
}

// A worker configured differently from the serving group is refused with a clear error and
// takes no work.
func TestGroupRefusesAnIncompatibleWorker(t *testing.T) {
	onEveryTier(t, func(t *testing.T, dst *kafkatest.Cluster) {
		units := testUnits()[:10]
		l := &ledger{spans: map[Unit][]*span{}}
		group, _ := startGroup(t, dst, func() []Unit { return units }, l, 1)
		l.settled(t, units, time.Minute)
		_, err := startWorker(t, dst, group, "odd", "other", func() []Unit { return units }, l)
		var refused *IncompatibleError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "configuration fingerprint") ||
			!strings.Contains(err.Error(), "worker w1") {
			t.Fatalf("join of a differently configured worker: %v", err)
		}
		if running := l.running(); len(running) != len(units) || slices.ContainsFunc(units, func(u Unit) bool { return running[u][0] != "w1" }) {
			t.Fatalf("running %v", running)
		}
	})
}
