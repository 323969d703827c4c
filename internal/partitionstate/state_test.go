package partitionstate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

var (
	smT0 = time.Date(2026, 4, 15, 12, 0, 0, 0, time.UTC)

	smStates  = []State{StateUnknown, StatePreparing, StateMirroring, StatePausing, StatePaused, StateStopping, StateStopped, StateFailed}
	smDesired = []Desired{DesiredMirroring, DesiredPaused, DesiredStopped}

	// smPolicy has no jitter, so the first retry is due exactly Initial later.
	smPolicy = RetryPolicy{Initial: time.Second, Max: time.Minute, MaxAttempts: 3}
)

const (
	aRecord     = ActionRecord
	aPrepare    = ActionPrepare
	aStartFetch = ActionStartFetching
	aStopFetch  = ActionStopFetching
	aStop       = ActionStop
	aRetry      = ActionScheduleRetry
)

func actionKinds(acts []Action) []ActionKind {
	var k []ActionKind
	for _, a := range acts {
		k = append(k, a.Kind)
	}
	return k
}

func TestStateNames(t *testing.T) {
	want := []string{"UNKNOWN", "PREPARING", "MIRRORING", "PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED"}
	for i, s := range smStates {
		if got := s.String(); got != want[i] {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want[i])
		}
		got, err := ParseState(want[i])
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %v, %v; want %v", want[i], got, err, s)
		}
	}
	if StateUnknown != 0 {
		t.Error("the zero State must be UNKNOWN (absence of state)")
	}
	for _, s := range []State{-1, 8, 127, -128} {
		if got, want := s.String(), fmt.Sprintf("State(%d)", s); got != want {
			t.Errorf("String of invalid state = %q, want %q", got, want)
		}
	}
	for _, in := range []string{"", "mirroring", "Mirroring", " MIRRORING", "LOG_ALIGNMENT", "EPOCH_FENCING", "State(8)"} {
		if _, err := ParseState(in); err == nil {
			t.Errorf("ParseState(%q) succeeded, want an error", in)
		}
	}
}

func TestDesiredNames(t *testing.T) {
	want := []string{"mirroring", "paused", "stopped"}
	for i, d := range smDesired {
		if got := d.String(); got != want[i] {
			t.Errorf("Desired(%d).String() = %q, want %q", d, got, want[i])
		}
		got, err := ParseDesired(want[i])
		if err != nil || got != d {
			t.Errorf("ParseDesired(%q) = %v, %v; want %v", want[i], got, err, d)
		}
	}
	if DesiredMirroring != 0 {
		t.Error("the zero Desired must be mirroring (a plain mirror.name)")
	}
	if got := Desired(3).String(); got != "Desired(3)" {
		t.Errorf("Desired(3).String() = %q", got)
	}
	for _, in := range []string{"", "MIRRORING", "removed", "stop", "pause"} {
		if _, err := ParseDesired(in); err == nil {
			t.Errorf("ParseDesired(%q) succeeded, want an error", in)
		}
	}
}

func TestParseMirrorName(t *testing.T) {
	tests := []struct {
		value, mirror string
		d             Desired
	}{
		{"m", "m", DesiredMirroring},
		{"m.paused", "m", DesiredPaused},
		{"m.removed", "m", DesiredStopped},
		{"x.removed", "x", DesiredStopped},
		// One suffix, parsed from the right.
		{"a.paused.paused", "a.paused", DesiredPaused},
		{"a.removed.paused", "a.removed", DesiredPaused},
		{"a.paused.removed", "a.paused", DesiredStopped},
		{"a.removed.removed", "a.removed", DesiredStopped},
		// Not suffixes.
		{"paused", "paused", DesiredMirroring},
		{"removed", "removed", DesiredMirroring},
		{"m.PAUSED", "m.PAUSED", DesiredMirroring},
		{"m.pause", "m.pause", DesiredMirroring},
		{"m.removed.", "m.removed.", DesiredMirroring},
		{"m.pausedx", "m.pausedx", DesiredMirroring},
		{"mpaused", "mpaused", DesiredMirroring},
		// Degenerate values parse; validation is the caller's job.
		{"", "", DesiredMirroring},
		{".paused", "", DesiredPaused},
		{".removed", "", DesiredStopped},
	}
	for _, tt := range tests {
		m, d := ParseMirrorName(tt.value)
		if m != tt.mirror || d != tt.d {
			t.Errorf("ParseMirrorName(%q) = %q, %v; want %q, %v", tt.value, m, d, tt.mirror, tt.d)
		}
	}
}

