package membership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultGroup is the group name when Config.Group is empty: the workers of one destination
// share its __mirror_state and therefore one group. Set Group to run two independent
// deployments against one destination.
const DefaultGroup = "kafkamirror-workers"

// Config configures a member. Client, WorkerID, Units and Run are required.
type Config struct {
	// Client talks to the destination cluster, whose group coordinator hosts the group. The
	// member issues JoinGroup, SyncGroup, Heartbeat and LeaveGroup through it; kgo routes them
	// to the coordinator and retries coordinator moves.
	Client *kgo.Client
	Group  string // default DefaultGroup

	WorkerID      string // stable name of the worker, shown to operators
	WorkerVersion string
	APIAddress    string // where other workers and operators reach this worker's API
	// Fingerprint summarises the configuration every worker of the group must share (never a
	// secret; it is hashed with the timing settings below and shown in refusals).
	Fingerprint string

	// Units returns the work to assign. Only the leader's answer counts: call Rebalance when
	// the set changes so the leader computes a new assignment.
	Units func() []Unit
	// Run runs one owned unit in its own goroutine, from the moment the unit is owned (after
	// any handover delay) until ctx ends (see context.Cause for why). Run must return only
	// once it has no write outstanding: its return is what lets the next owner start at once.
	Run func(ctx context.Context, u Unit)
	// Started, when set, is called as a unit's Run starts with how long the unit went without
	// an owner as far as this member can tell: since the start of the rebalance that moved
	// it here (its first round, when it took two). The time the coordinator took to notice a
	// dead owner before that rebalance, at most SessionTimeout, is not seen by anyone alive.
	Started func(u Unit, unowned time.Duration)
	// UnitsGrace is how long a member that is not the leader waits before asking for a
	// rebalance because its units differ from those the leader assigned: the leader follows
	// the same store and normally asks first, so one change costs one rebalance. Default 5s.
	UnitsGrace time.Duration

	SessionTimeout    time.Duration // default 10s; the coordinator's group.min/max.session.timeout.ms bound it
	RebalanceTimeout  time.Duration // default 30s
	HeartbeatInterval time.Duration // default 1s
	// Lease is how long a heartbeat answer proves ownership, counted from when the request
	// was sent, and how long a new owner waits after a handover without release. Default
	// 60% of SessionTimeout; it must be shorter than SessionTimeout and at least two
	// heartbeat intervals.
	Lease time.Duration

	Logger *slog.Logger // default slog.Default()
}

