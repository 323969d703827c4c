// Package rounds gathers the askers of a request that answers for many keys into rounds.
package rounds

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Rounds answers requests for keys in rounds: a round begins when the one before it ended
// (or, begun from idle, once Gather returns) and answers every key asked meanwhile, so
// that each answer was read after it was asked, and many askers at once cost one round,
// not one each.
type Rounds[K comparable, R any] struct {
	Run   func(keys []K) R
	Spawn func(func()) // runs the rounds' loop in a goroutine
	// Gather, if set, is waited for before a round that its first asker began from idle:
	// askers released together by another round (the stage before this one) arrive a moment
	// apart, and would otherwise split into a round for the first and one for the rest.
	Gather func()

	mu      sync.Mutex
	next    *round[K, R] // gathering keys
	running bool
}

type round[K comparable, R any] struct {
	keys map[K]struct{}
	done chan struct{} // closed once out is set
	out  R
}

// Ask returns the answer of a round that began after the call, or ctx's end.
func (rs *Rounds[K, R]) Ask(ctx context.Context, k K) (R, error) {
	rs.mu.Lock()
	if rs.next == nil {
		rs.next = &round[K, R]{keys: map[K]struct{}{}, done: make(chan struct{})}
	}
	r := rs.next
	r.keys[k] = struct{}{}
	if !rs.running {
		rs.running = true
		rs.Spawn(rs.loop)
	}
	rs.mu.Unlock()
	select {
	case <-r.done:
		return r.out, nil
	case <-ctx.Done():
		var zero R
		return zero, context.Cause(ctx)
	}
}

func (rs *Rounds[K, R]) loop() {
	if rs.Gather != nil {
		rs.Gather()
	}
	for {
		rs.mu.Lock()
		r := rs.next
		rs.next = nil
		rs.running = r != nil
		rs.mu.Unlock()
		if r == nil {
			return
		}
		r.out = rs.Run(slices.Collect(maps.Keys(r.keys)))
		close(r.done)
	}
}
