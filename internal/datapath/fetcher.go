package datapath

// The fetch side of the data path: one fetcher per source broker (per source client), as
// Kafka's own replica fetchers have. A broker answers one request per connection at a time,
// so one long-poll fetch per partition queued every idle partition's wait in front of the busy
// ones; one fetch carrying every partition led by the broker is answered as soon as any of
// them has data. The fetch is incremental (a KIP-227 fetch session): it lists only the
// partitions whose fetch state changed, so idle partitions cost nothing on the wire. Each
// partition's answers wait in a bounded buffer (fetch-ahead), so its next fetch is in flight
// while the session writes the previous answer; a partition whose buffer is full leaves the
// fetch session until it has room, and never holds back the others.

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// fetchResponseMaxBytes bounds one fetch answer; PartitionMaxBytes bounds each partition's
// part, and the broker moves a partition that returned data to the end of its session's
// order, so one busy partition cannot starve the others.
const fetchResponseMaxBytes = 32 << 20

// answerBuffer is the one buffer kmsg decodes a fetch answer into: every partition's part of
// the answer is a slice of it, so it stays alive while any part forwarded from it does, and
// counts whole in the fetch memory until the last one is let go. Parts are forwarded from it
// as they are, uncopied. But a partition whose writer is slow would keep the others' parts
// alive long after their writers took them (a 4 MiB buffer of 20 KiB parts of 32 MiB answers:
// 6 GiB), and the fetch memory would wait for that writer while the other partitions starve;
// so when memory is short, the parts of an answer that its other parts' writers are done with
// are copied out of it (see squeeze), which costs a memory copy of their bytes.
type answerBuffer struct {
	bytes int64
	// Guarded by the fetcher's mu.
	parts     int   // parts forwarded from it and not let go
	taken     int   // of those, the ones a session took: their writes are slices of it
	held      int64 // the bytes of those parts' batches
	forwarded int64 // the bytes of all its parts' batches
}

// squeezable tells whether copying out the parts of the answer frees it: every part still
// forwarded from it is buffered (none taken), and some were let go.
func (a *answerBuffer) squeezable() bool {
	return a.parts > 0 && a.taken == 0 && a.held < a.forwarded
}

// squeezes tells whether squeeze copies out the parts of a squeezable answer: when that gives
// back at least as much as it copies, or when the partitions it holds parts of are all full,
// whose writers may not take them for long (those writers would otherwise keep up to twice
// their share of the fetch memory, and the partitions that read could starve).
func (a *answerBuffer) squeezes(allFull bool) bool {
	return a.squeezable() && (a.held*2 <= a.bytes || allFull)
}

// hold is what a part of an answer keeps alive: its answer's buffer, or (shared nil) a copy
// of its own batches.
type hold struct {
	shared *answerBuffer
	bytes  int64 // of the part's batches
}

// brokerKey names one broker of one client: fetchers and produce pipelines run per broker.
type brokerKey struct {
	cl     *kgo.Client
	broker int32
}

// brokerRegistry holds the running per-broker workers of one kind.
type brokerRegistry[T any] struct {
	mu sync.Mutex
	m  map[brokerKey]T
}

// fetchers are the running fetchers. A fetcher starts with its first feed and ends with its
// last.
var fetchers = brokerRegistry[*brokerFetcher]{m: map[brokerKey]*brokerFetcher{}}

// brokerFetcher fetches for every feed of one source broker.
type brokerFetcher struct {
	key    brokerKey
	src    kafkareq.Cluster
	obs    Observer
	mem    *FetchMemory
	cancel context.CancelFunc

	mu    sync.Mutex
	feeds []*feed
	wake  chan struct{} // a feed became fetchable
	// The fetch session (KIP-227): what the broker holds, as last sent, and what it last
	// said of each partition (high watermark, log start), for partitions it has no news of.
	session map[kafkareq.PartKey]sentPart
	known   map[kafkareq.PartKey]kafkareq.Fetched
	// Epoch 0: the next request is full and starts a new session (replacing sessionID, if
	// any).
	sessionID, sessionEpoch int32
}

