package datapath

import "time"

// Observer receives the engine's measurements; the worker turns them into metrics. The
// engine stays free of any metrics library. Methods must be cheap and safe for concurrent use.
type Observer interface {
	// Mirrored counts offsets written to a destination partition (records, fillers and
	// markers: each takes one) and the bytes of the batches produced.
	Mirrored(mirror, topic string, partition int32, records, bytes int64)
	// FetchLatency and ProduceLatency time one request to the source or destination.
	FetchLatency(d time.Duration)
	ProduceLatency(d time.Duration)
	// SourceFetch counts one fetch to a source broker (one per broker and source client, for
	// every partition it leads): how many partitions it asked for, how many record bytes came.
	SourceFetch(broker int32, partitions int, bytes int64)
	// DestinationProduce counts one produce request a destination broker answered: how many
	// partitions' batches it carried (one pipeline per broker groups them) and their bytes.
	DestinationProduce(broker int32, partitions int, bytes int64)
	// LoneMarkers counts abort or commit markers written alone (holes, source markers of
	// transactions not replayed), by method: MarkersByWriteTxnMarkers or MarkersByEndTxn.
	LoneMarkers(method string, markers int64)
	// FetchBuffered is how many fetched bytes wait in a partition's fetch-ahead buffer.
	FetchBuffered(mirror, topic string, partition int32, bytes int64)
	// Failed counts a partition entering FAILED; Retried counts an automatic retry.
	Failed(mirror, topic string, partition int32, retryable bool)
	Retried(mirror, topic string, partition int32)
	// SessionStarted says a MIRRORING partition's data path session reached both clusters
	// and copies; SessionFailed says one ended with an error that a new session retries (a
	// cluster that does not answer, a leader that moved).
	SessionStarted(mirror, topic string, partition int32)
	SessionFailed(mirror, topic string, partition int32, err error)
}

// NopObserver discards everything.
type NopObserver struct{}

func (NopObserver) Mirrored(string, string, int32, int64, int64) {}
func (NopObserver) FetchLatency(time.Duration)                   {}
func (NopObserver) ProduceLatency(time.Duration)                 {}
func (NopObserver) SourceFetch(int32, int, int64)                {}
func (NopObserver) DestinationProduce(int32, int, int64)         {}
func (NopObserver) LoneMarkers(string, int64)                    {}
func (NopObserver) FetchBuffered(string, string, int32, int64)   {}
func (NopObserver) Failed(string, string, int32, bool)           {}
func (NopObserver) Retried(string, string, int32)                {}
func (NopObserver) SessionStarted(string, string, int32)         {}
func (NopObserver) SessionFailed(string, string, int32, error)   {}