func (c *Config) validate() error {
	if c.Client == nil || c.WorkerID == "" || c.Units == nil || c.Run == nil {
		return errors.New("membership: Client, WorkerID, Units and Run are required")
	}
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.Lease == 0 {
		c.Lease = c.SessionTimeout * 6 / 10
	}
	if c.UnitsGrace == 0 {
		c.UnitsGrace = 5 * time.Second
	}
	if c.Lease >= c.SessionTimeout || c.Lease < 2*c.HeartbeatInterval {
		return fmt.Errorf("membership: lease %v must be shorter than the session timeout %v and at least two heartbeat intervals (%v)",
			c.Lease, c.SessionTimeout, c.HeartbeatInterval)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// fingerprint is what members compare: the caller's fingerprint and the timings the safety
// argument needs everyone to share (a new owner waits out the old owner's lease).
func (c *Config) fingerprint() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00lease=%v", c.Fingerprint, c.Lease))
	return hex.EncodeToString(sum[:8])
}

// IncompatibleError is the refusal of a member the group cannot take.
type IncompatibleError struct {
	Group  string
	Reason string
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("membership: refused by group %q: %s", e.Group, e.Reason)
}

// Member is this worker's membership in the group.
type Member struct {
	cfg   Config
	fp    string
	epoch time.Time // lease times are durations since epoch, on the monotonic clock

	leaseUntil atomic.Int64 // nanoseconds since epoch
	leaseTimer *time.Timer

	mu         sync.Mutex
	memberID   string
	generation int32 // the coordinator generation joined; -1 before the first join
	heldGen    int32 // generation of the assignment held
	joining    bool
	leader     bool   // this member computed the assignment held
	leaving    bool   // Leave is handing the units over
	unitsHash  uint64 // of the units the leader assigned (assignment.UnitsHash)
	// rebalancing is set from the first join of a rebalance until an assignment that
	// withholds nothing, and rebalanceStart is when that first join began (now).
	rebalancing    bool
	rebalanceStart int64
	units          map[Unit]*held
	stopping       map[Unit]*held // stopped, Run not yet returned
	released       map[Unit]struct{}
	members        []MemberInfo
	history        leadership    // of the generations this member assigned; used by the run's goroutine only
	first          chan struct{} // closed at the first assignment
	firstDone      bool

	rejoin  chan struct{}
	changed chan struct{} // Rebalance: the units may have changed
	stop    context.CancelFunc
	done    chan struct{}
	err     error // why the member stopped on its own
}

// held is one owned unit.
type held struct {
	own      *ownership
	timer    *time.Timer // handover delay, nil when started at once
	launched bool
	done     chan struct{} // closed when Run returned, or at stop when Run never started
}

// Join joins the group and returns once this member has its first assignment. A refusal is an
// *IncompatibleError. The member then keeps its membership until Leave, or until it is
// refused later (Done, Err).
func Join(ctx context.Context, cfg Config) (*Member, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Member{cfg: cfg, fp: cfg.fingerprint(), epoch: time.Now(), generation: -1, heldGen: -1,
		units: map[Unit]*held{}, stopping: map[Unit]*held{}, released: map[Unit]struct{}{},
		first: make(chan struct{}), rejoin: make(chan struct{}, 1), changed: make(chan struct{}, 1), done: make(chan struct{})}
	m.leaseTimer = time.AfterFunc(time.Hour, m.onLeaseTimer)
	m.leaseTimer.Stop()
	runCtx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go m.run(runCtx)
	select {
	case <-m.first:
		return m, nil
	case <-m.done:
		return nil, m.err
	case <-ctx.Done():
		// The caller's deadline passed; leaving gets a lease of its own.
		lctx, cancel := context.WithTimeout(context.Background(), cfg.Lease)
		m.Leave(lctx)
		cancel()
		return nil, fmt.Errorf("membership: joining group %q: %w", cfg.Group, context.Cause(ctx))
	}
}

// Done is closed when the member stopped on its own (refused); Err says why.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err is why the member stopped on its own, nil while it runs or after Leave.
func (m *Member) Err() error {
	select {
	case <-m.done:
		return m.err
	default:
		return nil
	}
}

// Rebalance says that the units may have changed. Only a difference from the units the
// leader assigned last leads to a rebalance, asked for at once by the leader and after
// UnitsGrace by another member (see Config.UnitsGrace). It only takes note: Units is called
// later, from another goroutine.
func (m *Member) Rebalance() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// watchUnits asks for a rebalance when the units differ from those assigned (Rebalance).
func (m *Member) watchUnits(ctx context.Context) {
	var deadline time.Time // when a member that is not the leader asks itself
	var asked uint64       // the units such a member last asked for
	var wake <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
		case <-wake:
			wake = nil
		}
		m.mu.Lock()
		leader, assigned, settled := m.leader, m.unitsHash, m.heldGen >= 0 && !m.joining
		m.mu.Unlock()
		if !settled {
			// The join under way may use the new units already: look again after it.
			wake = time.After(m.cfg.HeartbeatInterval)
			continue
		}
		own := hashUnits(m.cfg.Units())
		switch {
		case own == assigned:
			deadline = time.Time{}
		case !leader && own == asked:
			// Asked once: the leader's assignment still lacks what this member sees, so
			// another rebalance would not change it.
			deadline = time.Time{}
		case leader || !deadline.IsZero() && !time.Now().Before(deadline):
			deadline, asked = time.Time{}, own
			m.cfg.Logger.Info("membership: the units changed; asking for a rebalance", "group", m.cfg.Group, "leader", leader)
			m.requestRejoin()
		default:
			if deadline.IsZero() {
				deadline = time.Now().Add(m.cfg.UnitsGrace)
			}
			wake = time.After(time.Until(deadline))
		}
	}
}

