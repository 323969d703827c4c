package mirrorengine

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/metadatasync"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// runningSync is the metadata sync of one mirror running on this worker.
type runningSync struct {
	*metadatasync.Syncer
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *Engine) startSyncer(mirror string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.syncers[mirror] != nil {
		return
	}
	parent := e.ctx
	if e.cfg.Placement != nil {
		if parent = e.place.syncOwned(e.cfg.Placement, mirror); parent == nil {
			return // runs where it is owned
		}
	}
	ctx, cancel := context.WithCancel(parent)
	s := &runningSync{Syncer: metadatasync.New(syncHost{e}, e.dst.Client, e.log, mirror), cancel: cancel, done: make(chan struct{})}
	e.syncers[mirror] = s
	go func() {
		defer close(s.done)
		s.Run(ctx)
	}()
}

func (e *Engine) stopSyncer(mirror string) {
	if s := take(&e.mu, e.syncers, mirror); s != nil {
		s.cancel()
		<-s.done
	}
}

// kickSyncer asks for a sync cycle now (a topic just started).
func (e *Engine) kickSyncer(mirror string) {
	e.mu.Lock()
	s := e.syncers[mirror]
	e.mu.Unlock()
	if s != nil {
		s.Kick()
	}
}

// SyncStatus returns the last sync outcome of a mirror.
func (e *Engine) SyncStatus(mirror string) (metadatasync.Status, error) {
	e.mu.Lock()
	s := e.syncers[mirror]
	e.mu.Unlock()
	if s == nil {
		return metadatasync.Status{}, cmdErr(kip.CodeUnknownClusterMirror, "cluster mirror %q does not exist", mirror)
	}
	return s.Status(), nil
}

// syncHost is the engine as its mirrors' syncs see it.
type syncHost struct{ e *Engine }

func (h syncHost) Mirror(name string) (mirrorstate.MirrorRecord, bool) { return h.e.store.Mirror(name) }

func (h syncHost) Source(mirror string) (*kgo.Client, error) { return h.e.source(mirror) }

// MirroringTopics are the mirror's topics with a partition MIRRORING; paused and stopped
// topics are never synced.
func (h syncHost) MirroringTopics(mirror string) []string {
	var out []string
	for _, topic := range h.e.mirrorTopics(mirror) {
		for _, st := range h.e.topicStatuses(mirror, topic) {
			if st.State == partitionstate.StateMirroring {
				out = append(out, topic)
				break
			}
		}
	}
	return out
}

// SourceReplaced fails every running partition of the mirror for good: a replaced source must
// not feed anything more.
func (h syncHost) SourceReplaced(mirror, msg string) {
	for _, topic := range h.e.mirrorTopics(mirror) {
		for _, r := range h.e.topicRunners(mirror, topic) {
			if st := r.Status().State; st != partitionstate.StateStopped && st != partitionstate.StateFailed {
				r.send(partitionstate.Fail{Err: msg, Retryable: false, Now: time.Now()})
			}
		}
	}
}

func (h syncHost) RecordPartitions(ctx context.Context, mirror, topic string, n int) error {
	return h.e.recordNewPartitions(ctx, mirror, topic, n)
}

func (h syncHost) EnsureRunners(ctx context.Context, mirror, topic string) error {
	return h.e.ensureRunners(ctx, mirror, topic)
}

// take removes k from m, which mu guards, and returns what it held.
func take[K comparable, V any](mu *sync.Mutex, m map[K]V, k K) V {
	mu.Lock()
	defer mu.Unlock()
	v := m[k]
	delete(m, k)
	return v
}
