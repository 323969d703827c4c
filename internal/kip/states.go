package kip

import (
	"fmt"
	"strings"
)

// The partition states, with the KIP's names (April-era revision).
const (
	StateUnknown   = "UNKNOWN"
	StatePreparing = "PREPARING"
	StateMirroring = "MIRRORING"
	StatePausing   = "PAUSING"
	StatePaused    = "PAUSED"
	StateStopping  = "STOPPING"
	StateStopped   = "STOPPED"
	StateFailed    = "FAILED"
)

// States lists the partition states in the KIP's order.
var States = []string{StateUnknown, StatePreparing, StateMirroring, StatePausing, StatePaused, StateStopping, StateStopped, StateFailed}

// The desired states of a mirrored topic, carried by its mirror.name suffix; they are the
// Terraform `state` values and the API's desired_state.
const (
	DesiredMirroring = "mirroring"
	DesiredPaused    = "paused"
	DesiredStopped   = "stopped"
)

// DesiredStates lists the desired states in the KIP's order.
var DesiredStates = []string{DesiredMirroring, DesiredPaused, DesiredStopped}

// TargetState is the partition state every partition reaches once a desired state is
// applied.
func TargetState(desired string) string {
	switch desired {
	case DesiredPaused:
		return StatePaused
	case DesiredStopped:
		return StateStopped
	}
	return StateMirroring
}

// The mirror.name suffixes that carry the desired state.
const (
	PausedSuffix  = ".paused"
	RemovedSuffix = ".removed"
)

// ParseMirrorName splits a mirror.name value into the mirror name and the desired state.
// Only one suffix is removed, from the right, as the KIP specifies: "a.paused.paused" is
// mirror "a.paused", paused. The mirror name is not validated.
func ParseMirrorName(value string) (mirror, desired string) {
	if m, ok := strings.CutSuffix(value, PausedSuffix); ok {
		return m, DesiredPaused
	}
	if m, ok := strings.CutSuffix(value, RemovedSuffix); ok {
		return m, DesiredStopped
	}
	return value, DesiredMirroring
}

// FormatMirrorName returns the mirror.name value for a mirror and a desired state: "m",
// "m.paused" or "m.removed". Any other desired value yields the plain name.
func FormatMirrorName(mirror, desired string) string {
	switch desired {
	case DesiredPaused:
		return mirror + PausedSuffix
	case DesiredStopped:
		return mirror + RemovedSuffix
	}
	return mirror
}

// MaxNameLen is Kafka's topic-name limit, which mirror names follow.
const MaxNameLen = 249

// TopicNameProblem returns why name is not a legal Kafka topic name, or "": 1 to 249
// characters of [a-zA-Z0-9._-], not "." or "..".
func TopicNameProblem(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("is %d characters long; at most %d are allowed", len(name), MaxNameLen)
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

// MirrorNameProblem returns why name is not a legal cluster mirror name, or "": Kafka's
// topic-name rules, and no ".paused" or ".removed" ending, since mirror.name would read
// such an ending back as a desired state.
func MirrorNameProblem(name string) string {
	if p := TopicNameProblem(name); p != "" {
		return p
	}
	for _, suffix := range [...]string{PausedSuffix, RemovedSuffix} {
		if strings.HasSuffix(name, suffix) {
			return fmt.Sprintf("must not end in %q, which mirror.name uses to mark the desired state", suffix)
		}
	}
	return ""
}