// Members is the group as of this member's last assignment.
func (m *Member) Members() []MemberInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Owners reads from the group coordinator, through cl, which worker (WorkerID) holds each
// unit: every member's assignment is stored there, while the one a member receives carries
// only its own units. A unit moving in a rebalance under way may have no owner in the answer.
// cl is best another client than Config.Client, whose connection carries the heartbeats.
func (m *Member) Owners(ctx context.Context, cl *kgo.Client) (map[Unit]string, error) {
	workers := map[string]string{}
	for _, info := range m.Members() {
		workers[info.MemberID] = info.WorkerID
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{m.cfg.Group}
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Groups) != 1 {
		err = fmt.Errorf("%d groups in the answer", len(resp.Groups))
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Groups[0].ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("membership: describing group %q: %w", m.cfg.Group, err)
	}
	out := map[Unit]string{}
	for _, member := range resp.Groups[0].Members {
		worker, known := workers[member.MemberID]
		// The coordinator sends member metadata only while the group is stable (Apache
		// Kafka's GroupMetadataManager.describeGroups); the last assignment always.
		if meta, err := decodeMemberMetadata(member.ProtocolMetadata); !known && err == nil {
			worker = meta.WorkerID
		}
		a, err := decodeAssignment(member.MemberAssignment)
		if err != nil || worker == "" {
			continue
		}
		for _, u := range a.Owned {
			out[u] = worker
		}
	}
	return out, nil
}

// Owned lists the units this member holds, running or waiting out a handover.
func (m *Member) Owned() []Unit {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := make(map[Unit]struct{}, len(m.units))
	for u := range m.units {
		set[u] = struct{}{}
	}
	return sortedUnits(set)
}

// Generation is the group generation of the assignment held, -1 before the first.
func (m *Member) Generation() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heldGen
}

// Leave stops every unit, waits for their Run to return (until ctx ends), hands them over
// to the other members as released, so they start them without waiting out this member's
// lease, and leaves the group.
func (m *Member) Leave(ctx context.Context) error {
	m.stop()
	<-m.done
	m.mu.Lock()
	id, others := m.memberID, len(m.members) > 1
	waits := m.dropAllLocked(ErrLeft)
	m.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return fmt.Errorf("membership: leaving group %q: units still running: %w", m.cfg.Group, ctx.Err())
		}
	}
	if id == "" {
		return nil
	}
	if others {
		m.handOver(ctx)
	}
	return m.leaveGroup(ctx, id)
}

// handOver rejoins once more, owning nothing and saying it leaves, so that the leader gives
// the units this member released to the others without a handover delay. Without it (it
// fails, or the coordinator or the others are slow) they wait out this member's lease.
func (m *Member) handOver(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Lease)
	defer cancel()
	m.mu.Lock()
	m.leaving = true
	m.mu.Unlock()
	for ctx.Err() == nil {
		err := m.joinAndSync(ctx)
		if err == nil {
			return
		}
		if !errors.Is(err, errRejoinNow) {
			m.cfg.Logger.Warn("membership: handing the units over before leaving failed; the others wait out this worker's lease", "group", m.cfg.Group, "err", err)
			return
		}
	}
}

func (m *Member) leaveGroup(ctx context.Context, id string) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.cfg.Group
	req.MemberID = id
	member := kmsg.NewLeaveGroupRequestMember()
	member.MemberID = id
	reason := "kafkamirror worker " + m.cfg.WorkerID + " leaving"
	member.Reason = &reason
	req.Members = []kmsg.LeaveGroupRequestMember{member}
	resp, err := req.RequestWith(ctx, m.cfg.Client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil && !errors.Is(err, kerr.UnknownMemberID) {
		return fmt.Errorf("membership: leaving group %q: %w", m.cfg.Group, err)
	}
	return nil
}

func (m *Member) requestRejoin() {
	select {
	case m.rejoin <- struct{}{}:
	default:
	}
}

func (m *Member) now() int64 { return int64(time.Since(m.epoch)) }

func (m *Member) leaseExpired() bool { return m.now() >= m.leaseUntil.Load() }

