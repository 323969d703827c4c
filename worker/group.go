package main

// The worker's membership in the group of the workers that share a destination
// (internal/membership): which partitions and metadata syncs this worker runs, and whether
// it applies commands.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/membership"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
)

// group connects the engine to the membership: the engine asks for a rebalance when its
// units change, the membership runs the units this worker owns.
type group struct {
	log  *slog.Logger
	self string // this worker's advertised API URL
	name string // the group's name
	// commandWait bounds how long a command waits for the group to have a commands owner.
	commandWait time.Duration
	member      atomic.Pointer[membership.Member]
	dst         *kgo.Client // the engine's destination client, for status requests
	eng         atomic.Pointer[mirrorengine.Engine]

	// Commands are applied only while this worker owns the commands unit; cmds counts the
	// ones running, so that the unit is given up only once they are done.
	cmdMu    sync.Mutex
	cmdOwned bool
	cmds     sync.WaitGroup

	stoodDown prometheus.Counter
	unowned   *prometheus.HistogramVec
}

func newGroup(log *slog.Logger, commandWait time.Duration) *group {
	return &group{log: log, commandWait: commandWait, stoodDown: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafkamirror_group_stood_down_total",
		Help: "Units this worker stopped because it could no longer prove it owned them (lease expired, fenced): the group may have moved them.",
	}), unowned: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "kafkamirror_group_unowned_seconds",
		Help: "For each unit this worker started, how long it had no owner: from the start of the rebalance that moved it here " +
			"(for a unit whose owner died, after the coordinator noticed, at most the session timeout later) to its start.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms to 80 s
	}, []string{"kind"})}
}

var (
	groupOwnedDesc = prometheus.NewDesc("kafkamirror_group_owned_units",
		"Units of work this worker owns, by kind: partition, mirror-sync, commands.", []string{"kind"}, nil)
	groupMembersDesc    = prometheus.NewDesc("kafkamirror_group_members", "Workers in the group, as of this worker's last assignment.", nil, nil)
	groupGenerationDesc = prometheus.NewDesc("kafkamirror_group_generation",
		"Generation of the group's assignment this worker holds; it grows by one per rebalance.", nil, nil)
)

// Describe implements prometheus.Collector.
func (g *group) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupOwnedDesc
	ch <- groupMembersDesc
	ch <- groupGenerationDesc
	g.stoodDown.Describe(ch)
	g.unowned.Describe(ch)
}

// Collect implements prometheus.Collector; before the first assignment only the counter.
func (g *group) Collect(ch chan<- prometheus.Metric) {
	g.stoodDown.Collect(ch)
	g.unowned.Collect(ch)
	m := g.member.Load()
	if m == nil {
		return
	}
	owned := map[membership.Kind]int{}
	for _, u := range m.Owned() {
		owned[u.Kind]++
	}
	for _, k := range []membership.Kind{membership.KindPartition, membership.KindMirrorSync, membership.KindCommands} {
		ch <- prometheus.MustNewConstMetric(groupOwnedDesc, prometheus.GaugeValue, float64(owned[k]), k.String())
	}
	ch <- prometheus.MustNewConstMetric(groupMembersDesc, prometheus.GaugeValue, float64(len(m.Members())))
	ch <- prometheus.MustNewConstMetric(groupGenerationDesc, prometheus.GaugeValue, float64(m.Generation()))
}

// UnitsChanged implements mirrorengine.Placement.
func (g *group) UnitsChanged() {
	if m := g.member.Load(); m != nil {
		m.Rebalance()
	}
}

// units is the work of the group: every mirrored partition, every mirror's metadata sync
// and the commands.
func (g *group) units() []membership.Unit {
	out := []membership.Unit{membership.Commands()}
	e := g.eng.Load()
	if e == nil {
		return out
	}
	partitions, mirrors := e.Units()
	for _, m := range mirrors {
		out = append(out, membership.MirrorSync(m))
	}
	for _, p := range partitions {
		out = append(out, membership.Partition(p.Mirror, p.Topic, p.Partition))
	}
	return out
}

// run runs one owned unit until its ownership ends; it returns once nothing of it writes.
func (g *group) run(ctx context.Context, u membership.Unit) {
	e := g.eng.Load()
	switch u.Kind {
	case membership.KindPartition:
		e.RunPartition(ctx, mirrorengine.PartitionID{Mirror: u.Mirror, Topic: u.Topic, Partition: u.Partition})
	case membership.KindMirrorSync:
		e.RunMirrorSync(ctx, u.Mirror)
	case membership.KindCommands:
		g.cmdMu.Lock()
		g.cmdOwned = true
		g.cmdMu.Unlock()
		g.log.Info("this worker applies the commands now")
		<-ctx.Done()
		g.cmdMu.Lock()
		g.cmdOwned = false
		g.cmdMu.Unlock()
		g.cmds.Wait()
		g.log.Info("this worker no longer applies the commands", "reason", context.Cause(ctx))
	}
	if err := context.Cause(ctx); errors.Is(err, membership.ErrLeaseExpired) || errors.Is(err, membership.ErrFenced) {
		// The zombie case: the group may have given the unit to another worker already.
		g.stoodDown.Inc()
		g.log.Warn("stood down: ownership could not be proven any more", "unit", u.String(), "reason", err)
	}
}

