package mirrorengine

// The fetch side of the data path: one fetcher per source broker (per source client), as
// Kafka's own replica fetchers have. A broker answers one request per connection at a time,
// so one long-poll fetch per partition queued every idle partition's wait in front of the busy
// ones; one fetch carrying every partition led by the broker is answered as soon as any of
// them has data. Each partition's answers wait in a bounded buffer (fetch-ahead), so its next
// fetch is in flight while the session writes the previous answer.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchResponseMaxBytes bounds one fetch answer; PartitionMaxBytes bounds each partition's
// part, and the partitions' order rotates, so one busy partition cannot starve the others.
const fetchResponseMaxBytes = 32 << 20

type fetcherKey struct {
	cl     *kgo.Client
	broker int32
}

// fetchers are the running fetchers. A fetcher starts with its first feed and ends with its
// last.
var fetchers = struct {
	mu sync.Mutex
	m  map[fetcherKey]*brokerFetcher
}{m: map[fetcherKey]*brokerFetcher{}}

// brokerFetcher fetches for every feed of one source broker.
type brokerFetcher struct {
	key    fetcherKey
	src    cluster
	obs    Observer
	cancel context.CancelFunc

	mu     sync.Mutex
	feeds  []*feed
	rotate int           // where the next request starts in feeds
	wake   chan struct{} // a feed became fetchable
}

// feed is one partition's subscription to its leader's fetcher.
type feed struct {
	f         *brokerFetcher
	mirror    string
	topic     string
	meta      topicMeta
	partition int32
	maxBytes  int32
	bufLimit  int

	// Guarded by f.mu.
	offset   int64 // where the next fetch starts
	gen      uint64
	inflight bool // a fetch from offset is on its way
	failed   bool // an error waits in buf: no more fetches until the session took it
	closed   bool
	buf      []fetchResult
	bufBytes int
	ready    chan struct{} // capacity 1: buf changed
}

// fetchResult is one answer for a feed: what a fetch from `from` returned.
type fetchResult struct {
	from  int64
	f     fetched
	err   error
	bytes int
}

// subscribe adds a partition, to be read from offset, to the fetcher of its leader.
func subscribe(src cluster, meta topicMeta, cfg *PartitionConfig, offset int64) *feed {
	key := fetcherKey{src.cl, meta.leader}
	fetchers.mu.Lock()
	defer fetchers.mu.Unlock()
	bf := fetchers.m[key]
	if bf == nil {
		ctx, cancel := context.WithCancel(context.Background())
		bf = &brokerFetcher{key: key, src: src, obs: cfg.Observer, cancel: cancel, wake: make(chan struct{}, 1)}
		fetchers.m[key] = bf
		go bf.run(ctx)
	}
	fd := &feed{
		f: bf, mirror: cfg.Mirror, topic: cfg.Topic, meta: meta, partition: cfg.Partition,
		maxBytes: cfg.FetchMaxBytes, bufLimit: cfg.FetchBufferBytes, offset: offset, ready: make(chan struct{}, 1),
	}
	bf.mu.Lock()
	bf.feeds = append(bf.feeds, fd)
	bf.mu.Unlock()
	bf.poke()
	return fd
}