func TestFormatMirrorName(t *testing.T) {
	for _, tt := range []struct {
		d    Desired
		want string
	}{
		{DesiredMirroring, "m"}, {DesiredPaused, "m.paused"}, {DesiredStopped, "m.removed"}, {Desired(9), "m"},
	} {
		if got := FormatMirrorName("m", tt.d); got != tt.want {
			t.Errorf("FormatMirrorName(m, %v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	// Round trip for every valid name shape, including names that contain a
	// suffix word in the middle.
	for _, m := range []string{"m", "a.paused.b", "x.removedy", strings.Repeat("z", kip.MaxNameLen), "..."} {
		if err := ValidateMirrorName(m); err != nil {
			t.Fatalf("precondition: %v", err)
		}
		for _, d := range smDesired {
			gm, gd := ParseMirrorName(FormatMirrorName(m, d))
			if gm != m || gd != d {
				t.Errorf("round trip of %q, %v gave %q, %v", m, d, gm, gd)
			}
		}
	}
}

func TestValidateMirrorName(t *testing.T) {
	long := strings.Repeat("a", kip.MaxNameLen)
	tests := []struct {
		name    string
		wantErr string // substring naming the failed rule; "" = valid
	}{
		{"a", ""},
		{"my-mirror_1.eu", ""},
		{"A-Z.a-z_0-9", ""},
		{long, ""},
		{"...", ""},
		{"paused", ""},
		{"removed", ""},
		{"a.pausedx", ""},
		{"a.paused.b", ""},
		{"", "must not be empty"},
		{long + "a", "is 250 characters long; at most 249"},
		{long + "/", "is 250 characters long"}, // length is reported before characters
		{".", `must not be "." or ".."`},
		{"..", `must not be "." or ".."`},
		{"a b", `contains ' ' at position 1`},
		{"a/b", `contains '/'`},
		{"a:b", `contains ':'`},
		{"é", `contains 'é' at position 0`},
		{"a\x00", `contains '\x00'`},
		{"x.paused", `must not end in ".paused"`},
		{"x.removed", `must not end in ".removed"`},
		{".paused", `must not end in ".paused"`},
		{"a.paused.paused", `must not end in ".paused"`},
		{"a.removed.paused", `must not end in ".paused"`},
		{strings.Repeat("a", kip.MaxNameLen-len(".removed")) + ".removed", `must not end in ".removed"`},
	}
	for _, tt := range tests {
		err := ValidateMirrorName(tt.name)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("ValidateMirrorName(%.20q) = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ValidateMirrorName(%.20q) = nil, want an error containing %q", tt.name, tt.wantErr)
			continue
		}
		if !errors.Is(err, ErrInvalidMirrorName) {
			t.Errorf("ValidateMirrorName(%.20q) error %v does not wrap ErrInvalidMirrorName", tt.name, err)
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ValidateMirrorName(%.20q) = %q, want it to contain %q", tt.name, err, tt.wantErr)
		}
		if len(err.Error()) > 300 {
			t.Errorf("error message is %d bytes; long names should be shortened", len(err.Error()))
		}
	}
}

// legalGrid is KIP-1279 §3.3 (April-era) with our choices, row = from,
// column = to, in smStates order: U PR MI PG PD SG SD F.
var legalGrid = map[State]string{
	StateUnknown:   "1 1 0 0 0 0 0 1",
	StatePreparing: "0 1 1 0 0 1 0 1",
	StateMirroring: "0 0 1 1 0 1 0 1",
	StatePausing:   "0 0 0 1 1 1 0 1",
	StatePaused:    "0 0 1 0 1 1 0 1",
	StateStopping:  "0 0 0 0 0 1 1 1",
	StateStopped:   "0 1 0 0 0 0 1 1",
	StateFailed:    "0 1 1 0 0 1 0 1",
}

func TestLegalTransitionMatrix(t *testing.T) {
	for _, from := range smStates {
		row := strings.Fields(legalGrid[from])
		if len(row) != len(smStates) {
			t.Fatalf("grid row for %v has %d entries", from, len(row))
		}
		for j, to := range smStates {
			want := row[j] == "1"
			if got := LegalTransition(from, to); got != want {
				t.Errorf("LegalTransition(%v, %v) = %v, want %v", from, to, got, want)
			}
		}
	}
	for _, bad := range []State{-1, 8, 16, 127, -128} {
		for _, s := range append(slices.Clone(smStates), bad) {
			if LegalTransition(bad, s) || LegalTransition(s, bad) {
				t.Errorf("LegalTransition with invalid state %d and %v is legal", bad, s)
			}
		}
	}
}

// nextCase is one (state, desired, event) row of the transition table.
type nextCase struct {
	from    State
	prev    State // Previous (matters in FAILED)
	attempt int16 // RetryAttempt; FAILED rows default to 1 (retryable, due at smT0)
	desired Desired
	ev      Event
	to      State
	acts    []ActionKind
	illegal bool
}

func (c nextCase) status() Status {
	st := Status{State: c.from, Previous: c.prev, StateEpoch: 7, RetryAttempt: c.attempt}
	if c.from == StateFailed {
		st.Error = "boom"
		if st.RetryAttempt == 0 {
			st.RetryAttempt = 1
		}
		if st.RetryAttempt > 0 {
			st.RetryAt = smT0
		}
	}
	return st
}

func (c nextCase) String() string {
	return fmt.Sprintf("%v(prev %v, attempt %d)/%v/%s", c.from, c.prev, c.attempt, c.desired, c.ev.EventName())
}

const (
	dMirror = DesiredMirroring
	dPause  = DesiredPaused
	dStop   = DesiredStopped
)

var (
	smFailRetryable = Fail{Err: "fetch: connection refused", Retryable: true, Now: smT0}
	smFailFatal     = Fail{Err: "source cluster id changed", Retryable: false, Now: smT0}
	smDue           = RetryDue{Now: smT0}
)

// nextTable covers every state with every event (and every desired state for
// Evaluate and wherever else the desired state matters).
var nextTable = []nextCase{
	// Evaluate: the KIP's triggers.
	{from: StateUnknown, desired: dMirror, ev: Evaluate{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateUnknown, desired: dPause, ev: Evaluate{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateUnknown, desired: dStop, ev: Evaluate{}, to: StateUnknown},
	{from: StatePreparing, desired: dMirror, ev: Evaluate{}, to: StatePreparing},
	{from: StatePreparing, desired: dPause, ev: Evaluate{}, to: StatePreparing},
	{from: StatePreparing, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateMirroring, desired: dMirror, ev: Evaluate{}, to: StateMirroring},
	{from: StateMirroring, desired: dPause, ev: Evaluate{}, to: StatePausing, acts: []ActionKind{aRecord, aStopFetch}},
	{from: StateMirroring, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStopFetch, aStop}},
	{from: StatePausing, desired: dMirror, ev: Evaluate{}, to: StatePausing},
	{from: StatePausing, desired: dPause, ev: Evaluate{}, to: StatePausing},
	{from: StatePausing, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StatePaused, desired: dMirror, ev: Evaluate{}, to: StateMirroring, acts: []ActionKind{aRecord, aStartFetch}},
	{from: StatePaused, desired: dPause, ev: Evaluate{}, to: StatePaused},
	{from: StatePaused, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateStopping, desired: dMirror, ev: Evaluate{}, to: StateStopping},
	{from: StateStopping, desired: dPause, ev: Evaluate{}, to: StateStopping},
	{from: StateStopping, desired: dStop, ev: Evaluate{}, to: StateStopping},
	{from: StateStopped, desired: dMirror, ev: Evaluate{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateStopped, desired: dPause, ev: Evaluate{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateStopped, desired: dStop, ev: Evaluate{}, to: StateStopped},
	{from: StateFailed, prev: StateMirroring, desired: dMirror, ev: Evaluate{}, to: StateFailed},
	{from: StateFailed, prev: StateMirroring, desired: dPause, ev: Evaluate{}, to: StateFailed},
	{from: StateFailed, prev: StateMirroring, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: StatePaused, attempt: -1, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: StateUnknown, desired: dStop, ev: Evaluate{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	// The stop itself failed: wait for the back-off, do not spin.
	{from: StateFailed, prev: StateStopping, desired: dStop, ev: Evaluate{}, to: StateFailed},
	{from: StateFailed, prev: StateStopped, desired: dStop, ev: Evaluate{}, to: StateFailed},

	// Done: the current state's work completed.
	{from: StateUnknown, desired: dMirror, ev: Done{}, illegal: true},
	{from: StatePreparing, desired: dMirror, ev: Done{}, to: StateMirroring, acts: []ActionKind{aRecord, aStartFetch}},
	{from: StatePreparing, desired: dPause, ev: Done{}, to: StateMirroring, acts: []ActionKind{aRecord, aStartFetch}},
	{from: StatePreparing, desired: dStop, ev: Done{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateMirroring, desired: dMirror, ev: Done{}, illegal: true},
	{from: StatePausing, desired: dMirror, ev: Done{}, to: StatePaused, acts: []ActionKind{aRecord}},
	{from: StatePausing, desired: dPause, ev: Done{}, to: StatePaused, acts: []ActionKind{aRecord}},
	{from: StatePausing, desired: dStop, ev: Done{}, to: StatePaused, acts: []ActionKind{aRecord}},
	{from: StatePaused, desired: dPause, ev: Done{}, illegal: true},
	{from: StateStopping, desired: dStop, ev: Done{}, to: StateStopped, acts: []ActionKind{aRecord}},
	{from: StateStopping, desired: dMirror, ev: Done{}, to: StateStopped, acts: []ActionKind{aRecord}},
	{from: StateStopped, desired: dStop, ev: Done{}, illegal: true},
	{from: StateFailed, prev: StatePreparing, desired: dMirror, ev: Done{}, illegal: true},

	// Fail, retryable: FAILED from anywhere, retry scheduled.
	{from: StateUnknown, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aRetry}},
	{from: StatePreparing, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aRetry}},
	{from: StateMirroring, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aStopFetch, aRetry}},
	{from: StatePausing, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aRetry}},
	{from: StatePaused, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aRetry}},
	{from: StateStopping, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aRetry}},
	{from: StateStopped, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord, aRetry}},
	{from: StateFailed, prev: StateMirroring, ev: smFailRetryable, to: StateFailed, acts: []ActionKind{aRecord}}, // new message only

	// Fail, non-retryable: no retry scheduled.
	{from: StateUnknown, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},
	{from: StatePreparing, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},
	{from: StateMirroring, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord, aStopFetch}},
	{from: StatePausing, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},
	{from: StatePaused, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},
	{from: StateStopping, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},
	{from: StateStopped, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},
	{from: StateFailed, prev: StateMirroring, ev: smFailFatal, to: StateFailed, acts: []ActionKind{aRecord}},

	// RetryDue: only a due, retryable FAILED moves.
	{from: StateUnknown, ev: smDue, illegal: true},
	{from: StatePreparing, ev: smDue, illegal: true},
	{from: StateMirroring, ev: smDue, illegal: true},
	{from: StatePausing, ev: smDue, illegal: true},
	{from: StatePaused, ev: smDue, illegal: true},
	{from: StateStopping, ev: smDue, illegal: true},
	{from: StateStopped, ev: smDue, illegal: true},
	{from: StateFailed, prev: StateUnknown, ev: smDue, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateFailed, prev: StatePreparing, ev: smDue, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateFailed, prev: StateMirroring, ev: smDue, to: StateMirroring, acts: []ActionKind{aRecord, aStartFetch}},
	{from: StateFailed, prev: StatePausing, desired: dPause, ev: smDue, to: StateMirroring, acts: []ActionKind{aRecord, aStartFetch}},
	{from: StateFailed, prev: StatePaused, desired: dPause, ev: smDue, to: StateMirroring, acts: []ActionKind{aRecord, aStartFetch}},
	{from: StateFailed, prev: StateStopping, desired: dStop, ev: smDue, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: StateStopping, desired: dMirror, ev: smDue, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: StateStopped, ev: smDue, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: StateMirroring, desired: dStop, ev: smDue, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: StatePreparing, desired: dStop, ev: smDue, to: StateStopping, acts: []ActionKind{aRecord, aStop}},
	{from: StateFailed, prev: State(42), ev: smDue, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateFailed, prev: StateMirroring, attempt: -1, ev: smDue, illegal: true},

	// Restart: the operator starts a STOPPED or FAILED topic again.
	{from: StateUnknown, ev: Restart{}, illegal: true},
	{from: StatePreparing, ev: Restart{}, illegal: true},
	{from: StateMirroring, ev: Restart{}, illegal: true},
	{from: StatePausing, ev: Restart{}, illegal: true},
	{from: StatePaused, desired: dPause, ev: Restart{}, illegal: true},
	{from: StateStopping, ev: Restart{}, illegal: true},
	{from: StateStopped, desired: dMirror, ev: Restart{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateStopped, desired: dPause, ev: Restart{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateStopped, desired: dStop, ev: Restart{}, illegal: true},
	{from: StateFailed, prev: StateMirroring, attempt: -1, desired: dMirror, ev: Restart{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateFailed, prev: StateMirroring, attempt: 2, desired: dPause, ev: Restart{}, to: StatePreparing, acts: []ActionKind{aRecord, aPrepare}},
	{from: StateFailed, prev: StateStopping, attempt: -1, desired: dStop, ev: Restart{}, to: StateStopping, acts: []ActionKind{aRecord, aStop}},

	// Healthy: MIRRORING is making progress, which ends a retry sequence.
	{from: StateUnknown, ev: Healthy{}, illegal: true},
	{from: StatePreparing, ev: Healthy{}, illegal: true},
	{from: StateMirroring, ev: Healthy{}, to: StateMirroring},
	{from: StateMirroring, attempt: 2, ev: Healthy{}, to: StateMirroring, acts: []ActionKind{aRecord}},
	{from: StatePausing, ev: Healthy{}, illegal: true},
	{from: StatePaused, ev: Healthy{}, illegal: true},
	{from: StateStopping, ev: Healthy{}, illegal: true},
	{from: StateStopped, ev: Healthy{}, illegal: true},
	{from: StateFailed, prev: StateMirroring, ev: Healthy{}, illegal: true},
}

func TestNextTable(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range nextTable {
		covered[fmt.Sprintf("%v/%s", c.from, c.ev.EventName())] = true
		if _, ok := c.ev.(Evaluate); ok {
			covered[fmt.Sprintf("%v/%v/Evaluate", c.from, c.desired)] = true
		}
		t.Run(c.String(), func(t *testing.T) {
			cur := c.status()
			next, acts, err := Next(cur, c.desired, c.ev, smPolicy)
			if c.illegal {
				var ite *IllegalTransitionError
				if !errors.As(err, &ite) {
					t.Fatalf("err = %v, want *IllegalTransitionError", err)
				}
				if ite.From != c.from || ite.Reason == "" {
					t.Errorf("error = %+v, want From %v and a reason", ite, c.from)
				}
				if !next.equal(cur) || acts != nil {
					t.Errorf("an illegal event changed the status to %+v or returned actions %v", next, acts)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if next.State != c.to {
				t.Errorf("state = %v, want %v", next.State, c.to)
			}
			if got := actionKinds(acts); !slices.Equal(got, c.acts) {
				t.Errorf("actions = %v, want %v", got, c.acts)
			}
			checkBookkeeping(t, cur, next, acts)
		})
	}
	// Every state meets every event, and Evaluate meets every desired state.
	for _, s := range smStates {
		for _, ev := range []Event{Evaluate{}, Done{}, Fail{}, RetryDue{}, Restart{}, Healthy{}} {
			if key := fmt.Sprintf("%v/%s", s, ev.EventName()); !covered[key] {
				t.Errorf("table has no row for %s", key)
			}
		}
		for _, d := range smDesired {
			if key := fmt.Sprintf("%v/%v/Evaluate", s, d); !covered[key] {
				t.Errorf("table has no row for %s", key)
			}
		}
	}
}

// checkBookkeeping reports whatever a successful Next did wrong to the status.
func checkBookkeeping(t *testing.T, cur, next Status, acts []Action) {
	t.Helper()
	for _, p := range bookkeepingProblems(cur, next, acts) {
		t.Error(p)
	}
}

func bookkeepingProblems(cur, next Status, acts []Action) []string {
	var ps []string
	if !LegalTransition(cur.State, next.State) {
		ps = append(ps, fmt.Sprintf("Next produced the illegal transition %v → %v", cur.State, next.State))
	}
	if next.State != cur.State {
		if next.StateEpoch != cur.StateEpoch+1 || next.Previous != cur.State {
			ps = append(ps, fmt.Sprintf("after %v → %v: epoch %d, previous %v; want %d, %v", cur.State, next.State, next.StateEpoch, next.Previous, cur.StateEpoch+1, cur.State))
		}
	} else if next.StateEpoch != cur.StateEpoch || next.Previous != cur.Previous {
		ps = append(ps, fmt.Sprintf("self-transition changed epoch/previous: %d/%v → %d/%v", cur.StateEpoch, cur.Previous, next.StateEpoch, next.Previous))
	}
	if next.State != StateFailed {
		if next.Error != "" || !next.RetryAt.IsZero() || next.RetryAttempt < 0 {
			ps = append(ps, fmt.Sprintf("%v keeps failure data: %+v", next.State, next))
		}
	} else if next.Error == "" || next.RetryAttempt == 0 {
		ps = append(ps, fmt.Sprintf("FAILED without error or retry attempt: %+v", next))
	}
	changed := !next.equal(cur)
	if changed != (len(acts) > 0 && acts[0].Kind == ActionRecord) {
		ps = append(ps, fmt.Sprintf("status changed = %v but actions = %v (Record must come first exactly when it changed)", changed, acts))
	}
	if slices.ContainsFunc(acts[min(1, len(acts)):], func(a Action) bool { return a.Kind == ActionRecord }) {
		ps = append(ps, fmt.Sprintf("Record appears after other actions: %v", acts))
	}
	return ps
}

func TestFailRecordsFailure(t *testing.T) {
	cur := Status{State: StateMirroring, Previous: StatePreparing, StateEpoch: 4}
	next, acts, err := Next(cur, dMirror, smFailRetryable, smPolicy)
	if err != nil {
		t.Fatal(err)
	}
	want := Status{State: StateFailed, Previous: StateMirroring, StateEpoch: 5, Error: smFailRetryable.Err, RetryAttempt: 1, RetryAt: smT0.Add(time.Second)}
	if !next.equal(want) {
		t.Errorf("status = %+v, want %+v", next, want)
	}
	if len(acts) != 3 || acts[2].Kind != ActionScheduleRetry || !acts[2].At.Equal(want.RetryAt) {
		t.Errorf("actions = %v, want Record, StopFetching, ScheduleRetry(%v)", acts, want.RetryAt)
	}

	next, acts, err = Next(cur, dMirror, smFailFatal, smPolicy)
	if err != nil {
		t.Fatal(err)
	}
	want = Status{State: StateFailed, Previous: StateMirroring, StateEpoch: 5, Error: smFailFatal.Err, RetryAttempt: -1}
	if !next.equal(want) || !slices.Equal(actionKinds(acts), []ActionKind{aRecord, aStopFetch}) {
		t.Errorf("non-retryable: %+v %v, want %+v [Record StopFetching]", next, acts, want)
	}

	next, _, _ = Next(cur, dMirror, Fail{Retryable: true, Now: smT0}, smPolicy)
	if next.Error == "" {
		t.Error("an empty Fail.Err must still leave a message in FAILED")
	}
}

func TestFailWhileFailed(t *testing.T) {
	cur := Status{State: StateFailed, Previous: StateMirroring, StateEpoch: 5, Error: "first", RetryAttempt: 2, RetryAt: smT0.Add(time.Minute)}

	next, acts, err := Next(cur, dMirror, Fail{Err: "second", Retryable: true, Now: smT0}, smPolicy)
	want := cur
	want.Error = "second"
	if err != nil || !next.equal(want) || !slices.Equal(actionKinds(acts), []ActionKind{aRecord}) {
		t.Errorf("retryable: %+v %v %v; want schedule kept, message replaced, [Record]", next, acts, err)
	}

	next, acts, err = Next(cur, dMirror, Fail{Err: "second", Retryable: false, Now: smT0}, smPolicy)
	want.RetryAttempt, want.RetryAt = -1, time.Time{}
	if err != nil || !next.equal(want) || !slices.Equal(actionKinds(acts), []ActionKind{aRecord}) {
		t.Errorf("non-retryable: %+v %v %v; want retry cancelled", next, acts, err)
	}

	// The same failure again changes nothing, so nothing is recorded.
	next, acts, err = Next(cur, dMirror, Fail{Err: "first", Retryable: true, Now: smT0}, smPolicy)
	if err != nil || !next.equal(cur) || acts != nil {
		t.Errorf("repeat: %+v %v %v; want no change", next, acts, err)
	}
}

func TestRetryDueEarlyRearmsTimer(t *testing.T) {
	cur := Status{State: StateFailed, Previous: StateMirroring, StateEpoch: 5, Error: "x", RetryAttempt: 1, RetryAt: smT0.Add(time.Second)}
	next, acts, err := Next(cur, dMirror, RetryDue{Now: smT0}, smPolicy)
	if err != nil || !next.equal(cur) {
		t.Fatalf("early RetryDue: %+v %v", next, err)
	}
	if len(acts) != 1 || acts[0].Kind != ActionScheduleRetry || !acts[0].At.Equal(cur.RetryAt) {
		t.Errorf("actions = %v, want only ScheduleRetry(%v)", acts, cur.RetryAt)
	}
	// Exactly at RetryAt it is due.
	next, _, err = Next(cur, dMirror, RetryDue{Now: cur.RetryAt}, smPolicy)
	if err != nil || next.State != StateMirroring {
		t.Errorf("RetryDue at RetryAt: %+v %v, want MIRRORING", next, err)
	}
	// A zero RetryAt (retry from a zero clock, backoff 0) counts as due.
	cur.RetryAt = time.Time{}
	if next, _, err = Next(cur, dMirror, RetryDue{}, smPolicy); err != nil || next.State != StateMirroring {
		t.Errorf("RetryDue with zero RetryAt: %+v %v", next, err)
	}
}

func TestRetryLeavesFailedCleanlyAndKeepsAttempt(t *testing.T) {
	cur := Status{State: StateFailed, Previous: StatePreparing, StateEpoch: 9, Error: "x", RetryAttempt: 2, RetryAt: smT0}
	next, _, err := Next(cur, dMirror, smDue, smPolicy)
	want := Status{State: StatePreparing, Previous: StateFailed, StateEpoch: 10, RetryAttempt: 2}
	if err != nil || !next.equal(want) {
		t.Errorf("got %+v %v, want %+v", next, err, want)
	}
}

// driveEvents applies events in order and fails the test on any error.
func driveEvents(t *testing.T, st Status, desired Desired, policy RetryPolicy, events ...Event) (Status, []Action) {
	t.Helper()
	var acts []Action
	for _, ev := range events {
		var err error
		st, acts, err = Next(st, desired, ev, policy)
		if err != nil {
			t.Fatalf("%s: %v", ev.EventName(), err)
		}
	}
	return st, acts
}

func TestLifecycleBookkeeping(t *testing.T) {
	type stepCase struct {
		desired Desired
		ev      Event
		state   State
		epoch   int32
		prev    State
	}
	steps := []stepCase{
		{dMirror, Evaluate{}, StatePreparing, 1, StateUnknown},
		{dMirror, Evaluate{}, StatePreparing, 1, StateUnknown}, // self: no bump
		{dMirror, Done{}, StateMirroring, 2, StatePreparing},
		{dMirror, Healthy{}, StateMirroring, 2, StatePreparing},
		{dPause, Evaluate{}, StatePausing, 3, StateMirroring},
		{dPause, Done{}, StatePaused, 4, StatePausing},
		{dMirror, Evaluate{}, StateMirroring, 5, StatePaused},
		{dStop, Evaluate{}, StateStopping, 6, StateMirroring},
		{dStop, Evaluate{}, StateStopping, 6, StateMirroring},
		{dStop, Done{}, StateStopped, 7, StateStopping},
		{dMirror, Restart{}, StatePreparing, 8, StateStopped},
		{dMirror, smFailRetryable, StateFailed, 9, StatePreparing},
		{dMirror, Evaluate{}, StateFailed, 9, StatePreparing},
		{dMirror, RetryDue{Now: smT0.Add(time.Second)}, StatePreparing, 10, StateFailed},
		{dMirror, Done{}, StateMirroring, 11, StatePreparing},
	}
	var st Status
	for i, s := range steps {
		next, acts, err := Next(st, s.desired, s.ev, smPolicy)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.ev.EventName(), err)
		}
		if next.State != s.state || next.StateEpoch != s.epoch || next.Previous != s.prev {
			t.Fatalf("step %d (%s): got %v epoch %d prev %v; want %v epoch %d prev %v",
				i, s.ev.EventName(), next.State, next.StateEpoch, next.Previous, s.state, s.epoch, s.prev)
		}
		checkBookkeeping(t, st, next, acts)
		st = next
	}
	if st.RetryAttempt != 0 {
		t.Errorf("Done after a retry left RetryAttempt %d", st.RetryAttempt)
	}
}

// jitterHalf is a deterministic full-jitter stand-in that remembers its inputs.
type jitterHalf struct{ caps []time.Duration }

func (j *jitterHalf) jitter(d time.Duration) time.Duration {
	j.caps = append(j.caps, d)
	return d / 2
}

func TestRetryBackoffGrowsToCapThenStops(t *testing.T) {
	var j jitterHalf
	policy := RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, MaxAttempts: 6, Jitter: j.jitter}
	st := Status{State: StateMirroring, Previous: StatePreparing, StateEpoch: 1}
	now := smT0
	for attempt := int16(1); attempt <= 6; attempt++ {
		var acts []Action
		st, acts = driveEvents(t, st, dMirror, policy, Fail{Err: "down", Retryable: true, Now: now})
		if st.RetryAttempt != attempt {
			t.Fatalf("failure %d: RetryAttempt = %d", attempt, st.RetryAttempt)
		}
		if last := acts[len(acts)-1]; last.Kind != ActionScheduleRetry || !last.At.Equal(st.RetryAt) {
			t.Fatalf("failure %d: actions %v do not schedule RetryAt %v", attempt, acts, st.RetryAt)
		}
		wait := st.RetryAt.Sub(now)
		now = st.RetryAt
		st, _ = driveEvents(t, st, dMirror, policy, RetryDue{Now: now})
		if st.State != StateMirroring || st.RetryAttempt != attempt {
			t.Fatalf("retry %d: %+v (waited %v)", attempt, st, wait)
		}
	}
	wantCaps := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if !slices.Equal(j.caps, wantCaps) {
		t.Errorf("jitter caps = %v, want %v", j.caps, wantCaps)
	}

	// Failure 7 exceeds MaxAttempts: non-retryable, no timer, RetryDue refused.
	st, acts := driveEvents(t, st, dMirror, policy, Fail{Err: "still down", Retryable: true, Now: now})
	if st.State != StateFailed || st.RetryAttempt != -1 || !st.RetryAt.IsZero() || slices.Contains(actionKinds(acts), aRetry) {
		t.Fatalf("after max attempts: %+v %v", st, acts)
	}
	var ite *IllegalTransitionError
	if _, _, err := Next(st, dMirror, RetryDue{Now: now.Add(time.Hour)}, policy); !errors.As(err, &ite) {
		t.Fatalf("RetryDue on a non-retryable failure: err = %v", err)
	}
	// The operator restarts: fresh budget.
	st, _ = driveEvents(t, st, dMirror, policy, Restart{})
	if st.State != StatePreparing || st.RetryAttempt != 0 || st.Error != "" {
		t.Fatalf("after Restart: %+v", st)
	}
	st, _ = driveEvents(t, st, dMirror, policy, Fail{Err: "again", Retryable: true, Now: now})
	if st.RetryAttempt != 1 {
		t.Errorf("first failure after Restart: RetryAttempt = %d, want 1", st.RetryAttempt)
	}
}

func TestSuccessEndsRetrySequence(t *testing.T) {
	failed := Status{State: StateFailed, Previous: StateMirroring, StateEpoch: 3, Error: "x", RetryAttempt: 2, RetryAt: smT0}

	// MIRRORING proves itself with Healthy.
	st, acts := driveEvents(t, failed, dMirror, smPolicy, smDue, Healthy{})
	if st.RetryAttempt != 0 || !slices.Equal(actionKinds(acts), []ActionKind{aRecord}) {
		t.Errorf("after Healthy: %+v %v", st, acts)
	}
	st, _ = driveEvents(t, st, dMirror, smPolicy, smFailRetryable)
	if st.RetryAttempt != 1 {
		t.Errorf("failure after Healthy counted as attempt %d, want 1", st.RetryAttempt)
	}

	// Without Healthy the next failure is consecutive.
	st, _ = driveEvents(t, failed, dMirror, smPolicy, smDue, smFailRetryable)
	if st.RetryAttempt != 3 {
		t.Errorf("failure right after a retry counted as attempt %d, want 3", st.RetryAttempt)
	}

	// A retried PAUSED goes through MIRRORING and PAUSING; the count survives
	// until PAUSING completes, so a pause that keeps failing escalates.
	pausedFail := Status{State: StateFailed, Previous: StatePausing, StateEpoch: 3, Error: "x", RetryAttempt: 2, RetryAt: smT0}
	st, _ = driveEvents(t, pausedFail, dPause, smPolicy, smDue, Evaluate{}, smFailRetryable)
	if st.RetryAttempt != 3 {
		t.Errorf("PAUSING failing again after a retry: attempt %d, want 3", st.RetryAttempt)
	}
	st, _ = driveEvents(t, pausedFail, dPause, smPolicy, smDue, Evaluate{}, Done{})
	if st.State != StatePaused || st.RetryAttempt != 0 {
		t.Errorf("retried pause completing: %+v, want PAUSED with attempt 0", st)
	}

	// An operator stop out of FAILED starts a new sequence.
	st, _ = driveEvents(t, failed, dStop, smPolicy, Evaluate{})
	if st.State != StateStopping || st.RetryAttempt != 0 {
		t.Errorf("operator stop from FAILED: %+v", st)
	}
}

func TestMaxAttemptsZeroDisablesRetry(t *testing.T) {
	for _, n := range []int16{0, -5} {
		p := smPolicy
		p.MaxAttempts = n
		st, acts := driveEvents(t, Status{State: StateMirroring}, dMirror, p, smFailRetryable)
		if st.RetryAttempt != -1 || slices.Contains(actionKinds(acts), aRetry) {
			t.Errorf("MaxAttempts %d: %+v %v, want non-retryable", n, st, acts)
		}
	}
}

func TestBackoff(t *testing.T) {
	p := RetryPolicy{Initial: 100 * time.Millisecond, Max: 5 * time.Minute}
	for _, tt := range []struct {
		attempt int16
		want    time.Duration
	}{
		{-3, 100 * time.Millisecond}, {0, 100 * time.Millisecond}, {1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond}, {3, 400 * time.Millisecond}, {12, 204800 * time.Millisecond},
		{13, 5 * time.Minute}, {math.MaxInt16, 5 * time.Minute},
	} {
		if got := p.Backoff(tt.attempt); got != tt.want {
			t.Errorf("Backoff(%d) = %v, want %v", tt.attempt, got, tt.want)
		}
	}
	// No cap: saturates instead of overflowing.
	if got := (RetryPolicy{Initial: time.Hour}).Backoff(math.MaxInt16); got != math.MaxInt64 {
		t.Errorf("uncapped Backoff saturates at %v, want MaxInt64", got)
	}
	if got := (RetryPolicy{Initial: 0, Max: time.Second}).Backoff(5); got != 0 {
		t.Errorf("zero Initial: %v", got)
	}
	if got := (RetryPolicy{Initial: -time.Second, Max: time.Second}).Backoff(5); got != 0 {
		t.Errorf("negative Initial: %v", got)
	}
	if got := (RetryPolicy{Initial: time.Minute, Max: time.Second}).Backoff(1); got != time.Second {
		t.Errorf("Max below Initial: %v, want the cap", got)
	}
	// A misbehaving jitter is clamped into [0, cap].
	low := RetryPolicy{Initial: time.Second, Max: time.Minute, Jitter: func(time.Duration) time.Duration { return -time.Hour }}
	high := RetryPolicy{Initial: time.Second, Max: time.Minute, Jitter: func(time.Duration) time.Duration { return time.Hour }}
	if got := low.Backoff(1); got != 0 {
		t.Errorf("negative jitter: %v, want 0", got)
	}
	if got := high.Backoff(2); got != 2*time.Second {
		t.Errorf("oversized jitter: %v, want the 2s cap", got)
	}
}

func TestNextRejectsInvalidInput(t *testing.T) {
	cur := Status{State: StateMirroring, StateEpoch: 3}
	bad := []struct {
		st Status
		d  Desired
		ev Event
	}{
		{Status{State: 8}, dMirror, Evaluate{}},
		{Status{State: -1}, dMirror, smFailRetryable},
		{cur, Desired(3), Evaluate{}},
		{cur, Desired(-1), Evaluate{}},
		{cur, dMirror, nil},
		{cur, dMirror, (*Fail)(nil)},
		{cur, dMirror, (*Evaluate)(nil)},
		{cur, dMirror, (*RetryDue)(nil)},
		{cur, dMirror, (*Done)(nil)},
		{cur, dMirror, (*Restart)(nil)},
		{cur, dMirror, (*Healthy)(nil)},
	}
	for _, b := range bad {
		next, acts, err := Next(b.st, b.d, b.ev, smPolicy)
		if err == nil || !next.equal(b.st) || acts != nil {
			t.Errorf("Next(%+v, %v, %#v) = %+v, %v, %v; want unchanged with an error", b.st, b.d, b.ev, next, acts, err)
		}
		var ite *IllegalTransitionError
		if errors.As(err, &ite) {
			t.Errorf("invalid input reported as an illegal transition: %v", err)
		}
	}
	// Pointer events are accepted like values.
	for _, ev := range []Event{&Evaluate{}, &Done{}, &Fail{Err: "x", Retryable: true, Now: smT0}, &RetryDue{Now: smT0}, &Restart{}, &Healthy{}} {
		valEv := derefEvent(ev)
		for _, s := range smStates {
			c := nextCase{from: s, prev: StateMirroring}
			n1, a1, e1 := Next(c.status(), dPause, ev, smPolicy)
			n2, a2, e2 := Next(c.status(), dPause, valEv, smPolicy)
			if !n1.equal(n2) || !slices.Equal(actionKinds(a1), actionKinds(a2)) || (e1 == nil) != (e2 == nil) {
				t.Errorf("%v/%T: pointer and value events differ", s, ev)
			}
		}
	}
}

func derefEvent(ev Event) Event {
	switch e := ev.(type) {
	case *Evaluate:
		return *e
	case *Done:
		return *e
	case *Fail:
		return *e
	case *RetryDue:
		return *e
	case *Restart:
		return *e
	case *Healthy:
		return *e
	}
	return ev
}

func TestIllegalTransitionErrorMessage(t *testing.T) {
	_, _, err := Next(Status{State: StateMirroring}, dMirror, Restart{}, smPolicy)
	if got := err.Error(); !strings.Contains(got, "MIRRORING → PREPARING") || !strings.Contains(got, "STOPPED or FAILED") {
		t.Errorf("Restart from MIRRORING: %q", got)
	}
	_, _, err = Next(Status{State: StateMirroring}, dMirror, Done{}, smPolicy)
	if got := err.Error(); !strings.Contains(got, "in mirror partition state MIRRORING") || !strings.Contains(got, "Done") {
		t.Errorf("Done in MIRRORING: %q", got)
	}
}

// smEvents returns one of each event, with times around smT0.
func smEvents() []Event {
	return []Event{
		Evaluate{}, Done{}, Healthy{}, Restart{},
		smFailRetryable, smFailFatal, Fail{Retryable: true, Now: smT0},
		smDue, RetryDue{Now: smT0.Add(-time.Second)}, RetryDue{Now: smT0.Add(time.Hour)},
	}
}

// TestNextProperties runs every consistent status through every event and
// checks the invariants: never an illegal transition, Record first exactly on
// change, failure data only in FAILED, determinism, idempotent Evaluate.
func TestNextProperties(t *testing.T) {
	var j jitterHalf
	policy := RetryPolicy{Initial: time.Second, Max: time.Minute, MaxAttempts: 3, Jitter: j.jitter}
	for _, s := range smStates {
		for _, prev := range smStates {
			attempts := []int16{0, 2}
			if s == StateFailed {
				attempts = []int16{-1, 1, 3}
			}
			for _, attempt := range attempts {
				cur := Status{State: s, Previous: prev, StateEpoch: 100, RetryAttempt: attempt}
				if s == StateFailed {
					cur.Error = "boom"
					if attempt > 0 {
						cur.RetryAt = smT0
					}
				}
				for _, d := range smDesired {
					for _, ev := range smEvents() {
						name := fmt.Sprintf("%+v/%v/%#v", cur, d, ev)
						next, acts, err := Next(cur, d, ev, policy)
						next2, acts2, err2 := Next(cur, d, ev, policy)
						if !next.equal(next2) || !slices.EqualFunc(acts, acts2, func(a, b Action) bool { return a.Kind == b.Kind && a.At.Equal(b.At) }) || (err == nil) != (err2 == nil) {
							t.Fatalf("%s: not deterministic", name)
						}
						if err != nil {
							var ite *IllegalTransitionError
							if !errors.As(err, &ite) {
								t.Errorf("%s: error %v is not an *IllegalTransitionError", name, err)
							}
							continue
						}
						for _, p := range bookkeepingProblems(cur, next, acts) {
							t.Errorf("%s: %s", name, p)
						}
						if next.State == StateFailed && next.RetryAttempt > policy.MaxAttempts {
							t.Errorf("%s: RetryAttempt %d exceeds MaxAttempts", name, next.RetryAttempt)
						}
						e1, a1, _ := Next(next, d, Evaluate{}, policy)
						e2, a2, _ := Next(e1, d, Evaluate{}, policy)
						if !e2.equal(e1) || a2 != nil {
							t.Errorf("%s: Evaluate not idempotent: %v %v then %v %v", name, e1.State, actionKinds(a1), e2.State, actionKinds(a2))
						}
					}
				}
			}
		}
	}
}

// TestShellConverges plays a minimal shell (Evaluate after every change; report
// Done for finite work; let retries come due) and checks that every state ends
// in the one the desired state asks for.
func TestShellConverges(t *testing.T) {
	target := map[Desired]State{dMirror: StateMirroring, dPause: StatePaused, dStop: StateStopped}
	for _, s := range smStates {
		for _, prev := range smStates {
			for _, d := range smDesired {
				st := Status{State: s, Previous: prev}
				if s == StateFailed {
					st.Error, st.RetryAttempt, st.RetryAt = "x", 1, smT0
				}
				want := target[d]
				if s == StateUnknown && d == dStop {
					want = StateUnknown // nothing was ever started; nothing to stop
				}
				for range 10 {
					var ev Event = Evaluate{}
					if next, _, _ := Next(st, d, ev, smPolicy); next.State != st.State {
						st = next
						continue
					}
					switch st.State {
					case StatePreparing, StatePausing, StateStopping:
						ev = Done{}
					case StateFailed:
						ev = RetryDue{Now: st.RetryAt}
					default:
						ev = nil
					}
					if ev == nil {
						break
					}
					next, _, err := Next(st, d, ev, smPolicy)
					if err != nil {
						t.Fatalf("%v(prev %v)/%v: %v", s, prev, d, err)
					}
					st = next
				}
				if st.State != want {
					t.Errorf("%v(prev %v) with desired %v settled in %v, want %v", s, prev, d, st.State, want)
				}
			}
		}
	}
}

// TestNextNeverPanics feeds every int8 state and previous state, odd desired
// values, extreme counters and times.
func TestNextNeverPanics(t *testing.T) {
	policies := []RetryPolicy{
		{},
		{Initial: math.MaxInt64, Max: -1, MaxAttempts: math.MaxInt16},
		{Initial: -1, Max: math.MinInt64, MaxAttempts: -1},
	}
	events := append(smEvents(), Fail{Retryable: true, Now: time.Unix(math.MaxInt64/4, 0)})
	for s := math.MinInt8; s <= math.MaxInt8; s++ {
		for _, prev := range []State{State(s), StateUnknown, StateFailed, 100} {
			for _, attempt := range []int16{math.MinInt16, -1, 0, 1, math.MaxInt16} {
				cur := Status{State: State(s), Previous: prev, StateEpoch: math.MaxInt32, RetryAttempt: attempt}
				for _, d := range []Desired{-1, dMirror, dPause, dStop, 3} {
					for _, ev := range events {
						for _, p := range policies {
							Next(cur, d, ev, p)
						}
					}
				}
				ResumeActions(cur)
			}
		}
	}
}

func TestResumeActions(t *testing.T) {
	for _, tt := range []struct {
		st   Status
		want []Action
	}{
		{Status{State: StateUnknown}, nil},
		{Status{State: StatePreparing}, []Action{{Kind: aPrepare}}},
		{Status{State: StateMirroring}, []Action{{Kind: aStartFetch}}},
		{Status{State: StatePausing}, []Action{{Kind: aStopFetch}}},
		{Status{State: StatePaused}, nil},
		{Status{State: StateStopping}, []Action{{Kind: aStop}}},
		{Status{State: StateStopped}, nil},
		{Status{State: StateFailed, RetryAttempt: 2, RetryAt: smT0}, []Action{{Kind: aRetry, At: smT0}}},
		{Status{State: StateFailed, RetryAttempt: -1}, nil},
		{Status{State: 42}, nil},
	} {
		got := ResumeActions(tt.st)
		if !slices.EqualFunc(got, tt.want, func(a, b Action) bool { return a.Kind == b.Kind && a.At.Equal(b.At) }) {
			t.Errorf("ResumeActions(%v) = %v, want %v", tt.st.State, got, tt.want)
		}
	}
}

func TestActionStrings(t *testing.T) {
	for k, want := range map[ActionKind]string{aRecord: "Record", aPrepare: "Prepare", aStartFetch: "StartFetching", aStopFetch: "StopFetching", aStop: "Stop", aRetry: "ScheduleRetry", 0: "ActionKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", k, got, want)
		}
	}
	if got := (Action{Kind: aRetry, At: smT0}).String(); got != "ScheduleRetry(2026-04-15T12:00:00Z)" {
		t.Errorf("Action.String() = %q", got)
	}
}