// beginCommand waits until this worker may apply a command (done must be called once it is
// applied), or until another worker is known to apply them (forwardTo is its URL), within
// the wait: after a rebalance the new owner may first wait out its predecessor's lease.
func (g *group) beginCommand(ctx context.Context, forwarded bool) (done func(), forwardTo string, err error) {
	wait := time.NewTimer(g.commandWait)
	defer wait.Stop()
	for {
		g.cmdMu.Lock()
		if g.cmdOwned {
			g.cmds.Add(1)
			g.cmdMu.Unlock()
			return g.cmds.Done, "", nil
		}
		g.cmdMu.Unlock()
		if owner := g.commandsOwner(); owner != "" && owner != g.self && !forwarded {
			return nil, owner, nil
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-wait.C:
			return nil, "", errors.New("no worker of the group applies commands at this moment (a rebalance is under way); retry")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// commandsOwner is the API URL of the worker that applies commands, "" when none does
// (a rebalance is under way).
func (g *group) commandsOwner() string {
	m := g.member.Load()
	if m == nil {
		return ""
	}
	for _, info := range m.Members() {
		if info.Holds(membership.Commands()) {
			return info.APIAddress
		}
	}
	return ""
}

// join joins the group once the engine is open; it returns the member, or why the group
// refused this worker.
func (g *group) join(ctx context.Context, cfg GroupConfig, cl *kgo.Client, e *mirrorengine.Engine, apiURL, stateTopic string) (*membership.Member, error) {
	g.eng.Store(e)
	m, err := membership.Join(ctx, membership.Config{
		Client: cl, Group: cfg.Name, WorkerID: cfg.WorkerID, WorkerVersion: workerVersion(), APIAddress: apiURL,
		// Workers of one group must share the store they follow.
		Fingerprint: "state.topic=" + stateTopic,
		Units:       g.units, Run: g.run,
		Started: func(u membership.Unit, unowned time.Duration) {
			g.unowned.WithLabelValues(u.Kind.String()).Observe(unowned.Seconds())
		},
		SessionTimeout: cfg.SessionTimeout, HeartbeatInterval: cfg.HeartbeatInterval,
		Logger: g.log,
	})
	if err != nil {
		return nil, err
	}
	g.name = cfg.Name
	g.member.Store(m)
	m.Rebalance() // the engine's units may have changed while joining
	return m, nil
}

// owners starts reading from the group coordinator which worker runs each unit, beside the
// caller's other requests; the returned function waits for the answer, nil when there is
// none within ownersTimeout.
func (g *group) owners(ctx context.Context) func() map[membership.Unit]string {
	m := g.member.Load()
	if m == nil {
		return func() map[membership.Unit]string { return nil }
	}
	answer := make(chan map[membership.Unit]string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, ownersTimeout)
		defer cancel()
		owners, err := m.Owners(ctx, g.dst)
		if err != nil {
			g.log.Debug("cannot name the workers of the partitions", "error", err)
		}
		answer <- owners
	}()
	return func() map[membership.Unit]string { return <-answer }
}

// setWorkers names the worker that runs each partition of t (owners).
func setWorkers(t *api.Topic, owners map[membership.Unit]string) {
	for i := range t.Partitions {
		t.Partitions[i].Worker = owners[membership.Partition(t.Mirror, t.Topic, t.Partitions[i].Partition)]
	}
}

// ownersTimeout bounds the group coordinator's answer to a describe, below the describe's
// own bound per cluster.
const ownersTimeout = 2 * time.Second

// notReady is why this worker is not a serving member of the group, "" when it is.
func (g *group) notReady() string {
	m := g.member.Load()
	switch {
	case m == nil:
		return "joining the group of the destination's workers"
	case m.Err() != nil:
		return m.Err().Error()
	}
	return ""
}

// forwardedHeader marks a command one worker forwarded to another; it is never forwarded
// again (the owner changed meanwhile: the client retries).
const forwardedHeader = "X-Kafkamirror-Forwarded-By"

// forward passes a command to owner, the worker that applies commands, with its token,
// and its answer back.
func (s *server) forward(w http.ResponseWriter, r *http.Request, owner string) {
	target, err := url.Parse(owner)
	if err != nil {
		commandsUnavailable(w, fmt.Sprintf("the worker that applies commands advertises an unusable URL %q: %v", owner, err))
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			commandsUnavailable(w, fmt.Sprintf("forwarding the command to the worker that applies commands (%s) failed: %v", owner, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

func commandsUnavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeCoordinatorLoadInProgress, Message: msg})
}

func (s *server) getGroup(w http.ResponseWriter, _ *http.Request, _ engineAPI) error {
	var m *membership.Member
	if s.group != nil {
		m = s.group.member.Load()
	}
	if m == nil {
		return &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeCoordinatorLoadInProgress, Message: "this worker has not joined its group yet"}
	}
	out := api.Group{Name: s.group.name, Generation: m.Generation(), Members: []api.GroupMember{}}
	for _, info := range m.Members() {
		// Members name their mirror-level units; the rest of their units are partitions.
		gm := api.GroupMember{WorkerID: info.WorkerID, Version: info.WorkerVersion, APIURL: info.APIAddress, MirrorSyncs: []string{},
			Partitions: info.Units - len(info.Owned)}
		for _, u := range info.Owned {
			switch u.Kind {
			case membership.KindMirrorSync:
				gm.MirrorSyncs = append(gm.MirrorSyncs, u.Mirror)
			case membership.KindCommands:
				gm.Commands = true
			}
		}
		out.Members = append(out.Members, gm)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// defaultWorkerID names the worker after its host and the port its API listens on.
func defaultWorkerID(apiURL string) string {
	host, _ := os.Hostname()
	port := ""
	if u, err := url.Parse(apiURL); err == nil {
		port = u.Port()
	}
	return host + ":" + port
}

func workerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return "unknown"
}
