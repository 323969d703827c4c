package kip

import "fmt"

// The topic commands of the KIP's admin API (StartMirrorTopics, ...), by the names the
// worker's API uses in its paths.
const (
	CommandStart  = "start"
	CommandStop   = "stop"
	CommandPause  = "pause"
	CommandResume = "resume"
)

// ChangeProblem returns why a topic's desired state may not change from → to, or "" when
// the change is legal. current is the topic's partition states. Per KIP-1279: mirroring
// and paused go both ways and to stopped; stopped → mirroring is a restart (a failback
// when the mirror points the other way); a stopped topic cannot be paused; a topic whose
// partitions are still STOPPING cannot be paused. Keeping a state is no change and legal
// here, although the stop command refuses a repeat (MIRROR_TOPIC_ALREADY_STOPPED).
func ChangeProblem(from, to string, current []string) string {
	switch {
	case from == to:
		return ""
	case from == DesiredStopped && to == DesiredPaused:
		return `a stopped topic cannot be paused; set state = "mirroring" first to restart it`
	case to == DesiredPaused:
		for _, s := range current {
			if s == StateStopping {
				return "the topic is being stopped (a partition is STOPPING); it cannot be paused"
			}
		}
	}
	return ""
}

// LegalChanges lists the desired states `from` may change to, besides staying, with what
// each change does: `"paused" (pause: ...)`.
func LegalChanges(from string, current []string) []string {
	var out []string
	for _, to := range DesiredStates {
		if to != from && ChangeProblem(from, to, current) == "" {
			out = append(out, fmt.Sprintf("%q (%s)", to, ChangeEffect(from, to)))
		}
	}
	return out
}

// Command is the command that changes a topic's desired state from → to: start for a
// first start, for a restart of a stopped topic, and for mirroring → mirroring (it
// restarts FAILED partitions); otherwise CommandTo(to).
func Command(from, to string) string {
	if to == DesiredMirroring && from != DesiredPaused {
		return CommandStart
	}
	return CommandTo(to)
}

// CommandTo is the command that sets desired state `to` on a topic that is mirroring or
// paused: stop, pause or resume.
func CommandTo(to string) string {
	switch to {
	case DesiredStopped:
		return CommandStop
	case DesiredPaused:
		return CommandPause
	}
	return CommandResume
}

// ChangeEffect names what a legal change does.
func ChangeEffect(from, to string) string {
	switch Command(from, to) {
	case CommandStop:
		return "failover: stop mirroring, the destination topic becomes writable"
	case CommandPause:
		return "pause: stop copying, the destination stays read-only"
	case CommandResume:
		return "resume"
	}
	if from == DesiredStopped {
		return "restart, or failback when the mirror points the other way"
	}
	return "start"
}
