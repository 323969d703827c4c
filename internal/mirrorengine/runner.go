package mirrorengine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// runner is the imperative shell around one partition's state machine: it feeds events to
// Next, records every new status in __mirror_state before acting on it, and performs the
// actions (prepare, fetch, stop, retry timers).
type runner struct {
	e   *Engine
	key partitionKey
	log *slog.Logger

	events chan partitionstate.Event
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status partitionstate.Status
	// held is set when the status stands for a record that cannot be read: only a command
	// moves it, since the record may have said STOPPED, which a STOPPING of its own accord
	// would undo (its last mirrored offset would take in what was written since).
	held bool

	// The running partition mirror, while fetching, and the state epoch it started in.
	mirror      *datapath.PartitionMirror
	mirrorEpoch int32
	stopMirror  context.CancelFunc
	mirrorDone  chan struct{}
	// lastEpoch is the source leader epoch of the last batch this runner's mirrors copied,
	// -1 if unknown: the next mirror checks the source's lineage from it, and STOPPING
	// records it as the last mirrored epoch.
	lastEpoch int32
	// liftedAtStop: the last stop lifted the topic's read-only ACL itself (this partition
	// was its last one mirrored), so recording STOPPED need not look again.
	liftedAtStop bool
	// failingSince is when its sessions began to fail (zero while one runs), sessionErr
	// the latest failure: a MIRRORING partition that cannot reach a cluster stays MIRRORING
	// (its sessions retry at once), and these say it is stalled.
	failingSince time.Time
	sessionErr   string
	retry        *time.Timer
}

// newRunner makes the runner of k, which runs until parent ends or close.
func newRunner(parent context.Context, e *Engine, k partitionKey) *runner {
	ctx, cancel := context.WithCancel(parent)
	r := &runner{
		e: e, key: k, events: make(chan partitionstate.Event, 16), ctx: ctx, cancel: cancel, done: make(chan struct{}),
		log:       e.log.With("mirror", k.mirror, "topic", k.topic, "partition", k.partition),
		lastEpoch: -1,
	}
	if rec, ok := e.store.Partition(k.mirror, k.topic, k.partition); ok {
		r.status = rec.Status
	} else if p := e.recordProblem(mirrorstate.RecordKey{Kind: mirrorstate.KindPartition, Mirror: k.mirror, Topic: k.topic, Partition: k.partition}); p != "" {
		r.status, r.held = unreadablePartition(k, p), true
	}
	return r
}

// Status returns the partition's current status.
func (r *runner) Status() partitionstate.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// progress returns the running mirror's position, if fetching.
func (r *runner) progress() (datapath.Progress, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mirror == nil {
		return datapath.Progress{}, false
	}
	return r.mirror.Progress(), true
}

// send queues an event; it never blocks the caller beyond the runner's lifetime.
func (r *runner) send(ev partitionstate.Event) {
	select {
	case r.events <- ev:
	case <-r.ctx.Done():
	}
}

// close stops the runner and waits for it.
func (r *runner) close() {
	r.cancel()
	<-r.done
}

func (r *runner) desired() partitionstate.Desired {
	tc, ok := r.e.store.TopicConfig(r.key.topic)
	if !ok {
		return partitionstate.DesiredStopped
	}
	mirror, d := partitionstate.ParseMirrorName(tc.MirrorName)
	if mirror != r.key.mirror {
		return partitionstate.DesiredStopped
	}
	return d
}

