package datapath

// What the per-broker write pipelines share (produce: producer.go; lone markers: markers.go):
// a pipeline runs per destination broker from its first user to its last, and keeps the
// writes its users hand over in a queue until they join a request.

import (
	"context"
	"slices"
	"sync"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/lease"
)

// pipelines holds the running pipelines of one kind, one per destination broker.
type pipelines[T any] struct {
	mu sync.Mutex
	m  map[brokerKey]*pipelineRef[T]
}

type pipelineRef[T any] struct {
	p      T
	users  int
	cancel context.CancelFunc
}

func newPipelines[T any]() *pipelines[T] {
	return &pipelines[T]{m: map[brokerKey]*pipelineRef[T]{}}
}

// acquire returns the pipeline to key's broker, made by start and run (until its last user
// leaves) for its first user; every acquire is paired with a release.
func (r *pipelines[T]) acquire(key brokerKey, start func() T, run func(T, context.Context)) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := r.m[key]
	if ref == nil {
		ctx, cancel := context.WithCancel(context.Background())
		ref = &pipelineRef[T]{p: start(), cancel: cancel}
		r.m[key] = ref
		go run(ref.p, ctx)
	}
	ref.users++
	return ref.p
}

// release ends a user's share; the last one stops the pipeline. Its users have their answers
// by then: nothing is queued or in flight for them.
func (r *pipelines[T]) release(key brokerKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref := r.m[key]; ref != nil {
		if ref.users--; ref.users == 0 {
			delete(r.m, key)
			ref.cancel()
		}
	}
}

// each calls fn for every running pipeline whose key match accepts.
func (r *pipelines[T]) each(match func(brokerKey) bool, fn func(T)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, ref := range r.m {
		if match(k) {
			fn(ref.p)
		}
	}
}

// writeQueue holds the writes handed to a pipeline, in the order they were handed over,
// until they join a request. Until then the end of a write's ctx withdraws it (answered with
// ctx's error, never sent); once it joined one, its answer is awaited whatever ctx does.
type writeQueue[T any] struct {
	mu    sync.Mutex
	items []*queuedWrite[T]
	wake  chan struct{} // capacity 1: the queue grew, or the pipeline can send again
}

type queuedWrite[T any] struct {
	w      T
	ctx    context.Context
	fail   func(error) // answers the write without sending it
	stop   func() bool // ends the watch on ctx
	queued bool        // guarded by mu
}

func newWriteQueue[T any]() writeQueue[T] {
	return writeQueue[T]{wake: make(chan struct{}, 1)}
}

func (q *writeQueue[T]) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// add queues w; fail answers it if it never joins a request.
func (q *writeQueue[T]) add(ctx context.Context, w T, fail func(error)) {
	it := &queuedWrite[T]{w: w, ctx: ctx, fail: fail, queued: true}
	q.mu.Lock()
	q.items = append(q.items, it)
	it.stop = context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if it.queued {
			it.queued = false
			q.items = slices.DeleteFunc(q.items, func(x *queuedWrite[T]) bool { return x == it })
			it.fail(ctx.Err())
		}
	})
	q.mu.Unlock()
	q.poke()
}

// take removes the writes that join the next request from the queue, in order: join is
// asked of each (false leaves it queued, and join must then refuse that partition's later
// writes). A write whose ctx or lease ended is answered and dropped instead: the lease is
// checked right before a write joins, since a derived ctx may not know yet.
func (q *writeQueue[T]) take(join func(T) bool) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []T
	rest := q.items[:0]
	for _, it := range q.items {
		if !join(it.w) {
			rest = append(rest, it)
			continue
		}
		it.queued = false
		it.stop()
		if err := lease.Err(it.ctx); err != nil {
			it.fail(err)
			continue
		}
		if err := it.ctx.Err(); err != nil {
			it.fail(err)
			continue
		}
		out = append(out, it.w)
	}
	clear(q.items[len(rest):])
	q.items = rest
	return out
}

// each calls fn for every queued write.
func (q *writeQueue[T]) each(fn func(T)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range q.items {
		fn(it.w)
	}
}
