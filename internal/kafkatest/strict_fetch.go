package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch answers real brokers give that kfake never does, injected on demand into fetches of
// one topic that carry the partition (see withoutSession for fetch sessions):
//
//   - EmptyFetches: error NONE, the real high watermark and no records, although the fetch
//     offset is below the high watermark. A tiered-storage read that did not finish within
//     remote.fetch.max.wait.ms answers so (DelayedRemoteFetch: on expiry the partition gets
//     its local read result, which holds no records).
//   - ThrottleFetches: a broker over a client's quota answers at once with no partitions at
//     all, error NONE and the throttle time (KafkaApis.handleFetchRequest,
//     FetchContext.getThrottledResponse), and expects the client to wait that long.

// Faults counts the requests answered by an injected fault (EmptyFetches, ThrottleFetches,
// LagHighWatermark, ...).
type Faults struct {
	mu   sync.Mutex
	left int
	done chan struct{} // closed when every fault was served
}

func newFaults(n int) *Faults { return &Faults{left: n, done: make(chan struct{})} }

// fetchFault answers the fetches of one topic's partition.
type fetchFault struct {
	*Faults
	topic     string
	partition int32
	id        [16]byte
	answer    func(req *kmsg.FetchRequest, state func(int32) *partitionState) *kmsg.FetchResponse
}

// EmptyFetches answers the next n fetches (made sessionless: withoutSession) of topic's
// partition below its high watermark with no records. The other partitions of such a fetch
// get no records either, as from a broker whose answer reached its byte limit.
func (c *Cluster) EmptyFetches(t TB, topic string, partition int32, n int) *Faults {
	t.Helper()
	return c.fetchFaults(t, topic, partition, n, func(req *kmsg.FetchRequest, state func(int32) *partitionState) *kmsg.FetchResponse {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
		for _, fp := range req.Topics[0].Partitions {
			info := state(fp.Partition)
			if info == nil || fp.FetchOffset > info.hw || fp.FetchOffset < info.logStart ||
				(fp.Partition == partition && fp.FetchOffset == info.hw) {
				return nil // kfake answers: nothing to read, or out of range
			}
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = info.hw, info.lso, info.logStart
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp
	})
}

// ThrottleFetches answers the next n fetches (made sessionless) of topic's partition with no
// partitions and the throttle time.
func (c *Cluster) ThrottleFetches(t TB, topic string, partition int32, n int, throttle time.Duration) *Faults {
	t.Helper()
	return c.fetchFaults(t, topic, partition, n, func(req *kmsg.FetchRequest, _ func(int32) *partitionState) *kmsg.FetchResponse {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ThrottleMillis = int32(throttle.Milliseconds())
		return resp
	})
}

type partitionState struct{ logStart, hw, lso int64 }

// fetchFaults answers matching fetches with answer's response (nil: let kfake answer), which
// reads each partition's state with state (nil: not led here).
func (c *Cluster) fetchFaults(t TB, topic string, partition int32, n int, answer func(req *kmsg.FetchRequest, state func(int32) *partitionState) *kmsg.FetchResponse) *Faults {
	t.Helper()
	if c.fake == nil {
		t.Fatalf("kafkatest: fetch faults need a kfake cluster, %s is real Kafka", c.id)
		return nil
	}
	info := c.fake.TopicInfo(topic)
	if info == nil {
		t.Fatalf("kafkatest: fetch faults: no topic %q on %s", topic, c.id)
		return nil
	}
	f := &fetchFault{Faults: newFaults(n), topic: topic, partition: partition, id: info.TopicID, answer: answer}
	c.controlFetches(func(fc *fetchControl) { fc.faults = append(fc.faults, f) })
	return f.Faults
}

// fetchControl is a kfake cluster's one Fetch control: the faults waiting to be served
// first, then the Cleaner, if any; every other fetch kfake answers. One control, so that a
// fault answers with the log start the Cleaner keeps, and the Cleaner answers every other
// fetch.
type fetchControl struct {
	mu      sync.Mutex
	faults  []*fetchFault // in the order injected; served ones leave
	cleaner *Cleaner
}

// controlFetches changes the cluster's fetch control, installing it first.
func (c *Cluster) controlFetches(change func(*fetchControl)) {
	c.fetchOnce.Do(func() { c.fake.ControlKey(int16(kmsg.Fetch), c.serveFetch) })
	c.fetches.mu.Lock()
	defer c.fetches.mu.Unlock()
	change(&c.fetches)
}

func (c *Cluster) serveFetch(kreq kmsg.Request) (kmsg.Response, error, bool) {
	c.fake.KeepControl()
	req := kreq.(*kmsg.FetchRequest)
	if req.Rack == cleanerRack { // the Cleaner's own fetches read kfake's log
		return nil, nil, false
	}
	fc := &c.fetches
	fc.mu.Lock()
	fc.faults = slices.DeleteFunc(fc.faults, (*fetchFault).served)
	faults, k := slices.Clone(fc.faults), fc.cleaner
	fc.mu.Unlock()
	if req.Rack != readerRack { // faults are for the mirror, not the comparator
		for _, f := range faults {
			if resp := f.serve(c, req, k); resp != nil {
				return resp, nil, true
			}
		}
	}
	if k != nil {
		return k.fetch(req)
	}
	return nil, nil, false
}

// serve answers req with a fault, or returns nil when the fault does not apply to it.
func (f *fetchFault) serve(c *Cluster, req *kmsg.FetchRequest, k *Cleaner) kmsg.Response {
	if f.served() || c.fake.LeaderFor(f.topic, f.partition) != c.fake.CurrentNode() {
		return nil
	}
	if resp := withoutSession(req); resp != nil {
		return resp
	}
	if len(req.Topics) != 1 ||
		!slices.ContainsFunc(req.Topics[0].Partitions, func(p kmsg.FetchRequestTopicPartition) bool { return p.Partition == f.partition }) ||
		(req.Version >= 13 && req.Topics[0].TopicID != f.id) || (req.Version < 13 && req.Topics[0].Topic != f.topic) {
		return nil
	}
	var resp *kmsg.FetchResponse
	read := func() error {
		resp = f.answer(req, func(p int32) *partitionState {
			pi := c.fake.PartitionInfo(f.topic, p)
			if pi == nil || c.fake.LeaderFor(f.topic, p) != c.fake.CurrentNode() {
				return nil
			}
			logStart := pi.LogStartOffset
			if k != nil {
				logStart = k.logStart(f.id, p, logStart)
			}
			return &partitionState{logStart: logStart, hw: pi.HighWatermark, lso: pi.LastStableOffset}
		})
		return nil
	}
	if k == nil {
		_ = read()
	} else {
		_ = k.consistent(read, func() {}) // the answer holds no records to restore
	}
	if resp == nil || !f.take() {
		return nil
	}
	return resp
}

// withoutSession makes fetches to a partition's leader list every partition while a fault
// waits for it: an incremental fetch of a session (KIP-227) lists only the partitions whose
// fetch state changed. Its session is ended as by a broker that evicted it (the answer
// returned: FETCH_SESSION_ID_NOT_FOUND); the full fetch that follows, and every other, is
// turned into a sessionless one (nil returned), as a broker without a free session slot
// serves it.
func withoutSession(req *kmsg.FetchRequest) kmsg.Response {
	if req.SessionEpoch > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	req.SessionEpoch = -1
	return nil
}

// Served is closed once every fault was served.
func (f *Faults) Served() <-chan struct{} { return f.done }

// served tells whether every fault was served.
func (f *Faults) served() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// take counts one fault served; false once all were.
func (f *Faults) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left == 0 {
		return false
	}
	if f.left--; f.left == 0 {
		close(f.done)
	}
	return true
}