func (r *runner) run() {
	defer close(r.done)
	defer r.stopFetching()
	defer func() {
		if r.retry != nil {
			r.retry.Stop()
		}
	}()

	// Continue whatever the recorded state was doing when the last process stopped.
	queue := r.perform(r.Status(), partitionstate.ResumeActions(r.Status()))
	if !r.held {
		queue = append(queue, partitionstate.Evaluate{})
	}
	for {
		var ev partitionstate.Event
		if len(queue) > 0 {
			ev, queue = queue[0], queue[1:]
		} else {
			select {
			case ev = <-r.events:
			case <-r.ctx.Done():
				return
			}
		}
		if r.ctx.Err() != nil {
			return
		}
		cur := r.Status()
		if f, ok := ev.(fetcherEvent); ok {
			if f.epoch != cur.StateEpoch {
				continue // from a fetcher of an earlier state: stale
			}
			ev = f.ev
		}
		next, actions, err := partitionstate.Next(cur, r.desired(), ev, r.e.cfg.Retry)
		if err != nil {
			// Late timers and progress reports after a state change are expected.
			r.log.Debug("event ignored", "event", ev.EventName(), "state", cur.State, "reason", err)
			continue
		}
		if len(actions) > 0 && actions[0].Kind == partitionstate.ActionRecord {
			rec := mirrorstate.PartitionRecord{Status: next, UpdatedAt: time.Now().UTC()}
			if err := r.e.store.PutPartition(r.ctx, r.key.mirror, r.key.topic, r.key.partition, rec); err != nil {
				// Never act on a state that is not recorded: try the event again later.
				r.log.Warn("recording the partition state failed; retrying", "to", next.State, "error", err)
				r.after(time.Second, ev)
				continue
			}
			actions = actions[1:]
		}
		r.mu.Lock()
		r.status = next
		r.mu.Unlock()
		if next.State != cur.State {
			r.log.Info("partition state changed", "from", cur.State, "to", next.State, "reason", reason(ev, next))
			switch {
			case next.State == partitionstate.StateFailed:
				r.e.cfg.Observer.Failed(r.key.mirror, r.key.topic, r.key.partition, next.RetryAttempt > 0)
			case cur.State == partitionstate.StateFailed:
				if _, ok := ev.(partitionstate.RetryDue); ok {
					r.e.cfg.Observer.Retried(r.key.mirror, r.key.topic, r.key.partition)
				}
			}
			if next.State == partitionstate.StateStopped && !r.liftedAtStop {
				r.afterStopped()
			}
		}
		queue = append(queue, r.perform(next, actions)...)
		if next.State != cur.State {
			queue = append(queue, partitionstate.Evaluate{})
		}
	}
}

func reason(ev partitionstate.Event, s partitionstate.Status) string {
	if f, ok := ev.(partitionstate.Fail); ok {
		return f.Err
	}
	if s.State == partitionstate.StateFailed {
		return s.Error
	}
	return ev.EventName()
}

// perform carries out actions for the (already recorded) status and returns the events
// they produce.
func (r *runner) perform(s partitionstate.Status, actions []partitionstate.Action) []partitionstate.Event {
	var out []partitionstate.Event
	for _, a := range actions {
		if testHookAction != nil {
			testHookAction(r.key, a)
		}
		switch a.Kind {
		case partitionstate.ActionRecord:
			// Only ever first, and handled by run.
		case partitionstate.ActionPrepare:
			out = append(out, r.outcome(r.prepare(r.ctx)))
		case partitionstate.ActionStartFetching:
			if err := r.startFetching(); err != nil {
				out = append(out, r.outcome(err))
			}
		case partitionstate.ActionStopFetching:
			if s.State == partitionstate.StatePausing {
				r.drainFetching()
				out = append(out, partitionstate.Done{})
			}
			r.stopFetching()
		case partitionstate.ActionStop:
			r.stopFetching()
			out = append(out, r.outcome(r.stop(r.ctx)))
		case partitionstate.ActionScheduleRetry:
			r.after(time.Until(a.At), partitionstate.RetryDue{Now: a.At})
		}
	}
	return out
}