// feed is one partition's subscription to its leader's fetcher.
type feed struct {
	f         *brokerFetcher
	mirror    string
	topic     string
	meta      kafkareq.TopicMeta
	partition int32
	maxBytes  int32
	bufLimit  int
	joined    time.Time // when it subscribed (see joinWait)

	// Guarded by f.mu.
	offset   int64 // where the next fetch starts
	gen      uint64
	failed   bool // an error waits in buf: no more fetches until the session took it
	closed   bool
	buf      []fetchResult
	bufBytes int
	answered time.Time // when buf was last given an answer
	// How long the session took to write its last answer with data, from taking it to
	// asking again: when a full buffer may have room again.
	writeTime time.Duration
	took      time.Time     // when the session took the answer it writes; zero once it asks again
	ready     chan struct{} // capacity 1: buf changed
	// The answers the session took (numbered from 1) whose writes may still be in flight,
	// with the memory each keeps alive, until the session says they are written.
	taken []takenAnswer
	takes uint64
}

// fetchResult is one answer for a feed: what a fetch from `from` returned.
type fetchResult struct {
	from  int64
	f     kafkareq.Fetched
	err   error
	bytes int
	hold  hold
}

// subscribe adds a partition, to be read from offset, to the fetcher of its leader.
func subscribe(src kafkareq.Cluster, meta kafkareq.TopicMeta, cfg *PartitionConfig, offset int64) *feed {
	key := brokerKey{src.Client, meta.Leader}
	fetchers.mu.Lock()
	defer fetchers.mu.Unlock()
	bf := fetchers.m[key]
	if bf == nil {
		ctx, cancel := context.WithCancel(context.Background())
		bf = &brokerFetcher{key: key, src: src, obs: cfg.Observer, mem: cfg.FetchMemory, cancel: cancel, wake: make(chan struct{}, 1),
			session: map[kafkareq.PartKey]sentPart{}, known: map[kafkareq.PartKey]kafkareq.Fetched{}}
		fetchers.m[key] = bf
		go bf.run(ctx)
	}
	fd := &feed{
		f: bf, mirror: cfg.Mirror, topic: cfg.Topic, meta: meta, partition: cfg.Partition,
		maxBytes: cfg.FetchMaxBytes, bufLimit: cfg.FetchBufferBytes, joined: time.Now(), offset: offset, ready: make(chan struct{}, 1),
	}
	bf.mu.Lock()
	bf.feeds = append(bf.feeds, fd)
	bf.mem.join(1)
	bf.mu.Unlock()
	bf.poke()
	return fd
}

// close leaves the fetcher (once); the last feed to leave stops it.
func (fd *feed) close() {
	bf := fd.f
	fetchers.mu.Lock()
	defer fetchers.mu.Unlock()
	bf.mu.Lock()
	if fd.closed {
		bf.mu.Unlock()
		return
	}
	fd.closed = true
	fd.drop()
	fd.written(math.MaxUint64)
	bf.mem.join(-1)
	for i, x := range bf.feeds {
		if x == fd {
			bf.feeds = append(bf.feeds[:i], bf.feeds[i+1:]...)
			break
		}
	}
	last := len(bf.feeds) == 0
	bf.mu.Unlock()
	bf.obs.FetchBuffered(fd.mirror, fd.topic, fd.partition, 0)
	if last {
		delete(fetchers.m, bf.key)
		bf.cancel()
	}
}

func (bf *brokerFetcher) poke() {
	select {
	case bf.wake <- struct{}{}:
	default:
	}
}

func (fd *feed) signal() {
	select {
	case fd.ready <- struct{}{}:
	default:
	}
}

// arrived is signalled when an answer arrives for the feed; next consumes the same signal,
// but looks at what the feed holds first.
func (fd *feed) arrived() <-chan struct{} { return fd.ready }

// next returns the answer of a fetch from offset. An offset other than where the buffered
// answers start (the session retries, or skipped ahead) drops them and fetches from there.
func (fd *feed) next(ctx context.Context, offset int64) (kafkareq.Fetched, error) {
	bf := fd.f
	for {
		bf.mu.Lock()
		if !fd.took.IsZero() {
			fd.writeTime, fd.took = time.Since(fd.took), time.Time{}
		}
		if len(fd.buf) > 0 && fd.buf[0].from != offset {
			fd.reset(offset)
		}
		if len(fd.buf) > 0 {
			r := fd.buf[0]
			fd.buf[0] = fetchResult{} // its batches must not keep their answer alive once let go
			fd.buf = fd.buf[1:]
			fd.bufBytes -= r.bytes
			fd.takes++
			if r.hold != (hold{}) {
				if r.hold.shared != nil {
					r.hold.shared.taken++
				}
				fd.taken = append(fd.taken, takenAnswer{fd.takes, r.hold})
			}
			if r.bytes > 0 {
				fd.took = time.Now()
			}
			// An error is the session's to judge (out of range moves it on); if it asks
			// again, it is fetched again.
			fd.failed = false
			buffered := fd.bufBytes
			bf.mu.Unlock()
			bf.poke()
			bf.obs.FetchBuffered(fd.mirror, fd.topic, fd.partition, int64(buffered))
			return r.f, r.err
		}
		if fd.offset != offset {
			fd.reset(offset)
		}
		bf.mu.Unlock()
		select {
		case <-fd.ready:
		case <-ctx.Done():
			return kafkareq.Fetched{}, ctx.Err()
		}
	}
}

// takenAnswer is an answer the session took: its number and what it keeps alive.
type takenAnswer struct {
	n    uint64
	hold hold
}

// taking returns the number of the answer the session took last: the one its writes come
// from.
func (fd *feed) taking() uint64 {
	fd.f.mu.Lock()
	defer fd.f.mu.Unlock()
	return fd.takes
}

// doneWith says the writes of every answer numbered below n are answered: the memory those
// answers keep alive counts no more.
func (fd *feed) doneWith(n uint64) {
	fd.f.mu.Lock()
	defer fd.f.mu.Unlock()
	fd.written(n)
}

// written lets go of the answers numbered below n. Guarded by f.mu.
func (fd *feed) written(n uint64) {
	for len(fd.taken) > 0 && fd.taken[0].n < n {
		fd.f.letGo(fd.taken[0].hold, true)
		fd.taken = fd.taken[1:]
	}
}

// letGo ends what a part of an answer keeps alive; taken tells whether a session took it.
// Guarded by mu.
func (bf *brokerFetcher) letGo(h hold, taken bool) {
	a := h.shared
	if a == nil {
		bf.mem.add(-h.bytes)
		return
	}
	a.parts--
	a.held -= h.bytes
	if taken {
		a.taken--
	}
	switch {
	case a.parts == 0:
		bf.mem.add(-a.bytes)
	case taken && a.squeezable():
		bf.mem.poke() // a fetcher waiting for room may squeeze it now
	}
}

// squeeze copies the buffered parts of answers out of them where that gives memory back (see
// answerBuffer.squeezes): the fetch memory is short.
func (bf *brokerFetcher) squeeze() {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	reading := map[*answerBuffer]bool{} // answers with a part in a feed that is not full
	for _, fd := range bf.feeds {
		if !fd.full() {
			for _, r := range fd.buf {
				if r.hold.shared != nil {
					reading[r.hold.shared] = true
				}
			}
		}
	}
	for _, fd := range bf.feeds {
		for i := range fd.buf {
			r := &fd.buf[i]
			if a := r.hold.shared; a != nil && a.squeezes(!reading[a]) {
				r.f.Batches = cloneBatches(r.f.Batches, r.hold.bytes)
				bf.mem.add(r.hold.bytes)
				bf.letGo(r.hold, false)
				r.hold.shared = nil
			}
		}
	}
}

// batchBytes is the size of batches together.
func batchBytes(batches []recordbatch.Batch) int64 {
	var n int64
	for _, b := range batches {
		n += int64(len(b))
	}
	return n
}

// cloneBatches returns a copy of batches (size bytes together) in one buffer of their own.
func cloneBatches(batches []recordbatch.Batch, size int64) []recordbatch.Batch {
	buf := make([]byte, 0, size)
	out := make([]recordbatch.Batch, len(batches))
	for i, b := range batches {
		buf = append(buf, b...)
		out[i] = recordbatch.Batch(buf[len(buf)-len(b) : len(buf) : len(buf)])
	}
	return out
}

// holds tells whether next would return at once with the answer of a fetch from offset.
func (fd *feed) holds(offset int64) bool {
	fd.f.mu.Lock()
	defer fd.f.mu.Unlock()
	return len(fd.buf) > 0 && fd.buf[0].from == offset
}

// reset drops what the feed holds and has in flight and fetches from offset next. Guarded
// by f.mu.
func (fd *feed) reset(offset int64) {
	fd.drop()
	fd.offset = offset
	fd.gen++
	fd.failed = false
	fd.f.poke()
}

// drop empties the feed's buffer. Guarded by f.mu.
func (fd *feed) drop() {
	for _, r := range fd.buf {
		fd.f.letGo(r.hold, false)
	}
	fd.buf, fd.bufBytes = nil, 0
}

// fetchable tells whether the fetch session holds the feed: while it may take a whole
// answer more (see full). A feed fetching into whatever room is left would, once its writer
// falls behind, be answered one small batch at a time, each a fetch and an answer of its own.
// Guarded by f.mu.
func (fd *feed) fetchable() bool {
	return !fd.closed && !fd.failed && !fd.full()
}

// full tells whether the feed holds all it may: its buffer has no room for a whole answer,
// or it holds its share of the fetch memory. Without the share, partitions whose writers are
// slow would fill the memory up to their buffers while the others wait; with it, each holds
// about its share plus an answer, and the broker's answers go to those that hold less.
// Guarded by f.mu.
func (fd *feed) full() bool {
	return fd.bufLimit-fd.bufBytes < int(fd.answerBytes()) || int64(fd.bufBytes) >= fd.f.mem.share()
}

// roomWait is how long a fetch may wait for data while the feed waits for room (see
// fetchable), or false when it does not. A broker reads a connection's next fetch only
// once it answered the last, so the feed rejoins the session only after that fetch's answer:
// behind the idle partitions' long poll (FetchMaxWaitMillis), a partition catching up beside
// them would wait it out each time its buffer filled (read at 100 or 200 MiB/s beside 7 idle
// partitions of Apache Kafka 4.4, it got 20–26 MiB/s; alone, 91–177). So the fetch waits
// about as long as the feed's writer takes to write an answer, and has room again: the
// fetches of the idle partitions are at most as many as the answers it writes, and its
// writer has the rest of its buffer to write meanwhile. Guarded by f.mu.
func (fd *feed) roomWait() (time.Duration, bool) {
	if fd.closed || fd.failed || !fd.full() {
		return 0, false
	}
	return min(max(fd.writeTime, minRoomWait), kafkareq.FetchMaxWaitMillis*time.Millisecond), true
}

// minRoomWait bounds the fetches a fast writer's waits for room cause.
const minRoomWait = 5 * time.Millisecond

// joinWait is how long a fetch waits for data while partitions join the fetcher: one that
// joins while a fetch is in flight is fetched from the next (a broker reads a connection's
// next fetch only once it answered the last), so behind the idle partitions' long poll it
// waited up to FetchMaxWaitMillis for its first fetch, and a started topic's partitions join
// one after another for a while (1,000 on Apache Kafka 4.4: a record written as all were
// MIRRORING reached the destination 272–559 ms later; 199–277 with joinWait). While a
// partition joined within the last long poll, more may follow, and fetches wait at most
// joinWait.
const joinWait = 10 * time.Millisecond

// joining tells whether fd joined within the last long poll, as of now.
func (fd *feed) joining(now time.Time) bool {
	return now.Sub(fd.joined) < kafkareq.FetchMaxWaitMillis*time.Millisecond
}

// answerBytes is what one answer for the feed may hold: maxBytes, or half a smaller buffer,
// so that the writer always has the other half to write while the next fetch is in flight.
func (fd *feed) answerBytes() int32 {
	return int32(max(1, min(int(fd.maxBytes), fd.bufLimit/2)))
}

// sentPart is a partition as the broker's fetch session holds it: which feed it serves and
// the fetch state last sent for it.
type sentPart struct {
	fd       *feed
	gen      uint64
	from     int64
	maxBytes int32
}

func (fd *feed) key() kafkareq.PartKey {
	return kafkareq.PartKey{Topic: fd.topic, ID: fd.meta.ID, Partition: fd.partition}
}

// Fetch session errors (KIP-227): the broker lost or never had the session the request
// names, or the request's epoch or topic addressing does not match it. No partition was
// read; a full fetch starts a new session.
var sessionErrors = []error{kerr.FetchSessionIDNotFound, kerr.InvalidFetchSessionEpoch, kerr.FetchSessionTopicIDError}

func (bf *brokerFetcher) run(ctx context.Context) {
	defer bf.closeSession()
	bf.mem.start(bf)
	defer bf.mem.leave(bf)
	for ctx.Err() == nil {
		req, held, room, wait := bf.request()
		switch {
		case wait:
			bf.mem.squeeze()
			bf.waitForRoom(ctx)
			continue
		case req == nil:
			select {
			case <-bf.wake:
			case <-ctx.Done():
			}
			continue
		}
		throttle := bf.fetch(ctx, req, held)
		bf.mem.add(-room) // what the partitions kept, they hold now
		if throttle > 0 {
			_ = kafkareq.Sleep(ctx, throttle)
		}
	}
}

// waitForRoom waits until the fetcher's turn for fetch memory may have come. Meanwhile the
// partitions whose runners wait are told what was last heard of them, as an answer without
// news would (a drain waits for its runner's next step).
func (bf *brokerFetcher) waitForRoom(ctx context.Context) {
	t := time.NewTimer(idleAnswerEvery)
	defer t.Stop()
	select {
	case <-bf.wake:
	case <-ctx.Done():
	case <-t.C:
		bf.mu.Lock()
		held := maps.Clone(bf.session)
		bf.mu.Unlock()
		bf.deliver(held, nil, nil, false)
	}
}

// fetch sends req, whose answer the session holds as held, and hands the partitions their
// parts. It returns how long the broker asks it to wait before the next fetch (throttling).
func (bf *brokerFetcher) fetch(ctx context.Context, req *kmsg.FetchRequest, held map[kafkareq.PartKey]sentPart) (throttle time.Duration) {
	began := time.Now()
	kresp, err := bf.src.Client.Broker(int(bf.key.broker)).Request(ctx, req)
	if ctx.Err() != nil {
		return 0
	}
	if req.SessionEpoch < 0 { // closed (or never to be heard of again): nothing was read
		bf.mu.Lock()
		bf.sessionID, bf.sessionEpoch = 0, 0
		bf.mu.Unlock()
		return 0
	}
	var resp *kmsg.FetchResponse
	if err == nil {
		resp = kresp.(*kmsg.FetchResponse)
		err = kerr.ErrorForCode(resp.ErrorCode)
		if slices.Contains(sessionErrors, err) {
			bf.endSession()
			return 0
		}
		if err != nil {
			err = mirrorerr.WrapAuth(bf.src.Name, "fetch", err)
		}
	}
	if err != nil {
		// Whether the broker took the request (and moved the session's epoch) is unknown.
		bf.endSession()
		bf.deliver(held, nil, err, true)
		return 0
	}
	bf.sessionAnswered(req, resp)
	if kafkareq.Throttled(resp) {
		return time.Duration(resp.ThrottleMillis) * time.Millisecond
	}
	bytes := bf.deliver(held, resp, nil, req.SessionEpoch == 0)
	bf.obs.SourceFetch(bf.key.broker, len(held), bytes)
	if bytes > 0 {
		bf.obs.FetchLatency(time.Since(began))
	}
	return 0
}

// request builds the next fetch of the session and returns it with the partitions the
// session holds once the broker took it, and the room it took in the fetch memory for the
// answer (the request's MaxBytes); nil when there is nothing to fetch, and wait, changing
// nothing, when the fetcher must wait for room.
//
// A full request (epoch 0) lists every fetchable feed and starts a session. An incremental
// one lists only the partitions whose fetch state differs from what the broker holds (new,
// moved on, reset) and forgets those that can take no more data (closed, failed, no room for
// a whole answer), as Kafka's consumer and replica fetchers do; the broker reads every
// partition it holds and answers only those with news. While partitions wait for room, the
// fetch waits for data only until the first of them may have room again (roomWait). A
// session that would hold nothing is closed (Kafka drops an emptied session anyway).
func (bf *brokerFetcher) request() (req *kmsg.FetchRequest, held map[kafkareq.PartKey]sentPart, room int64, wait bool) {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	// The answer holds at most a whole answer of each fetchable partition.
	var most int64
	for _, fd := range bf.feeds {
		if fd.fetchable() {
			most += int64(fd.answerBytes())
		}
	}
	if most == 0 {
		bf.mem.stepOut(bf)
	} else if room = bf.mem.take(bf, min(most, fetchResponseMaxBytes)); room == 0 {
		return nil, nil, 0, true
	}
	if bf.sessionEpoch == 0 {
		clear(bf.session)
		clear(bf.known)
	}
	req = kafkareq.NewFetchRequest(int32(room))
	req.SessionID, req.SessionEpoch = bf.sessionID, bf.sessionEpoch
	want := map[kafkareq.PartKey]bool{}
	topics := map[[16]byte]int{} // index in req.Topics
	now := time.Now()
	for _, fd := range bf.feeds {
		if fd.joining(now) {
			req.MaxWaitMillis = min(req.MaxWaitMillis, int32(joinWait.Milliseconds()))
		}
		k := fd.key()
		if want[k] {
			continue // a second feed of one partition waits until the first leaves
		}
		if !fd.fetchable() {
			if d, ok := fd.roomWait(); ok {
				req.MaxWaitMillis = min(req.MaxWaitMillis, int32(d.Milliseconds()))
			}
			continue
		}
		want[k] = true
		s := sentPart{fd: fd, gen: fd.gen, from: fd.offset, maxBytes: fd.answerBytes()}
		if bf.session[k] == s {
			continue
		}
		bf.session[k] = s
		ti, ok := topics[fd.meta.ID]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = fd.topic, fd.meta.ID
			req.Topics = append(req.Topics, rt)
			ti = len(req.Topics) - 1
			topics[fd.meta.ID] = ti
		}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, kafkareq.FetchPartition(fd.meta, fd.partition, s.from, s.maxBytes))
	}
	forgotten := map[kafkareq.PartKey][]int32{} // by topic
	for k := range bf.session {
		if !want[k] {
			delete(bf.session, k)
			delete(bf.known, k)
			t := kafkareq.PartKey{Topic: k.Topic, ID: k.ID}
			forgotten[t] = append(forgotten[t], k.Partition)
		}
	}
	if len(bf.session) == 0 {
		if bf.sessionEpoch == 0 { // no live session (a full request replaces any the broker has)
			return nil, nil, 0, false
		}
		return closeSessionRequest(bf.sessionID), nil, 0, false
	}
	for t, ps := range forgotten {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = t.Topic, t.ID, ps
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req, maps.Clone(bf.session), room, false
}

// closeSessionRequest frees the broker's slot for a session (epoch -1: final), reading
// nothing.
func closeSessionRequest(id int32) *kmsg.FetchRequest {
	req := kafkareq.NewFetchRequest(fetchResponseMaxBytes)
	req.SessionID, req.MaxWaitMillis = id, 0
	return req
}

// sessionAnswered moves the session on after an answer without a session error: a full
// request's answer names the new session (0: the broker keeps none, for lack of slots or
// because it throttled the request), an incremental one the same session at the next epoch.
func (bf *brokerFetcher) sessionAnswered(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	switch {
	case resp.SessionID == 0 || (req.SessionEpoch > 0 && resp.SessionID != req.SessionID):
		bf.sessionID, bf.sessionEpoch = 0, 0
	case req.SessionEpoch == 0:
		bf.sessionID, bf.sessionEpoch = resp.SessionID, 1
	case bf.sessionEpoch == math.MaxInt32:
		bf.sessionEpoch = 1 // wraps past 0, which starts a session (FetchMetadata.nextEpoch)
	default:
		bf.sessionEpoch++
	}
}

// endSession makes the next request a full one that replaces the session.
func (bf *brokerFetcher) endSession() {
	bf.mu.Lock()
	bf.sessionEpoch = 0
	bf.mu.Unlock()
}

// closeSession frees the broker's session slot once the fetcher stops.
func (bf *brokerFetcher) closeSession() {
	bf.mu.Lock()
	id, live := bf.sessionID, bf.sessionEpoch > 0
	bf.mu.Unlock()
	if !live {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeSessionTimeout)
	defer cancel()
	// Best effort: a session the broker keeps is evicted once idle or outranked.
	_, _ = bf.src.Client.Broker(int(bf.key.broker)).Request(ctx, closeSessionRequest(id))
}

const closeSessionTimeout = 5 * time.Second

// idleAnswerEvery paces the answers a partition with no news gets: an incremental fetch
// answers only partitions with news, but the partition's runner still needs to look up now
// and then (a drain waits for its next step), as a sessionless fetch's empty answer let it.
const idleAnswerEvery = kafkareq.FetchMaxWaitMillis * time.Millisecond

// deliver hands each feed its part of resp (or err), unless it was reset meanwhile, and
// returns the record bytes received. A full answer names every partition asked for; an
// incremental one only those with news.
func (bf *brokerFetcher) deliver(sent map[kafkareq.PartKey]sentPart, resp *kmsg.FetchResponse, err error, full bool) int64 {
	answers := map[kafkareq.PartKey]*kmsg.FetchResponseTopicPartition{}
	answerBytes := 0
	if resp != nil {
		for ti := range resp.Topics {
			t := &resp.Topics[ti]
			for pi := range t.Partitions {
				p := &t.Partitions[pi]
				answers[kafkareq.PartKey{Topic: t.Topic, ID: t.TopicID, Partition: p.Partition}] = p
				answerBytes += len(p.RecordBatches)
			}
		}
	}
	now := time.Now()
	var total int64
	shared := &answerBuffer{bytes: int64(answerBytes)}
	bf.mu.Lock()
	defer bf.mu.Unlock()
	for k, s := range sent {
		fd := s.fd
		p := answers[k]
		if p == nil { // answers name topics by id (v13+) or by name, never both
			p = answers[kafkareq.PartKey{Topic: k.Topic, Partition: k.Partition}]
		}
		if p == nil {
			p = answers[kafkareq.PartKey{ID: k.ID, Partition: k.Partition}]
		}
		if p != nil && p.ErrorCode == 0 {
			// What the broker last told of the partition, even to a feed reset since: it
			// tells it again only once it changes.
			bf.known[k] = kafkareq.Fetched{HighWatermark: p.HighWatermark, LastStableOffset: p.LastStableOffset, LogStartOffset: p.LogStartOffset}
		}
		if fd.closed || fd.gen != s.gen {
			continue
		}
		r := fetchResult{from: s.from, err: err}
		if err == nil {
			switch {
			case p != nil:
				r.f, r.err = bf.src.FetchedPartition(fd.topic, s.from, p)
				r.bytes = len(p.RecordBatches)
				if len(r.f.Batches) > 0 {
					r.hold = hold{shared: shared, bytes: batchBytes(r.f.Batches)}
					shared.parts++
					shared.held += r.hold.bytes
					shared.forwarded += r.hold.bytes
				}
			case full:
				r.err = fmt.Errorf("%s fetch of %s[%d]: %w", bf.src.Name, fd.topic, fd.partition, kafkareq.ErrNoAnswer)
			default:
				// No news from s.from. Said again, with what was last heard, only to a
				// runner that waits and was not told lately.
				known, ok := bf.known[k]
				if !ok || len(fd.buf) > 0 || fd.offset != s.from || now.Sub(fd.answered) < idleAnswerEvery {
					continue
				}
				r.f = known
			}
		}
		total += int64(r.bytes)
		fd.answered = now
		fd.add(r)
	}
	if shared.parts > 0 {
		bf.mem.add(shared.bytes)
	}
	return total
}

// add buffers r and moves the next fetch past it. An answer without batches replaces one
// before it that had none either: an idle partition holds at most one. Guarded by f.mu.
func (fd *feed) add(r fetchResult) {
	if r.err != nil {
		fd.failed = true
	} else if n := len(r.f.Batches); n > 0 {
		fd.offset = r.f.Batches[n-1].LastOffset() + 1
	}
	if l := len(fd.buf); l > 0 && r.err == nil && len(r.f.Batches) == 0 && fd.buf[l-1].err == nil && len(fd.buf[l-1].f.Batches) == 0 {
		fd.bufBytes -= fd.buf[l-1].bytes
		fd.buf = fd.buf[:l-1]
	}
	fd.buf = append(fd.buf, r)
	fd.bufBytes += r.bytes
	fd.signal()
	fd.f.obs.FetchBuffered(fd.mirror, fd.topic, fd.partition, int64(fd.bufBytes))
}
