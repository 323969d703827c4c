package provider

import (
	"strings"
	"testing"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// TestTransitionTable pins the provider's copy of the KIP's desired-state rules to the
// same matrix as internal/mirrorengine's TestLegalDesiredChange (see rules.go for why the
// table is duplicated). The one difference is stopped → stopped: the engine refuses a
// repeated stop command, while in Terraform keeping "stopped" is simply no change.
func TestTransitionTable(t *testing.T) {
	const (
		m = api.DesiredMirroring
		p = api.DesiredPaused
		s = api.DesiredStopped
	)
	type want struct {
		ok     bool
		reason string
		legal  string // legalTargets, joined, for the illegal ones
	}
	matrix := map[[2]string]want{
		{m, m}: {ok: true},
		{m, p}: {ok: true},
		{m, s}: {ok: true},
		{p, m}: {ok: true},
		{p, p}: {ok: true},
		{p, s}: {ok: true},
		{s, m}: {ok: true}, // restart, or failback
		{s, p}: {reason: "a stopped topic cannot be paused", legal: `"mirroring" (restart, or failback when the mirror points the other way)`},
		{s, s}: {ok: true}, // no change
	}
	// Whatever the partitions' states, except STOPPING (below).
	for _, current := range [][]string{nil, {api.StateMirroring}, {api.StatePaused, api.StateFailed}, {api.StateStopped}, {api.StatePreparing}} {
		for key, w := range matrix {
			got := transitionProblem(key[0], key[1], current)
			if (got == "") != w.ok || !strings.Contains(got, w.reason) {
				t.Errorf("%s → %s with partitions %v: problem %q, want ok=%v reason %q", key[0], key[1], current, got, w.ok, w.reason)
			}
			if !w.ok {
				if legal := strings.Join(legalTargets(key[0], current), "; "); legal != w.legal {
					t.Errorf("%s → %s: legal targets %q, want %q", key[0], key[1], legal, w.legal)
				}
			}
		}
	}
	// A partition still STOPPING cannot be paused.
	stopping := []string{api.StateMirroring, api.StateStopping}
	if got := transitionProblem(m, p, stopping); !strings.Contains(got, "STOPPING") {
		t.Errorf("mirroring → paused while STOPPING: %q", got)
	}
	if got := transitionProblem(m, s, stopping); got != "" {
		t.Errorf("mirroring → stopped while STOPPING: %q", got)
	}
	if got := strings.Join(legalTargets(m, stopping), "; "); strings.Contains(got, `"paused"`) || !strings.Contains(got, `"stopped" (failover`) {
		t.Errorf("legal targets from mirroring while STOPPING: %q", got)
	}
}

func TestMirrorNameRules(t *testing.T) {
	for _, ok := range []string{"m", "eu-to-us", "a.paused.b", "x.removedy", "Mirror_1", strings.Repeat("z", 249), "..."} {
		if p := mirrorNameProblem(ok); p != "" {
			t.Errorf("%q: %s", ok, p)
		}
	}
	for name, reason := range map[string]string{
		"":                       "must not be empty",
		".":                      `must not be "." or ".."`,
		"..":                     `must not be "." or ".."`,
		"eu to us":               "contains ' ' at position 2",
		"ü":                      "contains 'ü' at position 0",
		"m.paused":               `must not end in ".paused"`,
		"m.removed":              `must not end in ".removed"`,
		strings.Repeat("a", 250): "is 250 characters long; at most 249 are allowed",
	} {
		if p := mirrorNameProblem(name); !strings.Contains(p, reason) || p == "" {
			t.Errorf("%.20q: problem %q, want %q", name, p, reason)
		}
	}
	// Topic names follow the same rules without the suffix rule.
	if p := topicNameProblem("orders.paused"); p != "" {
		t.Errorf("topic orders.paused: %s", p)
	}
	if p := topicNameProblem("orders/eu"); !strings.Contains(p, "'/'") {
		t.Errorf("topic orders/eu: %q", p)
	}
}

func TestMirrorNameValue(t *testing.T) {
	for desired, want := range map[string]string{
		api.DesiredMirroring: "m", api.DesiredPaused: "m.paused", api.DesiredStopped: "m.removed",
	} {
		if got := mirrorNameValue("m", desired); got != want {
			t.Errorf("%s: %q, want %q", desired, got, want)
		}
	}
}