// outcome turns a step's error (PREPARING, starting to fetch, STOPPING) into the event that
// reports it. A step fails for good only when it says so (permanent) or a batch is corrupt;
// unlike the data path's mirrorerr.Classify, it retries the rest with back-off, an unknown
// topic included: during PREPARING that is a destination topic being recreated or not yet
// visible on every broker, which time fixes.
func (r *runner) outcome(err error) partitionstate.Event {
	if err == nil {
		return partitionstate.Done{}
	}
	var (
		perm    *permanentError
		corrupt *recordbatch.CorruptError // PREPARING decodes batches too, comparing the two logs
	)
	return partitionstate.Fail{Err: err.Error(), Retryable: !errors.As(err, &perm) && !errors.As(err, &corrupt), Now: time.Now()}
}

// after sends ev once d has passed, replacing an earlier timer.
func (r *runner) after(d time.Duration, ev partitionstate.Event) {
	if r.retry != nil {
		r.retry.Stop()
	}
	r.retry = time.AfterFunc(max(d, 0), func() {
		if ev, ok := ev.(partitionstate.RetryDue); ok {
			ev.Now = time.Now()
			r.send(ev)
			return
		}
		r.send(ev)
	})
}

// startFetching runs the partition mirror until it fails or is stopped.
func (r *runner) startFetching() error {
	if r.mirror != nil {
		return nil
	}
	src, err := r.e.source(r.key.mirror)
	if err != nil {
		return err
	}
	if err := r.e.enforceReadOnly(r.ctx, r.key.topic); err != nil {
		return err
	}
	rec, _ := r.e.store.Mirror(r.key.mirror)
	tc, _ := r.e.store.TopicConfig(r.key.topic)
	m := datapath.NewPartitionMirror(src, r.e.cfg.Destination, datapath.PartitionConfig{
		Mirror: r.key.mirror, Topic: r.key.topic, Partition: r.key.partition, Logger: r.e.log,
		SourceClusterID: rec.SourceClusterID, SourceTopicID: tc.SourceTopicID, Observer: sessionWatch{r.e.cfg.Observer, r},
		Source:           func() (*kgo.Client, error) { return r.e.source(r.key.mirror) },
		FetchBufferBytes: r.e.cfg.FetchBufferBytes, FetchMemory: r.e.cfg.FetchMemory,
	})
	m.SetLastMirroredEpoch(r.lastEpoch)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	epoch := r.Status().StateEpoch
	r.mu.Lock()
	r.mirror, r.mirrorEpoch, r.stopMirror, r.mirrorDone = m, epoch, cancel, done
	r.mu.Unlock()
	go func() {
		defer close(done)
		healthy := time.NewTicker(time.Second)
		defer healthy.Stop()
		errc := make(chan error, 1)
		go func() { errc <- m.Run(ctx) }()
		for {
			select {
			case err := <-errc:
				if err != nil && ctx.Err() == nil {
					r.send(fetcherEvent{epoch, partitionstate.Fail{Err: err.Error(), Retryable: mirrorerr.Classify(err) != mirrorerr.OperatorActs, Now: time.Now()}})
				}
				return
			case <-healthy.C:
				// Proven progress ends a retry sequence (RetryAttempt back to 0).
				if r.Status().RetryAttempt > 0 && m.Progress().Lag() == 0 {
					r.send(fetcherEvent{epoch, partitionstate.Healthy{}})
				}
			}
		}
	}()
	return nil
}

