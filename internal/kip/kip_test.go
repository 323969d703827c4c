package kip

import (
	"strings"
	"testing"
)

// TestChanges is the KIP's desired-state table: which changes are legal, why the others are
// not, what the legal ones do and which command each sends.
func TestChanges(t *testing.T) {
	const (
		m = DesiredMirroring
		p = DesiredPaused
		s = DesiredStopped
	)
	type want struct {
		ok      bool
		reason  string
		legal   string // LegalChanges, joined, for the illegal ones
		command string // for the legal ones
	}
	matrix := map[[2]string]want{
		{m, m}: {ok: true, command: CommandStart}, // restarts FAILED partitions
		{m, p}: {ok: true, command: CommandPause},
		{m, s}: {ok: true, command: CommandStop},
		{p, m}: {ok: true, command: CommandResume},
		{p, p}: {ok: true, command: CommandPause},
		{p, s}: {ok: true, command: CommandStop},
		{s, m}: {ok: true, command: CommandStart}, // restart, or failback
		{s, p}: {reason: "a stopped topic cannot be paused", legal: `"mirroring" (restart, or failback when the mirror points the other way)`},
		{s, s}: {ok: true, command: CommandStop}, // no change
	}
	// Whatever the partitions' states, except STOPPING (below).
	for _, current := range [][]string{nil, {StateMirroring}, {StatePaused, StateFailed}, {StateStopped}, {StatePreparing}} {
		for key, w := range matrix {
			got := ChangeProblem(key[0], key[1], current)
			if (got == "") != w.ok || !strings.Contains(got, w.reason) {
				t.Errorf("%s → %s with partitions %v: problem %q, want ok=%v reason %q", key[0], key[1], current, got, w.ok, w.reason)
			}
			if !w.ok {
				if legal := strings.Join(LegalChanges(key[0], current), "; "); legal != w.legal {
					t.Errorf("%s → %s: legal changes %q, want %q", key[0], key[1], legal, w.legal)
				}
			} else if c := Command(key[0], key[1]); c != w.command {
				t.Errorf("%s → %s: command %q, want %q", key[0], key[1], c, w.command)
			}
		}
	}
	// A partition still STOPPING cannot be paused.
	stopping := []string{StateMirroring, StateStopping}
	if got := ChangeProblem(m, p, stopping); !strings.Contains(got, "STOPPING") {
		t.Errorf("mirroring → paused while STOPPING: %q", got)
	}
	if got := ChangeProblem(m, s, stopping); got != "" {
		t.Errorf("mirroring → stopped while STOPPING: %q", got)
	}
	if got := strings.Join(LegalChanges(m, stopping), "; "); strings.Contains(got, `"paused"`) || !strings.Contains(got, `"stopped" (failover`) {
		t.Errorf("legal changes from mirroring while STOPPING: %q", got)
	}
	for to, want := range map[string]string{m: CommandResume, p: CommandPause, s: CommandStop} {
		if got := CommandTo(to); got != want {
			t.Errorf("CommandTo(%s) = %q, want %q", to, got, want)
		}
	}
	for desired, want := range map[string]string{m: StateMirroring, p: StatePaused, s: StateStopped} {
		if got := TargetState(desired); got != want {
			t.Errorf("TargetState(%s) = %q, want %q", desired, got, want)
		}
	}
}