// Wait waits until every fault was served.
func (f *Faults) Wait(t TB, timeout time.Duration) {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(timeout):
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("kafkatest: %d faults not served after %v", f.left, timeout)
	}
}

// answerRack marks AnswerFetches' own fetches of the other partitions.
const answerRack = "kafkatest-answer"

// AnswerFetches answers topic's partition, in every fetch that carries it, with answer's
// partition (nil: kfake answers the whole fetch), to serve source batches or errors kfake
// never gives. The fetch's other partitions (the mirror's fetcher asks for every partition a
// broker leads at once) get kfake's own answer, asked on a client of kafkatest's own while
// the fetch sleeps. Fetches to the partition's leader stay sessionless (withoutSession).
func (c *Cluster) AnswerFetches(t TB, topic string, partition int32, answer func(kmsg.FetchRequestTopicPartition) *kmsg.FetchResponseTopicPartition) {
	t.Helper()
	if c.fake == nil {
		t.Fatalf("kafkatest: AnswerFetches needs a kfake cluster, %s is real Kafka", c.id)
		return
	}
	info := c.fake.TopicInfo(topic)
	if info == nil {
		t.Fatalf("kafkatest: AnswerFetches: no topic %q on %s", topic, c.id)
		return
	}
	own := c.Client(t)
	c.fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.fake.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if req.Rack == answerRack || c.fake.LeaderFor(topic, partition) != c.fake.CurrentNode() {
			return nil, nil, false
		}
		if resp := withoutSession(req); resp != nil {
			return resp, nil, true
		}
		if len(req.Topics) != 1 ||
			(req.Version >= 13 && req.Topics[0].TopicID != info.TopicID) || (req.Version < 13 && req.Topics[0].Topic != topic) {
			return nil, nil, false
		}
		at := slices.IndexFunc(req.Topics[0].Partitions, func(p kmsg.FetchRequestTopicPartition) bool { return p.Partition == partition })
		if at < 0 {
			return nil, nil, false
		}
		rp := answer(req.Topics[0].Partitions[at])
		if rp == nil {
			return nil, nil, false
		}
		rp.Partition = partition
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
		rt.Partitions = append(rt.Partitions, *rp)
		if len(req.Topics[0].Partitions) > 1 {
			rest := *req
			rest.Rack, rest.MaxWaitMillis = answerRack, 0
			rest.Topics = []kmsg.FetchRequestTopic{req.Topics[0]}
			rest.Topics[0].Partitions = slices.Delete(slices.Clone(req.Topics[0].Partitions), at, at+1)
			node := c.fake.CurrentNode()
			var others *kmsg.FetchResponse
			var err error
			// The control must not block kfake's loop while its own answer is made.
			c.fake.SleepControl(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				others, err = rest.RequestWith(ctx, own.Broker(int(node)))
			})
			if err == nil && others == nil {
				err = errors.New("the cluster closed before the other partitions were answered")
			}
			if err != nil {
				return nil, fmt.Errorf("kafkatest.AnswerFetches: %w", err), true // the client reconnects and asks again
			}
			for _, ot := range others.Topics {
				rt.Partitions = append(rt.Partitions, ot.Partitions...)
			}
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}
