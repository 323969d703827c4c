package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// The polling back-off of waitForPartitions: the first poll is quick because most state
// changes take well under a second; later polls slow down to spare the worker.
var (
	pollInitial = 100 * time.Millisecond
	pollMax     = 2 * time.Second
	// stuckAfter is how long a not-retried FAILED partition must stay so before a wait
	// gives up early.
	stuckAfter = 3 * time.Second
)

// waitError is a wait that did not end with every partition in the target state. Last is
// the last description, for the state the caller saves.
type waitError struct {
	Mirror, Topic, Target string
	Timeout               time.Duration
	// Operation is "create", "update" or "delete": which of the timeouts applies.
	Operation string
	Last      *api.Topic
	// NotRetryable is set when a partition FAILED with a failure that waits for the
	// operator: waiting longer cannot help.
	NotRetryable bool
	Cause        error
}

func (e *waitError) Error() string {
	var parts string
	if e.Last != nil {
		parts = "\n\nPartitions:\n" + describePartitions(e.Last.Partitions)
	}
	switch {
	case e.NotRetryable:
		return fmt.Sprintf("Topic %q of cluster mirror %q cannot reach %s: a partition FAILED with an error the worker does not retry "+
			"(it waits for the operator).%s\n\nFix the cause and apply again: the provider then restarts the failed partitions.",
			e.Topic, e.Mirror, e.Target, parts)
	case e.Cause != nil && !errors.Is(e.Cause, context.DeadlineExceeded):
		return fmt.Sprintf("Waiting for topic %q of cluster mirror %q to reach %s failed: %v%s", e.Topic, e.Mirror, e.Target, e.Cause, parts)
	}
	raise := "a longer timeout"
	if e.Operation != "" {
		raise = "timeouts." + e.Operation
	}
	return fmt.Sprintf("Topic %q of cluster mirror %q did not reach %s on every partition within %v.%s\n\n"+
		"The command was accepted; the worker keeps working on it. If the topic needs longer, raise %s.",
		e.Topic, e.Mirror, e.Target, e.Timeout, parts, raise)
}

// waitForPartitions polls the topic's description, with back-off, until every partition is
// in target (a KIP state name) or the deadline passes. It returns early when a partition
// has FAILED with a failure that is not retried. op ("create", "update", "delete") and
// timeout (the whole operation's) are for the error message.
func waitForPartitions(ctx context.Context, client *api.Client, mirror, topic, target string, deadline time.Time, op string, timeout time.Duration) (*api.Topic, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	delay := pollInitial
	var last *api.Topic
	var stuckSince time.Time
	for attempt := 1; ; attempt++ {
		t, err := client.GetTopic(ctx, mirror, topic)
		if err == nil {
			last = t
			done, stuck := reached(t.Partitions, target)
			tflog.Trace(ctx, "polled mirror topic", map[string]any{"attempt": attempt, "target": target, "done": done})
			if done {
				return t, nil
			}
			// A partition's state lags the command a little (the runner applies it
			// asynchronously), so a failure counts as stuck only once it has stayed a while.
			switch {
			case !stuck:
				stuckSince = time.Time{}
			case stuckSince.IsZero():
				stuckSince = time.Now()
			case time.Since(stuckSince) >= stuckAfter:
				return t, &waitError{Mirror: mirror, Topic: topic, Target: target, Timeout: timeout, Operation: op, Last: t, NotRetryable: true}
			}
		} else if ctx.Err() == nil {
			var ae *api.Error
			if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 {
				// A refusal (the topic or mirror vanished, a wrong token): polling cannot fix it.
				return last, &waitError{Mirror: mirror, Topic: topic, Target: target, Timeout: timeout, Operation: op, Last: last, Cause: err}
			}
			tflog.Debug(ctx, "describing the mirror topic failed; polling again", map[string]any{"error": err.Error()})
		}
		select {
		case <-ctx.Done():
			return last, &waitError{Mirror: mirror, Topic: topic, Target: target, Timeout: timeout, Operation: op, Last: last, Cause: ctx.Err()}
		case <-time.After(delay):
		}
		delay = min(delay*3/2, pollMax)
	}
}

// reached reports whether every partition is in target, and whether one is stuck: FAILED
// with a failure the worker does not retry.
func reached(ps []api.Partition, target string) (done, stuck bool) {
	if len(ps) == 0 {
		return false, false
	}
	done = true
	for _, p := range ps {
		if p.State != target {
			done = false
		}
		// A stop proceeds from FAILED, so only waits for MIRRORING or PAUSED get stuck.
		if p.State == api.StateFailed && p.RetryAttempt < 0 && target != api.StateStopped {
			stuck = true
		}
	}
	return done, stuck
}
