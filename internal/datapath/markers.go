package datapath

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
)

// Lone markers written by the worker itself: WriteTxnMarkers (API 27), the request a
// transaction coordinator sends to partition leaders, many markers per request, answered
// once every marker is in the log (KafkaApis.handleWriteTxnMarkersRequest appends them one
// after the other, in request order). It needs CLUSTER_ACTION (or, from Kafka 3.8, ALTER)
// on the cluster; a destination that refuses it gets one transaction per offset through the
// gap writers instead (gapMarkers).
//
// The markers carry the producer id of the partition's markerTxnSuffix transactional id,
// which never opens a transaction, so its coordinator never writes a marker for it and no
// coordinator epoch but ours is ever recorded for it. Every request is a legacy
// (transaction version 0) marker: the partition accepts a marker whose epoch is at least
// the producer's last one (ProducerAppendInfo.checkProducerEpoch; only transaction version
// 2 markers need a higher epoch each time), so one epoch writes any number of them, and a
// session that initialized the id again fences an earlier one's markers.

// markerTxnSuffix ends the transactional id whose producer id the partition's
// WriteTxnMarkers markers carry.
const markerTxnSuffix = "markers"

// Lone markers by how they were written, for Observer.LoneMarkers.
const (
	MarkersByWriteTxnMarkers = "write_txn_markers"
	MarkersByEndTxn          = "end_txn"
)

// markerRequestBytes bounds one WriteTxnMarkers request.
const markerRequestBytes = 256 << 10

// markersPerRequest is how many markers of one partition of topic fit in a request.
func markersPerRequest(topic string) int64 {
	return int64(markerRequestBytes / kafkareq.MarkerRunBytes(topic, 1))
}

// refusesMarkers tells an answer that wrote nothing because the destination does not let
// the worker write markers: no right on the cluster, or no such request.
func refusesMarkers(err error) bool {
	return errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.UnsupportedVersion)
}

var errNoWriteTxnMarkers = errors.New("the destination partition leader does not support WriteTxnMarkers")

// writeLoneMarkers writes n lone markers from the destination end with WriteTxnMarkers and
// returns how many it wrote: fewer than n (nothing of the request refused, and nothing after)
// when the destination refuses them, which it does for the rest of the session. Every
// produce in flight must have landed: the markers take the offsets at the end.
func (s *session) writeLoneMarkers(ctx context.Context, n int64, commit bool) (int64, error) {
	if s.markersRefused {
		return 0, nil
	}
	if s.markers == nil {
		if ok, err := s.m.dst.Supports(ctx, s.dst.Leader, kmsg.WriteTxnMarkers); err != nil {
			return 0, err
		} else if !ok {
			s.refuseMarkers(errNoWriteTxnMarkers)
			return 0, nil
		}
		t, err := s.initTxn(ctx, s.txnPrefix()+markerTxnSuffix)
		if err != nil {
			return 0, err
		}
		s.markers = &t.producer
	}
	at, written := s.next, int64(0)
	for written < n {
		k := min(n-written, markersPerRequest(s.cfg.Topic))
		s.m.mayReach(at + written + k)
		if s.markerPipe == nil {
			s.markerPipe = acquireMarkerWriter(s.m.dst, s.dst.Leader)
		}
		err := s.markerPipe.write(ctx, kafkareq.MarkerRun{Topic: s.cfg.Topic, Partition: s.cfg.Partition, Producer: *s.markers, Commit: commit, N: int(k)})
		if refusesMarkers(err) {
			// The broker checks the right before it appends anything.
			s.refuseMarkers(err)
			break
		}
		if err != nil {
			return 0, err
		}
		written += k
	}
	// The answers say every marker was appended. That nothing else took an offset among them
	// is checked by the next answer that reports an offset (a produce's base offset, a
	// marker awaited) or, at the end of the step, by one look at the end (checkMarkers).
	s.next = at + written
	s.uncheckedMarkers += written
	s.cfg.Observer.LoneMarkers(MarkersByWriteTxnMarkers, written)
	s.mirroredMarkers(written)
	return written, nil
}

// checkMarkers makes sure the lone markers written last, with nothing after them, took
// exactly their offsets. (A produce in flight after them confirms them by its answer.)
func (s *session) checkMarkers(ctx context.Context) error {
	if n := s.uncheckedMarkers; n > 0 && len(s.pending) == 0 {
		return s.awaitMarker(ctx, s.next-n, n)
	}
	return nil
}

// refuseMarkers falls back to the gap writers for the rest of the session, saying so once
// per partition mirror.
func (s *session) refuseMarkers(err error) {
	s.markersRefused = true
	if s.m.markersRefused.CompareAndSwap(false, true) {
		s.m.log.Warn("the destination does not let the worker write transaction markers (WriteTxnMarkers needs CLUSTER_ACTION on the cluster): compaction holes are filled with one transaction each, far slower",
			"error", err)
	}
}

// markerWriters are the running marker pipelines.
var markerWriters = newPipelines[*markerWriter]()

// markerWriter writes the lone markers of every partition one destination broker leads.
// The partitions whose markers wait while a request is answered share the next one, so a
// compacted topic's partitions fill their holes in one request per round rather than one
// each (the broker reads a connection's next request only after answering the last). A
// session waits for its markers' answer before it writes again, so a partition has at most
// one run queued or in flight, and its markers keep its session's order.
type markerWriter struct {
	key   brokerKey
	dst   kafkareq.Cluster
	queue writeQueue[*markerItem]
}

type markerItem struct {
	run  kafkareq.MarkerRun
	done chan error // capacity 1
}

func acquireMarkerWriter(dst kafkareq.Cluster, broker int32) *markerWriter {
	key := brokerKey{dst.Client, broker}
	return markerWriters.acquire(key, func() *markerWriter {
		return &markerWriter{key: key, dst: dst, queue: newWriteQueue[*markerItem]()}
	}, (*markerWriter).run)
}

func (mw *markerWriter) release() { markerWriters.release(mw.key) }

// write appends a run of markers and returns once they are in the log, or why not.
func (mw *markerWriter) write(ctx context.Context, run kafkareq.MarkerRun) error {
	it := &markerItem{run: run, done: make(chan error, 1)}
	mw.queue.add(ctx, it, func(err error) { it.done <- err })
	return <-it.done
}

func (mw *markerWriter) run(ctx context.Context) {
	for {
		size := 0
		items := mw.queue.take(func(it *markerItem) bool {
			n := kafkareq.MarkerRunBytes(it.run.Topic, it.run.N)
			if size > 0 && size+n > markerRequestBytes {
				return false
			}
			size += n
			return true
		})
		if len(items) == 0 {
			select {
			case <-mw.queue.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		runs := make([]kafkareq.MarkerRun, len(items))
		for i, it := range items {
			runs[i] = it.run
		}
		for i, err := range mw.dst.WriteMarkers(ctx, mw.key.broker, runs) {
			items[i].done <- err
		}
	}
}