func TestMirrorNameValues(t *testing.T) {
	for _, tt := range []struct{ value, mirror, desired string }{
		{"m", "m", DesiredMirroring},
		{"m.paused", "m", DesiredPaused},
		{"m.removed", "m", DesiredStopped},
		{"a.paused.paused", "a.paused", DesiredPaused}, // one suffix, from the right
		{"a.removed.paused", "a.removed", DesiredPaused},
		{"a.paused.b", "a.paused.b", DesiredMirroring},
		{".removed", "", DesiredStopped},
	} {
		if m, d := ParseMirrorName(tt.value); m != tt.mirror || d != tt.desired {
			t.Errorf("ParseMirrorName(%q) = %q, %q; want %q, %q", tt.value, m, d, tt.mirror, tt.desired)
		}
	}
	if got := FormatMirrorName("m", "bogus"); got != "m" {
		t.Errorf("FormatMirrorName(m, bogus) = %q", got)
	}
	// Round trip for every valid name shape, including names with a suffix word inside.
	for _, m := range []string{"m", "a.paused.b", "x.removedy", strings.Repeat("z", MaxNameLen), "..."} {
		if p := MirrorNameProblem(m); p != "" {
			t.Fatalf("precondition: %s", p)
		}
		for _, d := range DesiredStates {
			if gm, gd := ParseMirrorName(FormatMirrorName(m, d)); gm != m || gd != d {
				t.Errorf("round trip of %q, %s gave %q, %s", m, d, gm, gd)
			}
		}
	}
}

func TestNameRules(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen)
	for _, ok := range []string{"m", "eu-to-us", "A-Z.a-z_0-9", "a.paused.b", "a.pausedx", "x.removedy", "paused", long, "..."} {
		if p := MirrorNameProblem(ok); p != "" {
			t.Errorf("mirror name %.20q: %s", ok, p)
		}
	}
	for _, tt := range []struct{ name, reason string }{
		{"", "must not be empty"},
		{".", `must not be "." or ".."`},
		{"..", `must not be "." or ".."`},
		{long + "a", "is 250 characters long; at most 249 are allowed"},
		{long + "/", "is 250 characters long"}, // length is reported before characters
		{"eu to us", "contains ' ' at position 2"},
		{"a/b", "contains '/'"},
		{"ü", "contains 'ü' at position 0"},
		{"a\x00", `contains '\x00'`},
		{"m.paused", `must not end in ".paused"`},
		{"m.removed", `must not end in ".removed"`},
		{"a.removed.paused", `must not end in ".paused"`},
		{strings.Repeat("a", MaxNameLen-len(".removed")) + ".removed", `must not end in ".removed"`},
	} {
		if p := MirrorNameProblem(tt.name); p == "" || !strings.Contains(p, tt.reason) {
			t.Errorf("mirror name %.20q: problem %q, want %q", tt.name, p, tt.reason)
		}
	}
	// Topic names follow the same rules without the suffix rule.
	if p := TopicNameProblem("orders.paused"); p != "" {
		t.Errorf("topic orders.paused: %s", p)
	}
	if p := TopicNameProblem("orders/eu"); !strings.Contains(p, "'/'") {
		t.Errorf("topic orders/eu: %q", p)
	}
}

func TestHTTPStatus(t *testing.T) {
	for code, want := range map[string]int{
		CodeUnknownClusterMirror:        404,
		CodeTopicNotInClusterMirror:     404,
		CodeUnknownTopicOrPartition:     404,
		CodeClusterMirrorAlreadyExists:  409,
		CodeClusterMirrorNotEmpty:       409,
		CodeTopicAlreadyInClusterMirror: 409,
		CodeMirrorTopicAlreadyStopped:   409,
		CodeSourceClusterIDMismatch:     409,
		CodeMirrorTopicOwnerMismatch:    409,
		CodeSaslAuthenticationFailed:    400,
		CodeInvalidClusterMirrorName:    400,
		CodeInvalidClusterMirrorConfig:  400,
		CodeInvalidMirrorPartitionState: 400,
		CodeInvalidTopic:                400,
		CodeInvalidRequest:              400,
		CodeAuthenticationFailed:        401,
		CodeSourceClusterUnreachable:    502,
		CodeClusterAuthorizationFailed:  502,
		CodeCoordinatorLoadInProgress:   503,
		CodeCoordinatorNotAvailable:     503,
		CodeRequestTimedOut:             504,
		CodeUnknownServerError:          500,
		"INVALID_SOMETHING_NEW":         400,
		"SOMETHING_NEW":                 500,
	} {
		if got := HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", code, got, want)
		}
	}
}
