package kafkatest

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Epochs of markers written with WriteTxnMarkers. A real partition leader
// checks each marker against its producer's state
// (ProducerAppendInfo.appendEndTxnMarker): a producer epoch below the
// producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch below the one
// recorded for the producer id TRANSACTION_COORDINATOR_FENCED. kfake checks
// neither. Strict mode keeps the epochs of the markers clients write with
// WriteTxnMarkers — the whole producer state of an id that only ever writes
// such markers — and refuses a request holding a marker a broker would reject,
// writing none of it (a broker writes the others).

type markerKey struct {
	topic     string
	partition int32
	pid       int64
}

type markerEpochs struct {
	epoch            int16
	coordinatorEpoch int32
}

func (s *strict) writeTxnMarkers(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[markerKey]markerEpochs{}
	var refused *kerr.Error
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				k := markerKey{t.Topic, p, m.ProducerID}
				cur, ok := next[k]
				if !ok {
					cur, ok = s.markers[k]
				}
				switch {
				case ok && m.ProducerEpoch < cur.epoch:
					refused = kerr.InvalidProducerEpoch
				case ok && m.CoordinatorEpoch < cur.coordinatorEpoch:
					refused = kerr.TransactionCoordinatorFenced
				}
				next[k] = markerEpochs{m.ProducerEpoch, m.CoordinatorEpoch}
			}
		}
	}
	if refused == nil {
		for k, e := range next {
			s.markers[k] = e
		}
		return nil, nil, false
	}
	return WriteTxnMarkersRefused(req, refused), nil, true
}

// WriteTxnMarkersRefused is the answer to req of a broker that refuses it with err for every
// partition, writing nothing.
func WriteTxnMarkersRefused(req *kmsg.WriteTxnMarkersRequest, err *kerr.Error) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition, rp.ErrorCode = p, err.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}