// extendLease records that a request sent at sent (see now) was answered in a way that
// proves this member's place in its current generation.
func (m *Member) extendLease(sent int64) {
	until := sent + int64(m.cfg.Lease)
	for {
		cur := m.leaseUntil.Load()
		if until <= cur {
			return
		}
		if m.leaseUntil.CompareAndSwap(cur, until) {
			m.leaseTimer.Reset(time.Duration(until - m.now()))
			return
		}
	}
}

func (m *Member) onLeaseTimer() {
	if !m.leaseExpired() {
		return
	}
	m.mu.Lock()
	lost := len(m.units)
	m.dropAllLocked(ErrLeaseExpired)
	m.mu.Unlock()
	if lost > 0 {
		m.cfg.Logger.Warn("membership: lease expired, stopped every owned unit", "group", m.cfg.Group, "units", lost)
	}
	m.requestRejoin()
}

// run is the member's life: join, sync, hold, and rejoin when asked.
func (m *Member) run(ctx context.Context) {
	defer close(m.done)
	go m.heartbeats(ctx)
	go m.watchUnits(ctx)
	backoff := m.cfg.HeartbeatInterval
	for ctx.Err() == nil {
		err := m.joinAndSync(ctx)
		var refused *IncompatibleError
		switch {
		case errors.As(err, &refused):
			m.mu.Lock()
			m.err = err
			id := m.memberID
			m.dropAllLocked(ErrLeft)
			m.mu.Unlock()
			m.cfg.Logger.Error("membership: refused", "group", m.cfg.Group, "err", err)
			if id != "" {
				lctx, cancel := context.WithTimeout(ctx, m.cfg.SessionTimeout)
				_ = m.leaveGroup(lctx, id)
				cancel()
			}
			return
		case errors.Is(err, errRejoinNow):
			continue
		case err != nil:
			if ctx.Err() == nil {
				m.cfg.Logger.Warn("membership: join failed, retrying", "group", m.cfg.Group, "err", err)
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		select {
		case <-m.rejoin:
		case <-ctx.Done():
		}
	}
}

var errRejoinNow = errors.New("rejoin at once")

func (m *Member) joinAndSync(ctx context.Context) error {
	// A request to rejoin made before this join is answered by it; one left pending would
	// start the next rebalance as soon as this one ends, and so on.
	select {
	case <-m.rejoin:
	default:
	}
	m.mu.Lock()
	m.joining = true
	if !m.rebalancing {
		m.rebalancing, m.rebalanceStart = true, m.now()
	}
	meta := memberMetadata{WorkerID: m.cfg.WorkerID, WorkerVersion: m.cfg.WorkerVersion, APIAddress: m.cfg.APIAddress,
		Fingerprint: m.fp, Generation: m.heldGen, Owned: m.ownedLocked(), Released: m.releasedLocked(), Leaving: m.leaving}
	id := m.memberID
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.joining = false
		m.mu.Unlock()
	}()

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group = m.cfg.Group
	join.SessionTimeoutMillis = int32(m.cfg.SessionTimeout.Milliseconds())
	join.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout.Milliseconds())
	join.MemberID = id
	join.ProtocolType = ProtocolType
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name = ProtocolName
	proto.Metadata = meta.encode()
	join.Protocols = []kmsg.JoinGroupRequestProtocol{proto}
	jresp, err := join.RequestWith(ctx, m.cfg.Client)
	if err != nil {
		return err
	}
	switch err := kerr.ErrorForCode(jresp.ErrorCode); {
	case errors.Is(err, kerr.MemberIDRequired):
		m.mu.Lock()
		m.memberID = jresp.MemberID
		m.mu.Unlock()
		return errRejoinNow
	case errors.Is(err, kerr.UnknownMemberID):
		m.fence(true)
		return errRejoinNow
	case errors.Is(err, kerr.InvalidSessionTimeout):
		return &IncompatibleError{Group: m.cfg.Group, Reason: fmt.Sprintf(
			"the coordinator does not allow a session timeout of %v (its group.min.session.timeout.ms and group.max.session.timeout.ms)", m.cfg.SessionTimeout)}
	case errors.Is(err, kerr.InconsistentGroupProtocol):
		return &IncompatibleError{Group: m.cfg.Group, Reason: fmt.Sprintf(
			"its members use another protocol than %s/%s (a worker of an incompatible version, or another application using this group name)",
			ProtocolType, ProtocolName)}
	case err != nil:
		return fmt.Errorf("join group %q: %w", m.cfg.Group, err)
	}
	m.mu.Lock()
	m.memberID, m.generation = jresp.MemberID, jresp.Generation
	m.mu.Unlock()

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group = m.cfg.Group
	sync.Generation = jresp.Generation
	sync.MemberID = jresp.MemberID
	sync.ProtocolType = kmsg.StringPtr(ProtocolType)
	sync.Protocol = kmsg.StringPtr(ProtocolName)
	if jresp.LeaderID == jresp.MemberID {
		sync.GroupAssignment = m.lead(jresp, meta)
	}
	sent := m.now()
	sresp, err := sync.RequestWith(ctx, m.cfg.Client)
	if err != nil {
		return err
	}
	switch err := kerr.ErrorForCode(sresp.ErrorCode); {
	case errors.Is(err, kerr.RebalanceInProgress):
		return errRejoinNow
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration):
		m.fence(errors.Is(err, kerr.UnknownMemberID))
		return errRejoinNow
	case err != nil:
		return fmt.Errorf("sync group %q: %w", m.cfg.Group, err)
	}
	a, err := decodeAssignment(sresp.MemberAssignment)
	if len(sresp.MemberAssignment) == 0 {
		a, err = assignment{}, nil // the coordinator's empty assignment: the leader left us out
	}
	if err != nil {
		return fmt.Errorf("sync group %q: %w", m.cfg.Group, err)
	}
	if a.Refused != "" {
		return &IncompatibleError{Group: m.cfg.Group, Reason: a.Refused}
	}
	m.apply(jresp.Generation, jresp.LeaderID == jresp.MemberID, a, meta.Released, sent)
	return nil
}

