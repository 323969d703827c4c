package datapath

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// FetchMemory bounds the fetched data one worker holds over all its partitions: the answers
// waiting in the partitions' fetch-ahead buffers and the answers of the fetches in flight.
// Each partition's buffer is bounded on its own (FetchBufferBytes), but a worker starting to
// mirror many partitions with a backlog would otherwise hold partitions × that much at once,
// as fast as the source answers and long before the destination has written it.
//
// A fetcher takes room for its next answer before it sends the fetch (the request's MaxBytes)
// and gives back what its partitions did not keep. What they keep counts as the memory it
// keeps alive: the buffers of the answers their parts are forwarded from (see answerBuffer),
// until the partitions' writes of them are answered (the batches in flight are slices of
// them); parts copied out of their answers when room is short count their copies. When the
// room is spent, fetchers wait for it in turn (first come, first served), so no source broker
// is starved by the others. Within the memory, a partition that holds its share of record
// bytes (the memory divided among the partitions fetching) is fetched no more until its
// writer takes some, so partitions whose writers are slow cannot hold it all.
type FetchMemory struct {
	limit int64
	// minTake is the least room a fetch is sent with: a broker answers a fetch with at least
	// one batch whatever its MaxBytes (KIP-74), so slivers of room would only be overrun.
	minTake int64

	feeds atomic.Int64 // partitions fetching

	mu      sync.Mutex
	used    int64
	running []*brokerFetcher // fetchers
	waiting []*brokerFetcher // for room, in turn
}

// DefaultFetchMemoryBytes is a worker's fetch memory unless configured: the buffers of 64
// busy partitions at DefaultFetchBufferBytes.
const DefaultFetchMemoryBytes = 256 << 20

// NewFetchMemory returns a bound of limit bytes, to be shared by every partition of a worker
// (PartitionConfig.FetchMemory).
func NewFetchMemory(limit int64) *FetchMemory {
	return &FetchMemory{limit: limit, minTake: min(largestBatch, limit/4)}
}

// largestBatch is about the largest batch a broker takes by default (message.max.bytes,
// 1 MiB and 12 bytes): the most a fetch's answer is likely to overrun its MaxBytes by.
const largestBatch = 1 << 20

// Used is the fetched bytes held now, and the room taken by fetches in flight.
func (m *FetchMemory) Used() int64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// join counts n partitions more fetching (negative: fewer).
func (m *FetchMemory) join(n int64) {
	if m != nil {
		m.feeds.Add(n)
	}
}

// share is what one partition may hold before the others have theirs: the memory divided
// among the partitions fetching.
func (m *FetchMemory) share() int64 {
	if m == nil {
		return math.MaxInt64
	}
	return max(1, m.limit/max(1, m.feeds.Load()))
}

// take takes room for one answer of bf, up to want bytes, and returns it; 0 when bf must
// wait: it is then in line, and poked when its turn may have come. One fetch takes at most
// half the memory divided among the fetchers, so the long polls of fetchers whose partitions
// are idle never hold the room the others' answers need. A nil FetchMemory bounds nothing.
func (m *FetchMemory) take(bf *brokerFetcher, want int64) int64 {
	if m == nil {
		return want
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	want = min(want, max(m.minTake, m.limit/int64(2*max(1, len(m.running)))))
	i := slices.Index(m.waiting, bf)
	room := m.limit - m.used
	if room < min(want, m.minTake) || i > 0 || (i < 0 && len(m.waiting) > 0) {
		if i < 0 {
			m.waiting = append(m.waiting, bf)
		}
		return 0
	}
	if i == 0 {
		m.waiting = m.waiting[1:]
		m.pokeFirst() // the next in line may fit in what is left
	}
	n := min(want, room)
	m.used += n
	return n
}

// add counts n more bytes held (negative: given back).
func (m *FetchMemory) add(n int64) {
	if m == nil || n == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used += n
	if n < 0 {
		m.pokeFirst()
	}
}

// start counts a fetcher that starts; leave counts it out again.
func (m *FetchMemory) start(bf *brokerFetcher) {
	if m != nil {
		m.mu.Lock()
		m.running = append(m.running, bf)
		m.mu.Unlock()
	}
}

// leave counts a stopping fetcher out and takes it out of the line.
func (m *FetchMemory) leave(bf *brokerFetcher) {
	if m != nil {
		m.mu.Lock()
		m.running = slices.DeleteFunc(m.running, func(x *brokerFetcher) bool { return x == bf })
		m.mu.Unlock()
		m.stepOut(bf)
	}
}

// squeeze has every fetcher copy buffered parts out of the answers they share where that
// gives memory back (see brokerFetcher.squeeze): room is short. Called without any fetcher's
// mu held.
func (m *FetchMemory) squeeze() {
	if m == nil {
		return
	}
	m.mu.Lock()
	running := slices.Clone(m.running)
	m.mu.Unlock()
	for _, bf := range running {
		bf.squeeze()
	}
}

// poke wakes the fetcher first in line: an answer may be squeezed now.
func (m *FetchMemory) poke() {
	if m != nil {
		m.mu.Lock()
		m.pokeFirst()
		m.mu.Unlock()
	}
}

// stepOut takes a fetcher out of the line: it has nothing to fetch, and would hold up the
// fetchers behind it until it has.
func (m *FetchMemory) stepOut(bf *brokerFetcher) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.waiting, bf); i >= 0 {
		m.waiting = slices.Delete(m.waiting, i, i+1)
		if i == 0 {
			m.pokeFirst()
		}
	}
}

// pokeFirst wakes the fetcher first in line. Guarded by mu.
func (m *FetchMemory) pokeFirst() {
	if len(m.waiting) > 0 {
		m.waiting[0].poke()
	}
}