func FuzzNext(f *testing.F) {
	f.Add(int8(2), int8(1), int16(0), int8(0), uint8(2), true, int64(0), "boom")
	f.Add(int8(7), int8(5), int16(3), int8(2), uint8(3), false, int64(-1), "")
	f.Add(int8(-100), int8(100), int16(-32768), int8(9), uint8(255), true, int64(math.MaxInt64), "x")
	f.Fuzz(func(t *testing.T, state, prev int8, attempt int16, desired int8, kind uint8, retryable bool, offset int64, msg string) {
		cur := Status{State: State(state), Previous: State(prev), RetryAttempt: attempt, Error: msg, RetryAt: smT0}
		now := smT0.Add(time.Duration(offset))
		evs := []Event{Evaluate{}, Done{}, Fail{Err: msg, Retryable: retryable, Now: now}, RetryDue{Now: now}, Restart{}, Healthy{}, nil}
		ev := evs[int(kind)%len(evs)]
		next, acts, err := Next(cur, Desired(desired), ev, RetryPolicy{Initial: time.Millisecond, Max: time.Second, MaxAttempts: 5})
		if err != nil {
			if !next.equal(cur) || acts != nil {
				t.Fatalf("error %v but status changed or actions returned", err)
			}
			return
		}
		if !LegalTransition(cur.State, next.State) {
			t.Fatalf("illegal transition %v → %v", cur.State, next.State)
		}
		if changed := !next.equal(cur); changed != (len(acts) > 0 && acts[0].Kind == ActionRecord) {
			t.Fatalf("changed %v, actions %v", changed, acts)
		}
	})
}

func FuzzMirrorName(f *testing.F) {
	for _, s := range []string{"m", "a.paused.paused", "x.removed", ".", "..", "", "é", strings.Repeat("a", 250)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		m, d := ParseMirrorName(value)
		if FormatMirrorName(m, d) != value {
			t.Fatalf("Format(Parse(%q)) = %q", value, FormatMirrorName(m, d))
		}
		if ValidateMirrorName(value) == nil {
			// A valid mirror name never reads back as a suffixed value.
			if m != value || d != DesiredMirroring {
				t.Fatalf("valid name %q parsed as %q, %v", value, m, d)
			}
		}
	})
}
