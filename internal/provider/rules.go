package provider

// The KIP-1279 rules the provider checks at plan time, before the worker is asked.
//
// DUPLICATION, on purpose: the provider must not import internal/mirrorengine (DESIGN.md:
// provider → api only), so the name rules of mirrorengine.ValidateMirrorName and the
// desired-state table of mirrorengine.LegalDesiredChange are re-implemented here. The
// worker applies the engine's versions again on every command, so a drift between the two
// can only make a plan pass that the apply then refuses, never the other way round. When
// one of them changes, change both (rules_test.go pins this copy to the same matrix as the
// engine's TestLegalDesiredChange).

import (
	"fmt"
	"strings"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// maxNameLen is Kafka's topic-name limit, which mirror names follow.
const maxNameLen = 249

// The suffixes mirror.name uses to mark the desired state.
const (
	pausedSuffix  = ".paused"
	removedSuffix = ".removed"
)

// topicNameProblem returns why name is not a legal Kafka topic name, or "".
func topicNameProblem(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > maxNameLen:
		return fmt.Sprintf("is %d characters long; at most %d are allowed", len(name), maxNameLen)
	case name == "." || name == "..":
		return `must not be "." or ".."`
	}
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("contains %q at position %d; only ASCII letters, digits, '.', '_' and '-' are allowed", r, i)
		}
	}
	return ""
}

// mirrorNameProblem returns why name is not a legal cluster mirror name, or "": Kafka's
// topic-name rules, and no ".paused" or ".removed" suffix (mirror.name uses those).
func mirrorNameProblem(name string) string {
	if p := topicNameProblem(name); p != "" {
		return p
	}
	for _, suffix := range []string{pausedSuffix, removedSuffix} {
		if strings.HasSuffix(name, suffix) {
			return fmt.Sprintf("must not end in %q, which mirror.name uses to mark the desired state", suffix)
		}
	}
	return ""
}

// desiredStates are the values of kafkamirror_mirror_topic.state, in the KIP's order.
var desiredStates = []string{api.DesiredMirroring, api.DesiredPaused, api.DesiredStopped}

// mirrorNameValue is the KIP's mirror.name value for a desired state.
func mirrorNameValue(mirror, desired string) string {
	switch desired {
	case api.DesiredPaused:
		return mirror + pausedSuffix
	case api.DesiredStopped:
		return mirror + removedSuffix
	}
	return mirror
}

// transitionProblem returns why the desired state may not change from → to, or "" when the
// change is legal. current is the partitions' states (KIP names). Per KIP-1279: mirroring
// and paused go both ways and to stopped; stopped → mirroring is a restart (a failback when
// the mirror points the other way); a stopped topic cannot be paused; a topic whose
// partitions are still STOPPING cannot be paused. Keeping a state is a no-op (Terraform
// plans no change), so stopped → stopped is not reported here although the worker's stop
// command refuses a repeat.
func transitionProblem(from, to string, current []string) string {
	switch {
	case from == to:
		return ""
	case from == api.DesiredStopped && to == api.DesiredPaused:
		return `a stopped topic cannot be paused; set state = "mirroring" first to restart it`
	case to == api.DesiredPaused:
		for _, s := range current {
			if s == api.StateStopping {
				return "the topic is being stopped (a partition is STOPPING); it cannot be paused"
			}
		}
	}
	return ""
}

// legalTargets lists the states the desired state may change to from `from`, besides
// staying, with what each change does.
func legalTargets(from string, current []string) []string {
	var out []string
	for _, to := range desiredStates {
		if to != from && transitionProblem(from, to, current) == "" {
			out = append(out, fmt.Sprintf("%q (%s)", to, transitionVerb(from, to)))
		}
	}
	return out
}

// transitionVerb names what a legal change does.
func transitionVerb(from, to string) string {
	switch {
	case to == api.DesiredStopped:
		return "failover: stop mirroring, the destination topic becomes writable"
	case to == api.DesiredPaused:
		return "pause: stop copying, the destination stays read-only"
	case from == api.DesiredPaused:
		return "resume"
	case from == api.DesiredStopped:
		return "restart, or failback when the mirror points the other way"
	}
	return "start"
}

// targetPartitionState is the partition state every partition reaches once a desired
// state is applied.
func targetPartitionState(desired string) string {
	switch desired {
	case api.DesiredPaused:
		return api.StatePaused
	case api.DesiredStopped:
		return api.StateStopped
	}
	return api.StateMirroring
}