// checkDestinationEnd fails the partition, for the operator to look at, when end (the
// destination end offset read by a request sent at asked) is past what its running mirror
// wrote: a foreign write must not hide behind a lag of 0 until the next source record. It
// waits, within ctx, until the partition left the state it mirrored in, so that the
// caller's answer already says FAILED.
func (r *runner) checkDestinationEnd(ctx context.Context, end int64, asked time.Time) {
	r.mu.Lock()
	m, epoch := r.mirror, r.mirrorEpoch
	r.mu.Unlock()
	if m == nil {
		return
	}
	err := m.CheckDestinationEnd(end, asked)
	if err == nil {
		return
	}
	r.log.Error("foreign write into the destination partition", "error", err)
	go r.send(fetcherEvent{epoch, partitionstate.Fail{Err: err.Error(), Retryable: false, Now: time.Now()}})
	for r.Status().StateEpoch == epoch {
		select {
		case <-ctx.Done():
			return
		case <-r.ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fetcherEvent is an event from a running partition mirror, tagged with the state epoch it
// was started in: once the partition has moved on, its reports are stale and ignored.
type fetcherEvent struct {
	epoch int32
	ev    partitionstate.Event
}

func (f fetcherEvent) EventName() string { return "fetcher " + f.ev.EventName() }

// pauseDrainTimeout bounds how long PAUSING keeps copying so that the replayed transactions
// open on the destination reach their source markers. A source transaction open for longer
// stays open on the destination while paused; if the pause outlasts the destination's
// transaction timeout, its coordinator aborts it and the resume fails naming the offset.
const pauseDrainTimeout = 10 * time.Second

// drainFetching lets the running partition mirror copy until no replayed transaction is
// open, within pauseDrainTimeout.
func (r *runner) drainFetching() {
	r.mu.Lock()
	m, done := r.mirror, r.mirrorDone
	r.mu.Unlock()
	if m == nil {
		return
	}
	m.Drain()
	select {
	case <-done:
	case <-time.After(pauseDrainTimeout):
		r.log.Warn("pausing with a replayed transaction still open: its source transaction did not end within the drain timeout", "timeout", pauseDrainTimeout)
	case <-r.ctx.Done():
	}
}

// stopFetching stops the partition mirror, if running, and waits for it to finish its
// in-flight produces.
func (r *runner) stopFetching() {
	r.mu.Lock()
	m, stop, done := r.mirror, r.stopMirror, r.mirrorDone
	r.mirror, r.stopMirror, r.mirrorDone = nil, nil, nil
	r.mu.Unlock()
	if stop != nil {
		stop()
		<-done
		if epoch := m.LastMirroredEpoch(); epoch >= 0 {
			r.lastEpoch = epoch
		}
	}
	r.sessionEnded(nil) // no session runs, none fails
}

// sessionWatch is what a runner's partition mirror reports to: the engine's observer, and
// the runner, which keeps the session failures for the stalled detail.
type sessionWatch struct {
	datapath.Observer
	r *runner
}

// SessionStarted implements Observer.
func (w sessionWatch) SessionStarted(mirror, topic string, partition int32) {
	w.r.sessionEnded(nil)
	w.Observer.SessionStarted(mirror, topic, partition)
}

// SessionFailed implements Observer.
func (w sessionWatch) SessionFailed(mirror, topic string, partition int32, err error) {
	w.r.sessionEnded(err)
	w.Observer.SessionFailed(mirror, topic, partition, err)
}

// sessionEnded records a session failure, or with nil that sessions no longer fail.
func (r *runner) sessionEnded(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.failingSince, r.sessionErr = time.Time{}, ""
		return
	}
	if r.failingSince.IsZero() {
		r.failingSince = time.Now()
	}
	r.sessionErr = err.Error()
}

// stalled reports since when the running partition mirror's sessions have failed, when that
// is at least after before now, and the latest failure.
func (r *runner) stalled(now time.Time, after time.Duration) (since time.Time, lastErr string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mirror == nil || r.failingSince.IsZero() || now.Sub(r.failingSince) < after {
		return time.Time{}, "", false
	}
	return r.failingSince, r.sessionErr, true
}

// testHookAction, set only by tests, runs before each action: the place to simulate a
// crash in the middle of PREPARING or STOPPING.
var testHookAction func(partitionKey, partitionstate.Action)

// testHookBeforeLift, set only by tests, runs after a look found a topic stopped and before
// its read-only ACL is lifted: the place to restart the topic in between.
var testHookBeforeLift func(topic string)

// permanentError marks a step failure that waits for the operator (RetryAttempt -1).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }
