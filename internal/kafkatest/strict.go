package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Strict mode makes kfake behave like a real broker where the mirror's
// correctness depends on it. It is built only on kfake's request hooks
// (ControlKey, KeepControl, SleepControl, Fault); kfake itself is unchanged.
//
// Asynchronous transaction markers. A real coordinator answers EndTxn once
// the outcome is logged and writes the markers into the partitions later;
// until they are written every request for that transactional id answers
// CONCURRENT_TRANSACTIONS, while other producers' appends to the partitions
// go on and can land before the marker. kfake writes markers inside EndTxn.
// So the EndTxn control asks the cluster (DescribeTransactions, from a
// separate client while the request sleeps, since a control must never block
// the run loop) whether this EndTxn would end an ongoing transaction. If so
// it answers success itself, exactly as kfake would (for EndTxn v5+ with the
// bumped epoch), and a timer sends the real EndTxn a little later over the
// strict mode's own connection; the control recognises that request and lets
// kfake write the markers. Every other EndTxn (retries, fenced epochs, empty
// aborts, wrong coordinator) writes no marker and goes to kfake unchanged.
// Like a real coordinator, which logs the transaction's completion only
// after its markers are written, the id stays busy a quarter of the marker
// delay longer.
//
// While a marker is held DescribeTransactions says PrepareCommit/PrepareAbort,
// as a real coordinator does. What differs from a real broker meanwhile:
// ListTransactions and DescribeProducers still show the transaction as
// Ongoing; the EndTxn answered
// here skipped kfake's ACL check (the client already needed WRITE on the id
// to start the transaction); and if kfake's transaction timeout fires before
// the held EndTxn is sent, the markers are an abort and the cluster records
// an error that New turns into a test failure.
//
// Produce validation. Batches real Kafka's LogValidator rejects but kfake
// accepts are answered INVALID_RECORD per partition, through a one-request
// kfake Fault so the rest of the request is appended as usual.
type strict struct {
	c     *Cluster
	fake  *kfake.Cluster
	delay time.Duration
	gate  <-chan struct{}

	// The deferred EndTxn must use the client's request version: v5+
	// bumps the producer epoch, v0-v4 do not. kgo pins per-request
	// versions only internally, so one client per behaviour.
	end5 *kgo.Client
	end4 *kgo.Client

	mu      sync.Mutex
	pending map[string]*pendingTxn // by transactional id
	closing bool
	closed  chan struct{}  // closed by close: held markers go out at once
	wg      sync.WaitGroup // deferred EndTxns in flight or scheduled
	errs    []error
	faults  []*kfake.FaultHandle       // one-request faults of the previous Produce
	markers map[markerKey]markerEpochs // the last WriteTxnMarkers marker of each producer id, per partition
}

// pendingTxn is a transactional id whose EndTxn is being looked at or was
// answered while its markers are not yet written.
type pendingTxn struct {
	releasing bool // the deferred EndTxn is on its way: let exactly it through
	pid       int64
	epoch     int16
	commit    bool
	v5        bool
	timer     *time.Timer
}

func newStrict(c *Cluster) (*strict, error) {
	s := &strict{
		c:       c,
		fake:    c.fake,
		delay:   c.cfg.markerDelay,
		gate:    c.cfg.markerGate,
		pending: make(map[string]*pendingTxn),
		closed:  make(chan struct{}),
		markers: make(map[markerKey]markerEpochs),
	}
	var err error
	if s.end5, err = kgo.NewClient(c.ClientOpts()...); err != nil {
		return nil, fmt.Errorf("kafkatest: strict mode client: %w", err)
	}
	v4 := kversion.Stable()
	v4.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	if s.end4, err = kgo.NewClient(append(c.ClientOpts(), kgo.MaxVersions(v4))...); err != nil {
		s.end5.Close()
		return nil, fmt.Errorf("kafkatest: strict mode client: %w", err)
	}
	s.fake.ControlKey(int16(kmsg.EndTxn), s.endTxn)
	s.fake.ControlKey(int16(kmsg.AddPartitionsToTxn), s.addPartitionsToTxn)
	s.fake.ControlKey(int16(kmsg.AddOffsetsToTxn), s.addOffsetsToTxn)
	s.fake.ControlKey(int16(kmsg.InitProducerID), s.initProducerID)
	s.fake.ControlKey(int16(kmsg.Produce), s.produce)
	s.fake.ControlKey(int16(kmsg.DescribeTransactions), s.describeTransactions)
	s.fake.ControlKey(int16(kmsg.WriteTxnMarkers), s.writeTxnMarkers)
	return s, nil
}

// close delivers every held marker now and waits for them, so nothing a
// client was told is committed gets lost with the cluster.
func (s *strict) close() {
	s.mu.Lock()
	s.closing = true
	close(s.closed)
	var now []*pendingTxn
	var ids []string
	for id, p := range s.pending {
		if p.timer != nil && p.timer.Stop() {
			now = append(now, p)
			ids = append(ids, id)
		}
	}
	s.mu.Unlock()
	for i, p := range now {
		go s.release(ids[i], p, false)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.addErr(errors.New("strict mode: deferred transaction markers still unwritten at Close"))
	}
	s.end5.Close()
	s.end4.Close()
}

func (s *strict) addErr(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *strict) errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func (s *strict) isPending(txid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[txid] != nil
}

func (p *pendingTxn) isRelease(req *kmsg.EndTxnRequest) bool {
	return p.releasing && p.pid == req.ProducerID && p.epoch == req.ProducerEpoch && p.commit == req.Commit && (req.Version >= 5) == p.v5
}

// claim marks txid busy while a request for it is looked at. It returns nil
// when the id is already busy (answer CONCURRENT_TRANSACTIONS) or when the
// cluster is closing (let kfake answer).
func (s *strict) claim(txid string) (p *pendingTxn, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[txid] != nil {
		return nil, true
	}
	if s.closing {
		return nil, false
	}
	p = &pendingTxn{}
	s.pending[txid] = p
	return p, false
}

// lookup asks the cluster about txid. The request sleeps meanwhile, so the
// run loop serves the DescribeTransactions.
func (s *strict) lookup(txid string) (st *kmsg.DescribeTransactionsResponseTransactionState, atCoordinator bool) {
	node := s.fake.CurrentNode()
	coordinator := s.fake.CoordinatorFor(txid)
	s.fake.SleepControl(func() { st = s.describe(txid) })
	if st != nil && st.ErrorCode != 0 {
		st = nil
	}
	return st, node == coordinator
}

// settle either schedules the claimed id's deferred EndTxn (true) or, when
// hold is false or the cluster is closing, frees the id (false).
func (s *strict) settle(txid string, p *pendingTxn, hold bool, pid int64, epoch int16, commit, v5 bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !hold || s.closing {
		if s.pending[txid] == p {
			delete(s.pending, txid)
		}
		return false
	}
	p.pid, p.epoch, p.commit, p.v5 = pid, epoch, commit, v5
	s.wg.Add(1)
	p.timer = time.AfterFunc(s.delay, func() { s.release(txid, p, true) })
	return true
}

func concurrentEndTxn(req *kmsg.EndTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = kerr.ConcurrentTransactions.Code
	return resp
}

// endTxn runs on kfake's loop; it may sleep (SleepControl yields the loop)
// but never blocks it.
func (s *strict) endTxn(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.EndTxnRequest)
	txid := req.TransactionalID

	s.mu.Lock()
	if p := s.pending[txid]; p != nil && p.isRelease(req) {
		// Our deferred EndTxn: kfake writes the markers now; the id
		// stays busy until release completes it. (A client retry of
		// the very same EndTxn may win the race; kfake then answers
		// it as the original, and ours later gets kfake's answer for
		// a retry. Both succeed.)
		s.mu.Unlock()
		return nil, nil, false
	}
	s.mu.Unlock()

	p, busy := s.claim(txid)
	if busy {
		return concurrentEndTxn(req), nil, true
	}
	if p == nil {
		return nil, nil, false
	}
	st, atCoordinator := s.lookup(txid)
	ends := st != nil && atCoordinator &&
		st.State == "Ongoing" &&
		st.ProducerID == req.ProducerID &&
		st.ProducerEpoch == req.ProducerEpoch &&
		// kfake allocates a new random producer id when the epoch
		// is exhausted: not predictable, let kfake do it inline.
		!(req.Version >= 5 && req.ProducerEpoch >= math.MaxInt16-1)
	if !s.settle(txid, p, ends, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version >= 5) {
		return nil, nil, false // no marker to write (or closing): kfake answers
	}

	// What kfake answers for a transaction it ends (26_end_txn.go,
	// pids.doEnd): success, and from v5 the same producer id with the
	// epoch bumped by one.
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if req.Version >= 5 {
		resp.ProducerID = req.ProducerID
		resp.ProducerEpoch = req.ProducerEpoch + 1
	}
	return resp, nil, true
}

// initProducerID holds the id while markers are pending. An InitProducerID
// that fences an ongoing transaction gets what a real broker answers:
// CONCURRENT_TRANSACTIONS while the abort markers are written later (kfake
// would abort inline); the client's retry then proceeds.
func (s *strict) initProducerID(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID == nil || *req.TransactionalID == "" {
		return nil, nil, false
	}
	txid := *req.TransactionalID
	concurrent := func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		return resp
	}
	p, busy := s.claim(txid)
	if busy {
		return concurrent(), nil, true
	}
	if p == nil {
		return nil, nil, false
	}
	st, atCoordinator := s.lookup(txid)
	// kfake aborts the ongoing transaction after these checks
	// (txns.go, doInitProducerID); otherwise it aborts nothing.
	fences := st != nil && atCoordinator &&
		st.State == "Ongoing" &&
		req.TransactionTimeoutMillis > 0 && req.TransactionTimeoutMillis <= defaultTxnMaxTimeoutMs &&
		(req.ProducerID < 0 || req.ProducerEpoch < 0 ||
			req.ProducerID == st.ProducerID && req.ProducerEpoch <= st.ProducerEpoch)
	var pid int64
	var epoch int16
	if st != nil {
		pid, epoch = st.ProducerID, st.ProducerEpoch
	}
	if !s.settle(txid, p, fences, pid, epoch, false, false) {
		return nil, nil, false
	}
	return concurrent(), nil, true
}

// defaultTxnMaxTimeoutMs is kfake's transaction.max.timeout.ms, which these
// clusters never change.
const defaultTxnMaxTimeoutMs = 900000

// describe runs outside kfake's loop (in SleepControl's wakeup), on the
// cluster's internal client: never on a client that sends EndTxn, whose
// connection may be the one sleeping.
func (s *strict) describe(txid string) *kmsg.DescribeTransactionsResponseTransactionState {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txid}
	resp, err := req.RequestWith(ctx, s.c.internal)
	if err != nil || len(resp.TransactionStates) != 1 {
		return nil
	}
	return &resp.TransactionStates[0]
}

// describeTransactions answers PrepareCommit / PrepareAbort for an id whose EndTxn was
// answered while its markers are held, as a real coordinator does until the markers are
// written (TransactionCoordinator completes the transaction only after WriteTxnMarkers);
// kfake answers every other id.
func (s *strict) describeTransactions(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	held := map[string]pendingTxn{}
	var others []string
	s.mu.Lock()
	for _, id := range req.TransactionalIDs {
		if p := s.pending[id]; p != nil && p.timer != nil {
			held[id] = *p
		} else {
			others = append(others, id)
		}
	}
	s.mu.Unlock()
	if len(held) == 0 {
		return nil, nil, false
	}
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	if len(others) > 0 {
		// None of these ids is held, so this control lets kfake answer them.
		var err error
		s.fake.SleepControl(func() {
			own := kmsg.NewPtrDescribeTransactionsRequest()
			own.TransactionalIDs = others
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var r *kmsg.DescribeTransactionsResponse
			if r, err = own.RequestWith(ctx, s.c.internal); err == nil {
				resp.TransactionStates = r.TransactionStates
			}
		})
		if err != nil {
			return nil, fmt.Errorf("kafkatest strict mode: describing transactions: %w", err), true
		}
	}
	node := s.fake.CurrentNode()
	for id, p := range held {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		switch {
		case s.fake.CoordinatorFor(id) != node:
			st.ErrorCode = kerr.NotCoordinator.Code
		case p.commit:
			st.State = "PrepareCommit"
		default:
			st.State = "PrepareAbort"
		}
		st.ProducerID, st.ProducerEpoch, st.StartTimestamp = p.pid, p.epoch, -1
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil, true
}

// release sends the real EndTxn for a transaction whose EndTxn was already
// answered. wait is false when Close delivers held markers early.
func (s *strict) release(txid string, p *pendingTxn, wait bool) {
	defer s.wg.Done()
	if wait && s.gate != nil {
		select {
		case <-s.gate:
		case <-s.closed:
		}
	}
	s.mu.Lock()
	p.releasing = true
	s.mu.Unlock()

	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = txid
	req.ProducerID = p.pid
	req.ProducerEpoch = p.epoch
	req.Commit = p.commit
	cl := s.end4
	if p.v5 {
		cl = s.end5
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (resp.Version >= 5) != p.v5 {
		err = fmt.Errorf("sent as EndTxn v%d", resp.Version)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		what := "abort"
		if p.commit {
			what = "commit"
		}
		s.errs = append(s.errs, fmt.Errorf("strict mode: writing the deferred %s markers of transactional id %q (producer %d, epoch %d) failed: %w", what, txid, p.pid, p.epoch, err))
	}
	complete := func() {
		if s.pending[txid] == p {
			delete(s.pending, txid) // never leave the id blocked
		}
	}
	if err != nil || !wait {
		complete()
		return
	}
	// With its markers written, a real coordinator still logs CompleteCommit or
	// CompleteAbort before the id leaves PrepareCommit/PrepareAbort
	// (TransactionMarkerChannelManager): a request right after the markers
	// land gets CONCURRENT_TRANSACTIONS a little longer.
	time.AfterFunc(s.delay/4, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		complete()
	})
}

func (s *strict) addPartitionsToTxn(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	// v4+ is the brokers' batched form; clients send v0-v3.
	if req.Version >= 4 || !s.isPending(req.TransactionalID) {
		return nil, nil, false
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition = p
			sp.ErrorCode = kerr.ConcurrentTransactions.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil, true
}

func (s *strict) addOffsetsToTxn(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	if !s.isPending(req.TransactionalID) {
		return nil, nil, false
	}
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	resp.ErrorCode = kerr.ConcurrentTransactions.Code
	return resp, nil, true
}

// produce answers partitions a real broker would refuse. It installs
// one-request faults and lets kfake build the response, so the response has
// the request version's shape and the valid partitions are appended.
func (s *strict) produce(kreq kmsg.Request) (kmsg.Response, error, bool) {
	s.fake.KeepControl()
	req := kreq.(*kmsg.ProduceRequest)

	s.mu.Lock()
	stale := s.faults
	s.faults = nil
	txnPending := req.TransactionID != nil && s.pending[*req.TransactionID] != nil
	s.mu.Unlock()
	// Controls and handlers run one request at a time, so the previous
	// Produce has been handled: drop its faults if it never reached them.
	for _, h := range stale {
		h.Remove()
	}

	var faults []kfake.Fault
	node := int32(-2)
	for _, rt := range req.Topics {
		// The name is looked up only when a partition needs it: v13
		// requests carry just the topic id.
		topic, known := rt.Topic, req.Version < 13
		name := func() (string, bool) {
			if !known {
				known = true
				if info := s.fake.TopicIDInfo(rt.TopicID); info != nil {
					topic = info.Topic
				}
			}
			return topic, topic != ""
		}
		compacted := -1 // looked up only when a null key shows up
		for _, rp := range rt.Partitions {
			var e *kerr.Error
			if txnPending {
				e = kerr.ConcurrentTransactions
			} else {
				code, reason, nullKey := validateProduceBatch(rp.Records)
				if code == 0 && nullKey {
					if compacted < 0 {
						compacted = 0
						if t, ok := name(); ok && isCompacted(s.fake.TopicInfo(t)) {
							compacted = 1
						}
					}
					if compacted == 1 {
						code, reason = kerr.InvalidRecord.Code, "Compacted topic cannot accept message without key"
					}
				}
				if code != 0 {
					e = &kerr.Error{Message: reason, Code: code}
				}
			}
			if e == nil {
				continue
			}
			topic, ok := name()
			if !ok {
				continue // unknown topic id: kfake answers UNKNOWN_TOPIC_ID
			}
			// A real broker answers NOT_LEADER before validating.
			if node == -2 {
				node = s.fake.CurrentNode()
			}
			if s.fake.LeaderFor(topic, rp.Partition) != node {
				continue
			}
			target := kreq
			faults = append(faults, kfake.Fault{
				Keys:       []kmsg.Key{kmsg.Produce},
				Topic:      topic,
				Partitions: []int32{rp.Partition},
				Err:        e,
				Count:      1,
				When:       func(r kmsg.Request) bool { return r == target },
			})
		}
	}
	if len(faults) > 0 {
		h := s.fake.Fault(faults...)
		s.mu.Lock()
		s.faults = append(s.faults, h)
		s.mu.Unlock()
	}
	return nil, nil, false
}

func isCompacted(info *kfake.TopicInfo) bool {
	if info == nil {
		return false
	}
	v := info.Configs["cleanup.policy"]
	return v != nil && strings.Contains(*v, "compact")
}
