// Package partitionstate is the partition state machine (KIP-1279 §3, April-era names) as a pure
// function, in the manner of etcd's raft: Next takes the current status, the
// desired state, one event and the retry policy, and returns the new status
// plus the actions the shell must perform. It does no I/O, reads no clock and
// starts no goroutine; time and randomness arrive as inputs, so every
// transition is reproducible in a table test.
package partitionstate

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// State is a mirror partition's state, named as in KIP-1279's April-era
// revision. The zero value is StateUnknown: a partition with no recorded
// state. The numeric values are not the prototype's wire bytes; persist
// String() and read it back with ParseState.
type State int8

// The partition states (KIP-1279 §3.1).
const (
	// StateUnknown is the absence of state: nothing recorded yet.
	StateUnknown State = iota
	// StatePreparing creates or aligns the destination and decides where to start.
	StatePreparing
	// StateMirroring copies records; the destination is read-only.
	StateMirroring
	// StatePausing stops the fetcher on the way to StatePaused.
	StatePausing
	// StatePaused is read-only with no fetcher and no metadata sync.
	StatePaused
	// StateStopping runs the failover steps.
	StateStopping
	// StateStopped is an ordinary writable topic.
	StateStopped
	// StateFailed holds an error and, if retryable, a scheduled retry.
	StateFailed

	numStates = iota
)

var stateNames = [numStates]string{
	StateUnknown:   kip.StateUnknown,
	StatePreparing: kip.StatePreparing,
	StateMirroring: kip.StateMirroring,
	StatePausing:   kip.StatePausing,
	StatePaused:    kip.StatePaused,
	StateStopping:  kip.StateStopping,
	StateStopped:   kip.StateStopped,
	StateFailed:    kip.StateFailed,
}

// Valid reports whether s is one of the states.
func (s State) Valid() bool { return s >= 0 && int(s) < numStates }

// String returns the KIP name of the state ("MIRRORING"), or "State(n)" for a
// value outside the defined set.
func (s State) String() string {
	if !s.Valid() {
		return fmt.Sprintf("State(%d)", int8(s))
	}
	return stateNames[s]
}

// LogValue makes log lines show the state's name whatever the handler.
func (s State) LogValue() slog.Value { return slog.StringValue(s.String()) }

// ParseState returns the state whose KIP name is s. The match is exact
// (upper case), because the names are a persisted format, not user input.
func ParseState(s string) (State, error) {
	for i, name := range stateNames {
		if s == name {
			return State(i), nil
		}
	}
	return StateUnknown, fmt.Errorf("unknown mirror partition state %q", s)
}

// Desired is the state the operator asks for, carried by the topic's
// mirror.name value (KIP-1279 §4). The zero value is DesiredMirroring, which
// is also what a plain mirror name (no suffix) means.
type Desired int8

// The desired states; their String values are the Terraform `state` values.
const (
	// DesiredMirroring: mirror.name is the plain mirror name.
	DesiredMirroring Desired = iota
	// DesiredPaused: mirror.name ends in ".paused".
	DesiredPaused
	// DesiredStopped: mirror.name ends in ".removed" (failover).
	DesiredStopped

	numDesired = iota
)

var desiredNames = [numDesired]string{
	DesiredMirroring: kip.DesiredMirroring,
	DesiredPaused:    kip.DesiredPaused,
	DesiredStopped:   kip.DesiredStopped,
}

// Valid reports whether d is one of the desired states.
func (d Desired) Valid() bool { return d >= 0 && int(d) < numDesired }

// String returns "mirroring", "paused" or "stopped", or "Desired(n)" for a
// value outside the defined set.
func (d Desired) String() string {
	if !d.Valid() {
		return fmt.Sprintf("Desired(%d)", int8(d))
	}
	return desiredNames[d]
}

// ParseDesired returns the desired state named s ("mirroring", "paused",
// "stopped"), as written in Terraform and the worker's API.
func ParseDesired(s string) (Desired, error) {
	for i, name := range desiredNames {
		if s == name {
			return Desired(i), nil
		}
	}
	return DesiredMirroring, fmt.Errorf("unknown desired state %q (want mirroring, paused or stopped)", s)
}