// lead computes every member's assignment.
func (m *Member) lead(joined *kmsg.JoinGroupResponse, self memberMetadata) []kmsg.SyncGroupRequestGroupAssignment {
	arrived := m.now()
	members := make([]joinedMember, 0, len(joined.Members))
	for _, j := range joined.Members {
		meta, err := decodeMemberMetadata(j.ProtocolMetadata)
		members = append(members, joinedMember{ID: j.MemberID, meta: meta, err: err})
	}
	start := time.Now()
	quiet := m.history.begin(joined.MemberID, joined.Generation, arrived, m.cfg.Lease, members)
	plans := plan(members, m.cfg.Units(), self, quiet)
	m.history.given(plans)
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(plans))
	for _, j := range members {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = j.ID
		p := plans[j.ID]
		a.MemberAssignment = p.encode()
		out = append(out, a)
	}
	m.cfg.Logger.Info("membership: assigned", "group", m.cfg.Group, "members", len(members), "took", time.Since(start))
	return out
}

// apply takes a new assignment: revoked units stop at once, kept units go on, new units start
// (after the handover delay when Delayed). A revocation asks for the second round once the
// revoked units' Run returned (or a lease passed), so the leader can hand them over released.
func (m *Member) apply(gen int32, leader bool, a assignment, reported []Unit, sent int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heldGen, m.leader, m.unitsHash = gen, leader, a.UnitsHash
	m.members = a.Members
	for _, u := range reported {
		delete(m.released, u)
	}
	m.extendLease(sent)
	owned := make(map[Unit]struct{}, len(a.Owned))
	for _, u := range a.Owned {
		owned[u] = struct{}{}
	}
	var revoked []<-chan struct{}
	for u, h := range m.units {
		if _, ok := owned[u]; !ok {
			revoked = append(revoked, m.stopLocked(u, h, ErrRevoked))
		}
	}
	delayed := make(map[Unit]struct{}, len(a.Delayed))
	for _, u := range a.Delayed {
		delayed[u] = struct{}{}
	}
	for _, u := range a.Owned {
		if _, ok := m.units[u]; !ok {
			_, wait := delayed[u]
			m.startLocked(u, wait, m.rebalanceStart)
		}
	}
	if a.Withheld == 0 {
		m.rebalancing = false
	}
	m.Rebalance() // the units may have changed during the rebalance
	if !m.firstDone {
		m.firstDone = true
		close(m.first)
	}
	if len(revoked) > 0 {
		go func() {
			deadline := time.After(m.cfg.Lease)
			for _, w := range revoked {
				select {
				case <-w:
				case <-deadline:
				}
			}
			m.requestRejoin()
		}()
	}
}

