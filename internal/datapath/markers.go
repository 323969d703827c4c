package datapath

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
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

// markersPerRequest is how many markers of one partition of topic fit in a request: each
// repeats the producer id and epoch, the result, the topic name, the partition and the
// coordinator epoch.
func markersPerRequest(topic string) int64 {
	return markerRequestBytes / int64(24+len(topic))
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
		if ok, err := s.m.dst.SupportsWriteTxnMarkers(ctx, s.dst.Leader); err != nil {
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
		err := s.m.dst.WriteMarkers(ctx, s.dst.Leader, s.cfg.Topic, s.cfg.Partition, *s.markers, commit, int(k))
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
// exactly their offsets.
func (s *session) checkMarkers(ctx context.Context) error {
	if n := s.uncheckedMarkers; n > 0 {
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
