// Package lease carries a worker's ownership of a unit of work (a partition, a mirror's sync)
// down to the writes made under it. The writers — the data path's produces and the
// __mirror_state store — check it right before they send, so a worker that lost a unit
// writes nothing more to it.
package lease

import "context"

type key struct{}

// With returns a context derived from ctx that carries the ownership context owned.
func With(ctx, owned context.Context) context.Context {
	return context.WithValue(ctx, key{}, owned)
}

// Err is the ownership context's Err when ctx runs under one, else nil. An ownership context
// may read a lease clock in Err (a process resumed after SIGSTOP runs its timers late), so a
// derived context, which only learns of the end through Done, could still let one write out.
func Err(ctx context.Context) error {
	if owned, ok := ctx.Value(key{}).(context.Context); ok {
		return owned.Err()
	}
	return nil
}