// close leaves the fetcher; the last feed to leave stops it.
func (fd *feed) close() {
	bf := fd.f
	fetchers.mu.Lock()
	defer fetchers.mu.Unlock()
	bf.mu.Lock()
	fd.closed = true
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

// next returns the answer of a fetch from offset. An offset other than where the buffered
// answers start (the session retries, or skipped ahead) drops them and fetches from there.
func (fd *feed) next(ctx context.Context, offset int64) (fetched, error) {
	bf := fd.f
	for {
		bf.mu.Lock()
		if len(fd.buf) > 0 && fd.buf[0].from != offset {
			fd.reset(offset)
		}
		if len(fd.buf) > 0 {
			r := fd.buf[0]
			fd.buf = fd.buf[1:]
			fd.bufBytes -= r.bytes
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
			return fetched{}, ctx.Err()
		}
	}
}

// reset drops what the feed holds and has in flight and fetches from offset next. Guarded
// by f.mu.
func (fd *feed) reset(offset int64) {
	fd.buf, fd.bufBytes = nil, 0
	fd.offset = offset
	fd.gen++
	fd.inflight, fd.failed = false, false
	fd.f.poke()
}

// fetchable tells whether the next request carries the feed. Guarded by f.mu.
func (fd *feed) fetchable() bool {
	return !fd.closed && !fd.failed && !fd.inflight && fd.bufBytes < fd.bufLimit
}

// sentPart is a feed's part of a request in flight.
type sentPart struct {
	fd   *feed
	gen  uint64
	from int64
}

type partKey struct {
	topic     string // for fetch versions before 13, which name topics
	id        [16]byte
	partition int32
}

func (bf *brokerFetcher) run(ctx context.Context) {
	for {
		req, sent := bf.request()
		if req == nil {
			select {
			case <-bf.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		began := time.Now()
		kresp, err := bf.src.cl.Broker(int(bf.key.broker)).Request(ctx, req)
		if ctx.Err() != nil {
			return
		}
		var resp *kmsg.FetchResponse
		if err == nil {
			resp = kresp.(*kmsg.FetchResponse)
			err = kerr.ErrorForCode(resp.ErrorCode)
			if err != nil {
				err = authErr(bf.src.name, "fetch", err)
			}
		}
		if err == nil && throttled(resp) {
			bf.deliver(sent, nil, nil)
			if storeSleep(ctx, time.Duration(resp.ThrottleMillis)*time.Millisecond) != nil {
				return
			}
			continue
		}
		bytes := bf.deliver(sent, resp, err)
		if err == nil {
			bf.obs.SourceFetch(bf.key.broker, len(sent), bytes)
			if bytes > 0 {
				bf.obs.FetchLatency(time.Since(began))
			}
		}
	}
}

// request builds a fetch of every fetchable feed, starting one further each time, and marks
// them in flight; nil when none is fetchable.
func (bf *brokerFetcher) request() (*kmsg.FetchRequest, map[partKey]sentPart) {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	n := len(bf.feeds)
	if n == 0 {
		return nil, nil
	}
	bf.rotate = (bf.rotate + 1) % n
	var req *kmsg.FetchRequest
	sent := map[partKey]sentPart{}
	topics := map[[16]byte]int{} // index in req.Topics
	for i := range n {
		fd := bf.feeds[(bf.rotate+i)%n]
		k := partKey{fd.topic, fd.meta.id, fd.partition}
		if _, dup := sent[k]; dup || !fd.fetchable() {
			continue // a second feed of one partition waits for the next request
		}
		if req == nil {
			req = newFetchRequest(fetchResponseMaxBytes)
		}
		ti, ok := topics[fd.meta.id]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = fd.topic, fd.meta.id
			req.Topics = append(req.Topics, rt)
			ti = len(req.Topics) - 1
			topics[fd.meta.id] = ti
		}
		req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, fetchPartition(fd.meta, fd.partition, fd.offset, fd.maxBytes))
		fd.inflight = true
		sent[k] = sentPart{fd: fd, gen: fd.gen, from: fd.offset}
	}
	return req, sent
}

// deliver hands each feed its part of resp (or err), unless it was reset meanwhile, and
// returns the record bytes received. A nil resp and err (a throttled request) delivers
// nothing: the feeds are fetched again.
func (bf *brokerFetcher) deliver(sent map[partKey]sentPart, resp *kmsg.FetchResponse, err error) int64 {
	answers := map[partKey]*kmsg.FetchResponseTopicPartition{}
	if resp != nil {
		for ti := range resp.Topics {
			t := &resp.Topics[ti]
			for pi := range t.Partitions {
				p := &t.Partitions[pi]
				answers[partKey{t.Topic, t.TopicID, p.Partition}] = p
			}
		}
	}
	var total int64
	bf.mu.Lock()
	defer bf.mu.Unlock()
	for k, s := range sent {
		fd := s.fd
		if fd.closed || fd.gen != s.gen {
			continue
		}
		fd.inflight = false
		if resp == nil && err == nil {
			continue
		}
		r := fetchResult{from: s.from, err: err}
		if err == nil {
			p := answers[k]
			if p == nil { // answers name topics by id (v13+) or by name, never both
				p = answers[partKey{topic: k.topic, partition: k.partition}]
			}
			if p == nil {
				p = answers[partKey{id: k.id, partition: k.partition}]
			}
			if p == nil {
				r.err = fmt.Errorf("%s fetch of %s[%d]: %w", bf.src.name, fd.topic, fd.partition, errNoAnswer)
			} else {
				r.f, r.err = bf.src.fetchedPartition(fd.topic, s.from, p)
				r.bytes = len(p.RecordBatches)
			}
		}
		total += int64(r.bytes)
		fd.add(r)
	}
	return total
}

// errNoAnswer: a sessionless fetch answers every partition it asked for.
var errNoAnswer = errors.New("partition missing from the answer")

// add buffers r and moves the next fetch past it. An answer without batches replaces one
// before it that had none either: an idle partition holds at most one. Guarded by f.mu.
func (fd *feed) add(r fetchResult) {
	if r.err != nil {
		fd.failed = true
	} else if n := len(r.f.batches); n > 0 {
		fd.offset = r.f.batches[n-1].lastOffset() + 1
	}
	if l := len(fd.buf); l > 0 && r.err == nil && len(r.f.batches) == 0 && fd.buf[l-1].err == nil && len(fd.buf[l-1].f.batches) == 0 {
		fd.buf[l-1] = r
	} else {
		fd.buf = append(fd.buf, r)
		fd.bufBytes += r.bytes
	}
	fd.signal()
	fd.f.obs.FetchBuffered(fd.mirror, fd.topic, fd.partition, int64(fd.bufBytes))
}