// ParseMirrorName splits a mirror.name value into the mirror name and the
// desired state, by kip.ParseMirrorName's rule. The returned name is not
// validated; callers that accept external input should validate it.
func ParseMirrorName(value string) (mirror string, d Desired) {
	mirror, desired := kip.ParseMirrorName(value)
	d, _ = ParseDesired(desired) // kip returns only the three desired names
	return mirror, d
}

// FormatMirrorName returns the mirror.name value for a mirror and desired
// state: "m", "m.paused" or "m.removed". A Desired outside the defined set
// yields the plain name; such values can only come from a conversion bug.
func FormatMirrorName(mirror string, d Desired) string {
	if !d.Valid() {
		return mirror
	}
	return kip.FormatMirrorName(mirror, d.String())
}

// ErrInvalidMirrorName is wrapped by every ValidateMirrorName error, so the
// worker can map it to INVALID_CLUSTER_MIRROR_NAME with errors.Is.
var ErrInvalidMirrorName = errors.New("invalid cluster mirror name")

// ValidateMirrorName checks a cluster mirror name by kip.MirrorNameProblem's
// rules. The error wraps ErrInvalidMirrorName and names the rule that failed.
func ValidateMirrorName(name string) error {
	p := kip.MirrorNameProblem(name)
	if p == "" {
		return nil
	}
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	return fmt.Errorf("%w %q: %s", ErrInvalidMirrorName, shown, p)
}

// legalFrom[to] is the set of states that may move to `to` (KIP-1279 §3.3,
// April-era column), as a bit set indexed by the source state. Self-transitions
// are added by LegalTransition.
var legalFrom = [numStates]uint16{
	StateUnknown:   0, // nothing enters UNKNOWN: it is the absence of state
	StatePreparing: bits(StateUnknown, StateStopped, StateFailed),
	// FAILED → MIRRORING is how an automatic retry re-enters MIRRORING.
	StateMirroring: bits(StatePreparing, StatePaused, StateFailed),
	StatePausing:   bits(StateMirroring),
	StatePaused:    bits(StatePausing),
	// PAUSING → STOPPING guards a stop that races a pause.
	StateStopping: bits(StatePreparing, StateMirroring, StatePausing, StatePaused, StateFailed),
	StateStopped:  bits(StateStopping),
	StateFailed:   bits(StateUnknown, StatePreparing, StateMirroring, StatePausing, StatePaused, StateStopping, StateStopped, StateFailed),
}

func bits(states ...State) uint16 {
	var b uint16
	for _, s := range states {
		b |= 1 << uint(s)
	}
	return b
}

// LegalTransition reports whether a partition may move from one state to
// another (KIP-1279 §3.3, April-era). Self-transitions are always legal,
// including UNKNOWN → UNKNOWN (no change); no other state moves to UNKNOWN.
// Values outside the defined states are never legal.
func LegalTransition(from, to State) bool {
	if !from.Valid() || !to.Valid() {
		return false
	}
	return from == to || legalFrom[to]&(1<<uint(from)) != 0
}

// Status is a partition's persisted state: what the `partition/...` record in
// __mirror_state holds, apart from the update time.
type Status struct {
	// State is the current state; Previous the state before the last change.
	State, Previous State
	// StateEpoch goes up by one on every state change (never on a
	// self-transition), so stale writers can be fenced.
	StateEpoch int32
	// Error is the failure message; empty outside StateFailed.
	Error string
	// RetryAttempt counts consecutive failures. In StateFailed: n ≥ 1 means
	// retry n is scheduled, -1 means non-retryable (waits for the operator).
	// Outside StateFailed it is 0, except that a state entered by an automatic
	// retry keeps n until it proves itself (Done, Healthy) or the operator
	// restarts it, so back-off keeps growing across retry → fail cycles.
	RetryAttempt int16
	// RetryAt is when the scheduled retry is due; zero unless one is scheduled.
	RetryAt time.Time
}

func (s Status) equal(o Status) bool {
	return s.State == o.State && s.Previous == o.Previous && s.StateEpoch == o.StateEpoch &&
		s.Error == o.Error && s.RetryAttempt == o.RetryAttempt && s.RetryAt.Equal(o.RetryAt)
}

// Event is something that happened to a partition: one of Evaluate, Done,
// Fail, RetryDue, Restart or Healthy (values or non-nil pointers). Next refuses
// any other. The shell may wrap events to route them (EventName names them in logs).
type Event interface {
	EventName() string
}

