package kip

import "time"

// StateTopic is the default name of the compacted topic on the destination that holds the
// mirrors' durable state (the KIP's coordinator topic).
const StateTopic = "__mirror_state"

// DefaultSyncInterval is how often a mirror's metadata is synced when its settings name no
// interval: the KIP's mirror.metadata.refresh.interval.ms default (60000 in the prototype),
// and what the provider's schema and docs promise.
const DefaultSyncInterval = time.Minute

// The retry defaults of a FAILED partition, the KIP's mirror.failed.retry.* defaults:
// exponential back-off from RetryInitialBackoff up to RetryMaxBackoff, for at most
// RetryMaxAttempts consecutive automatic retries.
const (
	RetryInitialBackoff = 100 * time.Millisecond
	RetryMaxBackoff     = 5 * time.Minute
	RetryMaxAttempts    = 20
)