// startLocked starts u, after the handover delay when delay; its owners stopped at the
// latest at unowned (now).
func (m *Member) startLocked(u Unit, delay bool, unowned int64) {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &held{own: &ownership{Context: ctx, cancel: cancel, m: m}, done: make(chan struct{})}
	m.units[u] = h
	prev := m.stopping[u]
	launch := func() {
		m.mu.Lock()
		if ctx.Err() != nil || h.launched {
			m.mu.Unlock()
			return
		}
		h.launched = true
		m.mu.Unlock()
		go func() {
			if prev != nil { // this process ran u before and that Run has not returned yet
				select {
				case <-prev.done:
				case <-ctx.Done():
				}
			}
			if ctx.Err() == nil {
				if m.cfg.Started != nil {
					m.cfg.Started(u, time.Duration(m.now()-unowned))
				}
				m.cfg.Run(h.own, u)
			}
			m.mu.Lock()
			close(h.done)
			if m.stopping[u] == h {
				delete(m.stopping, u)
				m.released[u] = struct{}{}
			}
			m.mu.Unlock()
		}()
	}
	if delay {
		h.timer = time.AfterFunc(m.cfg.Lease, launch)
		return
	}
	go launch() // it takes m.mu, which the caller holds
}

// stopLocked ends the ownership of u; the returned channel closes when its Run returned.
func (m *Member) stopLocked(u Unit, h *held, cause error) <-chan struct{} {
	delete(m.units, u)
	h.own.cancel(cause)
	if h.timer != nil {
		h.timer.Stop()
	}
	if !h.launched {
		close(h.done)
		m.released[u] = struct{}{}
		return h.done
	}
	m.stopping[u] = h
	return h.done
}

func (m *Member) dropAllLocked(cause error) []<-chan struct{} {
	var waits []<-chan struct{}
	for u, h := range m.units {
		waits = append(waits, m.stopLocked(u, h, cause))
	}
	for _, h := range m.stopping {
		waits = append(waits, h.done)
	}
	return waits
}

// fence stops every unit: the coordinator no longer knows this member's generation, or
// (unknown) the member itself. A known member id is kept: a new one would leave a ghost the
// coordinator waits for in the next join.
func (m *Member) fence(unknown bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropAllLocked(ErrFenced)
	m.heldGen = -1
	if unknown {
		m.memberID, m.generation = "", -1
	}
}

func (m *Member) ownedLocked() []Unit {
	out := make([]Unit, 0, len(m.units))
	for u := range m.units {
		out = append(out, u)
	}
	return out
}

func (m *Member) releasedLocked() []Unit { return sortedUnits(m.released) }

// heartbeats proves membership every HeartbeatInterval, extending the lease (see doc.go).
func (m *Member) heartbeats(ctx context.Context) {
	tick := time.NewTicker(m.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		m.mu.Lock()
		id, gen := m.memberID, m.generation
		m.mu.Unlock()
		if id == "" || gen < 0 {
			continue
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = m.cfg.Group, id, gen
		sent := m.now()
		hctx, cancel := context.WithTimeout(ctx, m.cfg.Lease/2)
		resp, err := req.RequestWith(hctx, m.cfg.Client)
		cancel()
		if err != nil {
			continue
		}
		m.mu.Lock()
		current, joining := m.memberID == id && m.generation == gen, m.joining
		m.mu.Unlock()
		if !current {
			continue
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); {
		case err == nil:
			m.extendLease(sent)
		case errors.Is(err, kerr.RebalanceInProgress):
			// Still generation gen: the next generation cannot exist before this answer.
			m.extendLease(sent)
			if !joining { // a join in flight is this member's part in that rebalance
				m.requestRejoin()
			}
		case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.FencedInstanceID):
			if !joining { // a join in flight gets the new generation or the same error
				m.fence(!errors.Is(err, kerr.IllegalGeneration))
				m.requestRejoin()
			}
		}
	}
}