// Evaluate says the desired state is known or has changed (a mirror.name
// update, a load, a periodic check). It applies the KIP's triggers and is
// idempotent: evaluating twice changes nothing the second time.
type Evaluate struct{}

// Done says the current state's work has completed: PREPARING, PAUSING or
// STOPPING. It is illegal in states that have no finite work.
type Done struct{}

// Fail says the current state's work failed.
type Fail struct {
	// Err is the message recorded in Status.Error.
	Err string
	// Retryable is false for failures only the operator can resolve
	// (source cluster id changed, source topic recreated, divergence).
	Retryable bool
	// Now is the current time, from which the retry is scheduled.
	Now time.Time
}

// RetryDue says a scheduled retry's time has come (the shell's timer fired).
type RetryDue struct {
	// Now is the current time, compared with Status.RetryAt.
	Now time.Time
}

// Restart says the operator started the topic again (StartMirrorTopics on a
// STOPPED or FAILED partition). Unlike RetryDue it works on non-retryable
// failures and gives a fresh retry budget. It always re-enters PREPARING,
// even for a partition that failed while mirroring: whatever the failure was,
// the destination is checked again, and one that is still a prefix of the
// source simply continues from its end.
type Restart struct{}

// Healthy says MIRRORING is making progress (the shell sends it after a
// successful fetch-and-produce round). It ends a retry sequence: without it a
// partition whose automatic retry re-entered MIRRORING would count every later,
// unrelated failure as one more consecutive attempt.
type Healthy struct{}

func (Evaluate) EventName() string { return "Evaluate" }
func (Done) EventName() string     { return "Done" }
func (Fail) EventName() string     { return "Fail" }
func (RetryDue) EventName() string { return "RetryDue" }
func (Restart) EventName() string  { return "Restart" }
func (Healthy) EventName() string  { return "Healthy" }

// ActionKind is the kind of an Action.
type ActionKind int8

// The actions the shell performs, in the order Next returns them.
const (
	// ActionRecord: persist the returned Status in __mirror_state before
	// performing any later action, so a crash never acts on unrecorded state.
	ActionRecord ActionKind = iota + 1
	// ActionPrepare: run PREPARING (create/check the destination, choose the
	// starting offset), then report Done or Fail.
	ActionPrepare
	// ActionStartFetching: start the partition's fetch-and-produce loop.
	ActionStartFetching
	// ActionStopFetching: stop that loop; a no-op if it is not running. On
	// entering PAUSING, report Done once it has stopped.
	ActionStopFetching
	// ActionStop: run the failover steps (stop fetching, abort replayed
	// transactions, write lastmirror, lift read-only), then report Done or Fail.
	// Every step is idempotent, so a repeated ActionStop resumes the stop.
	ActionStop
	// ActionScheduleRetry: send RetryDue at Action.At (replacing any earlier
	// timer for the partition).
	ActionScheduleRetry
)

var actionNames = map[ActionKind]string{
	ActionRecord:        "Record",
	ActionPrepare:       "Prepare",
	ActionStartFetching: "StartFetching",
	ActionStopFetching:  "StopFetching",
	ActionStop:          "Stop",
	ActionScheduleRetry: "ScheduleRetry",
}

// String returns the action's name ("StartFetching").
func (k ActionKind) String() string {
	if n, ok := actionNames[k]; ok {
		return n
	}
	return fmt.Sprintf("ActionKind(%d)", int8(k))
}

// Action is one thing the shell must do.
type Action struct {
	Kind ActionKind
	// At is when the retry is due; set only for ActionScheduleRetry.
	At time.Time
}

// String returns the kind, with the time for ActionScheduleRetry.
func (a Action) String() string {
	if a.Kind == ActionScheduleRetry {
		return fmt.Sprintf("%s(%s)", a.Kind, a.At.Format(time.RFC3339Nano))
	}
	return a.Kind.String()
}

