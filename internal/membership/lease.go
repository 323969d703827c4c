package membership

import (
	"context"
	"errors"
)

// Why an ownership context ended (context.Cause of a unit's context).
var (
	// ErrLeaseExpired: no heartbeat answer proved membership within the lease.
	ErrLeaseExpired = errors.New("membership: lease expired: ownership can no longer be proven")
	// ErrRevoked: the group's assignment moved the unit to another member or dropped it.
	ErrRevoked = errors.New("membership: unit revoked by a rebalance")
	// ErrFenced: the coordinator no longer knows this member or its generation.
	ErrFenced = errors.New("membership: fenced: the member lost its place in the group")
	// ErrLeft: the member left the group (Leave, or refused).
	ErrLeft = errors.New("membership: the member left the group")
)

// ownership is the context of one owned unit. Done closes when ownership ends; Err also reads
// the lease clock, so a writer that checks Err before each write stops at the lease's end
// even when the expiry timer has not fired yet (a process resumed after SIGSTOP runs its
// goroutines and its timers in no particular order).
type ownership struct {
	context.Context
	cancel context.CancelCauseFunc
	m      *Member
}

func (o *ownership) Err() error {
	if err := o.Context.Err(); err != nil {
		return err
	}
	if o.m.leaseExpired() {
		o.cancel(ErrLeaseExpired)
		return o.Context.Err()
	}
	return nil
}