// RetryPolicy is the automatic retry of FAILED partitions: exponential
// back-off with full jitter (KIP-1279 §3.5, mirror.failed.retry.*).
type RetryPolicy struct {
	// Initial is the cap for the first retry; it doubles per attempt.
	// Zero or negative means retry immediately.
	Initial time.Duration
	// Max caps the doubled delay; zero or negative means no cap.
	Max time.Duration
	// MaxAttempts is how many automatic retries a failure sequence gets; the
	// next failure is non-retryable. Zero or negative disables automatic retry.
	MaxAttempts int16
	// Jitter returns a random duration in [0, max] (full jitter). Results out
	// of that range are clamped. Nil means no jitter: the delay is max itself.
	// It must not panic; it is the only source of randomness.
	Jitter func(max time.Duration) time.Duration
}

// Backoff returns the delay before retry number attempt (1-based):
// Jitter(min(Max, Initial·2^(attempt-1))). It saturates instead of
// overflowing.
func (p RetryPolicy) Backoff(attempt int16) time.Duration {
	d := max(p.Initial, 0)
	for i := int16(1); i < attempt && d > 0; i++ {
		if p.Max > 0 && d >= p.Max {
			break
		}
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	if p.Jitter == nil {
		return d
	}
	return min(max(p.Jitter(d), 0), d)
}

// IllegalTransitionError is returned by Next when the event is not legal in
// the current state (Done in MIRRORING, Restart from MIRRORING, a RetryDue for
// a non-retryable failure). The worker reports it as
// INVALID_MIRROR_PARTITION_STATE. To equals From when the event has no target.
type IllegalTransitionError struct {
	From, To State
	Reason   string
}

func (e *IllegalTransitionError) Error() string {
	if e.From == e.To {
		return fmt.Sprintf("illegal event in mirror partition state %s: %s", e.From, e.Reason)
	}
	return fmt.Sprintf("illegal mirror partition state transition %s → %s: %s", e.From, e.To, e.Reason)
}

// Next applies one event to a partition and returns the new status, the
// actions the shell must perform in order, and an *IllegalTransitionError when
// the event is not legal in the current state (other errors mean invalid
// input). On error the status is returned unchanged with no actions.
//
// A state change bumps StateEpoch, sets Previous to the old state, and on
// leaving FAILED clears Error and RetryAt (and RetryAttempt, except when the
// change is the automatic retry itself). Whenever the status changes,
// ActionRecord comes first.
//
// Next handles exactly one event and one state change. After any change the
// shell sends Evaluate, so a desired state that arrived while work was under
// way takes effect: a pause requested during PREPARING goes
// PREPARING -Done→ MIRRORING -Evaluate→ PAUSING -Done→ PAUSED, because the
// April-era table only lets PAUSING follow MIRRORING.
func Next(cur Status, desired Desired, ev Event, policy RetryPolicy) (Status, []Action, error) {
	if !cur.State.Valid() {
		return cur, nil, fmt.Errorf("mirror partition status has invalid state %s", cur.State)
	}
	if !desired.Valid() {
		return cur, nil, fmt.Errorf("invalid desired state %s", desired)
	}
	next, acts, err := step(cur, desired, ev, policy)
	if err != nil {
		return cur, nil, err
	}
	// Defence in depth: no rule above may produce a transition the table forbids.
	if !LegalTransition(cur.State, next.State) {
		return cur, nil, &IllegalTransitionError{From: cur.State, To: next.State, Reason: "internal error: rule produced a transition the table forbids"}
	}
	if !next.equal(cur) {
		acts = append([]Action{{Kind: ActionRecord}}, acts...)
	}
	return next, acts, nil
}

func step(cur Status, desired Desired, ev Event, policy RetryPolicy) (Status, []Action, error) {
	switch e := ev.(type) {
	case Evaluate:
		return evaluate(cur, desired)
	case Done:
		return done(cur, desired)
	case Fail:
		return fail(cur, e, policy)
	case RetryDue:
		return retryDue(cur, desired, e)
	case Restart:
		return restart(cur, desired)
	case Healthy:
		return healthy(cur)
	case *Evaluate:
		if e != nil {
			return evaluate(cur, desired)
		}
	case *Done:
		if e != nil {
			return done(cur, desired)
		}
	case *Fail:
		if e != nil {
			return fail(cur, *e, policy)
		}
	case *RetryDue:
		if e != nil {
			return retryDue(cur, desired, *e)
		}
	case *Restart:
		if e != nil {
			return restart(cur, desired)
		}
	case *Healthy:
		if e != nil {
			return healthy(cur)
		}
	}
	return cur, nil, fmt.Errorf("invalid mirror partition event %#v", ev)
}

// evaluate applies the KIP's triggers (§3.3) in their order: stop, pause,
// resume, start. It never fails: anything not covered keeps the state.
func evaluate(cur Status, desired Desired) (Status, []Action, error) {
	s := cur.State
	to := s
	switch desired {
	case DesiredStopped:
		switch s {
		case StatePreparing, StateMirroring, StatePausing, StatePaused:
			to = StateStopping
		case StateFailed:
			// Stopping is the KIP's way out of FAILED, even a non-retryable
			// one, but not when the stop itself failed: going straight back to
			// STOPPING would skip the back-off and spin.
			if cur.Previous != StateStopping && cur.Previous != StateStopped {
				to = StateStopping
			}
		}
		// UNKNOWN has no legal way to STOPPING and nothing to undo: it stays.
	case DesiredPaused:
		switch s {
		case StateMirroring:
			to = StatePausing
		case StateUnknown, StateStopped:
			// As in the KIP's trigger order, a topic that is not stopped
			// starts; it is paused once it reaches MIRRORING.
			to = StatePreparing
		}
	case DesiredMirroring:
		switch s {
		case StatePaused:
			to = StateMirroring
		case StateUnknown, StateStopped:
			to = StatePreparing
		}
	}
	// An operator stop from FAILED is a new intent, not a retry: the leave
	// clears the retry count along with the error.
	return enter(cur, to)
}

// done moves a state whose work completed to its successor, and ends any retry
// sequence: the work succeeded.
func done(cur Status, desired Desired) (Status, []Action, error) {
	var to State
	switch cur.State {
	case StatePreparing:
		to = StateMirroring
		if desired == DesiredStopped {
			to = StateStopping // a stop requested mid-way must not start fetching
		}
	case StatePausing:
		to = StatePaused
	case StateStopping:
		to = StateStopped
	default:
		return cur, nil, &IllegalTransitionError{From: cur.State, To: cur.State,
			Reason: fmt.Sprintf("Done reported, but %s has no work that completes", cur.State)}
	}
	next, acts, err := enter(cur, to)
	next.RetryAttempt = 0
	return next, acts, err
}

func fail(cur Status, e Fail, policy RetryPolicy) (Status, []Action, error) {
	msg := e.Err
	if msg == "" {
		msg = "unspecified failure"
	}
	if cur.State == StateFailed {
		// A late or secondary error: keep the schedule (this was not a retry
		// attempt), record the newest message, and cancel the retry if the new
		// failure cannot be retried.
		next := cur
		next.Error = msg
		if !e.Retryable {
			next.RetryAttempt, next.RetryAt = -1, time.Time{}
		}
		return next, nil, nil
	}
	next, acts, _ := enter(cur, StateFailed)
	next.Error = msg
	attempt := int16(1)
	if cur.RetryAttempt > 0 && cur.RetryAttempt < math.MaxInt16 {
		attempt = cur.RetryAttempt + 1
	} else if cur.RetryAttempt == math.MaxInt16 {
		attempt = math.MaxInt16
	}
	if !e.Retryable || attempt > policy.MaxAttempts {
		next.RetryAttempt, next.RetryAt = -1, time.Time{}
		return next, acts, nil
	}
	next.RetryAttempt = attempt
	next.RetryAt = e.Now.Add(policy.Backoff(attempt))
	return next, append(acts, Action{Kind: ActionScheduleRetry, At: next.RetryAt}), nil
}

// retryTarget is where an automatic retry re-enters, given the state that
// failed. The April-era table only lets FAILED go to PREPARING, MIRRORING or
// STOPPING, so PAUSING/PAUSED resume MIRRORING (Evaluate then pauses again)
// and a failed STOPPED re-runs the idempotent STOPPING.
func retryTarget(previous State, desired Desired) State {
	if desired == DesiredStopped {
		return StateStopping
	}
	switch previous {
	case StateMirroring, StatePausing, StatePaused:
		return StateMirroring
	case StateStopping, StateStopped:
		return StateStopping // an interrupted failover always finishes first
	default: // UNKNOWN, PREPARING, or a corrupt value: re-align from scratch
		return StatePreparing
	}
}

func retryDue(cur Status, desired Desired, e RetryDue) (Status, []Action, error) {
	if cur.State != StateFailed {
		return cur, nil, &IllegalTransitionError{From: cur.State, To: cur.State,
			Reason: fmt.Sprintf("RetryDue, but no retry is pending in %s", cur.State)}
	}
	to := retryTarget(cur.Previous, desired)
	if cur.RetryAttempt <= 0 {
		return cur, nil, &IllegalTransitionError{From: cur.State, To: to,
			Reason: "the failure is not retryable; it waits for the operator to restart or stop the topic"}
	}
	if e.Now.Before(cur.RetryAt) {
		// The timer fired early (or was re-armed late): ask for it again.
		return cur, []Action{{Kind: ActionScheduleRetry, At: cur.RetryAt}}, nil
	}
	next, acts, err := enter(cur, to)
	next.RetryAttempt = cur.RetryAttempt // the count survives the retry itself
	return next, acts, err
}

func restart(cur Status, desired Desired) (Status, []Action, error) {
	to := StatePreparing
	switch {
	case cur.State == StateFailed && desired == DesiredStopped:
		to = StateStopping // the operator retries the stop
	case cur.State == StateStopped && desired == DesiredStopped:
		return cur, nil, &IllegalTransitionError{From: cur.State, To: to,
			Reason: "restart requested, but the desired state is stopped; set it to mirroring or paused first"}
	case cur.State != StateFailed && cur.State != StateStopped:
		return cur, nil, &IllegalTransitionError{From: cur.State, To: to,
			Reason: fmt.Sprintf("restart is only possible from STOPPED or FAILED, not %s", cur.State)}
	}
	next, acts, err := enter(cur, to)
	next.RetryAttempt = 0 // the operator grants a fresh retry budget
	return next, acts, err
}

func healthy(cur Status) (Status, []Action, error) {
	if cur.State != StateMirroring {
		return cur, nil, &IllegalTransitionError{From: cur.State, To: cur.State,
			Reason: fmt.Sprintf("Healthy is reported only in MIRRORING, not %s", cur.State)}
	}
	next := cur
	next.RetryAttempt = 0
	return next, nil, nil
}

// enter moves cur to state `to` with the bookkeeping every change shares and
// returns the entry actions (without ActionRecord, which Next adds). A
// self-transition returns cur unchanged with no actions.
func enter(cur Status, to State) (Status, []Action, error) {
	from := cur.State
	if to == from {
		return cur, nil, nil
	}
	next := cur
	next.Previous = from
	next.State = to
	next.StateEpoch = cur.StateEpoch + 1
	if from == StateFailed {
		next.Error, next.RetryAttempt, next.RetryAt = "", 0, time.Time{}
	}
	var acts []Action
	// Only MIRRORING fetches. PAUSING's own work is stopping the fetcher; the
	// other exits from MIRRORING must stop it too.
	if from == StateMirroring || to == StatePausing {
		acts = append(acts, Action{Kind: ActionStopFetching})
	}
	acts = append(acts, workActions(to)...)
	return next, acts, nil
}

// workActions is the work a state performs on entry (PAUSING's is added by
// enter, since its only predecessor is MIRRORING).
func workActions(s State) []Action {
	switch s {
	case StatePreparing:
		return []Action{{Kind: ActionPrepare}}
	case StateMirroring:
		return []Action{{Kind: ActionStartFetching}}
	case StateStopping:
		return []Action{{Kind: ActionStop}}
	}
	return nil
}

// ResumeActions returns what a freshly started shell must do for a status it
// loaded from __mirror_state, so work interrupted by a crash continues:
// PREPARING prepares again, MIRRORING fetches, PAUSING stops fetching,
// STOPPING resumes the stop, a retryable FAILED re-arms its timer. After
// performing them the shell sends Evaluate.
func ResumeActions(cur Status) []Action {
	switch cur.State {
	case StatePausing:
		return []Action{{Kind: ActionStopFetching}}
	case StateFailed:
		if cur.RetryAttempt > 0 {
			return []Action{{Kind: ActionScheduleRetry, At: cur.RetryAt}}
		}
		return nil
	}
	return workActions(cur.State)
}
