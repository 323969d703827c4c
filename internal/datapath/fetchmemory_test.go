package datapath

import (
	"context"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

// Fetchers wait for fetch memory in turn: one that comes when others wait gets in line behind
// them, memory given back wakes the first in line, and slivers of room send no fetch.
func TestFetchMemoryServesFetchersInTurn(t *testing.T) {
	const mib = 1 << 20
	m := NewFetchMemory(8 * mib) // a fetch takes 1 MiB to 4 MiB (half of it: one fetcher)
	a, b, c := &brokerFetcher{wake: make(chan struct{}, 1)}, &brokerFetcher{wake: make(chan struct{}, 1)}, &brokerFetcher{wake: make(chan struct{}, 1)}
	poked := func(bf *brokerFetcher) bool {
		select {
		case <-bf.wake:
			return true
		default:
			return false
		}
	}
	take := func(name string, bf *brokerFetcher, want, got int64) {
		t.Helper()
		if n := m.take(bf, want); n != got {
			t.Fatalf("%s took %d of %d bytes, want %d (used %d of %d)", name, n, want, got, m.Used(), 8*mib)
		}
	}
	take("a", a, 32*mib, 4*mib)
	take("b", b, 3*mib, 3*mib)
	take("b", b, 32*mib, mib) // what is left
	take("c", c, 32*mib, 0)
	take("a", a, 32*mib, 0) // behind c

	m.add(-mib / 2)
	if !poked(c) {
		t.Fatal("memory given back did not wake the fetcher first in line")
	}
	take("c", c, 32*mib, 0) // half a MiB: too little to send a fetch with
	m.add(-mib / 2)
	take("b", b, 32*mib, 0) // not in line yet: behind c and a
	take("c", c, 32*mib, mib)
	if !poked(a) {
		t.Fatal("the fetcher that got its turn did not wake the next in line")
	}
	take("a", a, 32*mib, 0) // nothing left
	m.leave(a)
	if !poked(b) {
		t.Fatal("a fetcher that stopped while first in line did not wake the next")
	}
	m.add(-2 * mib)
	take("b", b, 32*mib, 2*mib)
	if used := m.Used(); used != 8*mib {
		t.Fatalf("used %d, want %d", used, 8*mib)
	}

	var unbounded *FetchMemory
	if n := unbounded.take(a, 32*mib); n != 32*mib {
		t.Fatalf("no fetch memory gave %d of 32 MiB", n)
	}
}

// One fetch takes at most half the memory divided among the fetchers (and at least what a
// fetch is sent with), so fetchers whose partitions are idle leave room for the others.
func TestFetchMemoryDividesTheRoomOfAFetch(t *testing.T) {
	const mib = 1 << 20
	m := NewFetchMemory(64 * mib)
	bf := &brokerFetcher{wake: make(chan struct{}, 1)}
	for _, tc := range []struct {
		fetchers int
		want     int64
	}{{1, 32 * mib}, {4, 8 * mib}, {100, mib}} {
		for len(m.running) < tc.fetchers {
			m.start(&brokerFetcher{})
		}
		n := m.take(bf, 32*mib)
		if n != tc.want {
			t.Fatalf("with %d fetchers, a fetch took %d bytes, want %d", tc.fetchers, n, tc.want)
		}
		m.add(-n)
	}
}

// totalObserver keeps the most the fetch-ahead buffers held together.
type totalObserver struct {
	NopObserver
	mu        sync.Mutex
	held      map[int32]int64
	most, now int64
}

func (o *totalObserver) FetchBuffered(_, _ string, partition int32, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.now += bytes - o.held[partition]
	o.held[partition] = bytes
	o.most = max(o.most, o.now)
}

func (o *totalObserver) mostHeld() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most
}

// The fetch memory's limits: four partitions' buffers would hold four times the memory.
const memMaxBytes, memBufferBytes, memLimit = 4 << 10, 16 << 10, 16 << 10

// Partitions whose writers take nothing fill the fetch memory, not four buffers: the fetcher
// then waits for room, and still tells an idle partition's runner what it knows. When the
// writers read again, one at a time, each gets everything in order: the others, whose writers
// still take nothing, hold no more than their share of the memory.
func TestFetchMemoryBoundsWhatPartitionsHoldTogether(t *testing.T) {
	src := kafkatest.New(t)
	src.CreateTopic(t, "mem", 5, nil)
	fetchMemoryScenario(t, src, "mem")
}

func TestKafkaFetchMemoryBoundsWhatPartitionsHoldTogether(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, _ *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, 5, nil)
		fetchMemoryScenario(t, src, topic)
	})
}

// fetchMemoryScenario reads topic (5 partitions, one leader; 0 to 3 hold data, 4 none)
// through one fetcher bounded by memLimit.
func fetchMemoryScenario(t *testing.T, src *kafkatest.Cluster, topic string) {
	prod := src.ManualProducer(t)
	for p := range int32(4) {
		for range 20 { // batches of ~1.5 KiB
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 20, "a")...)
		}
	}
	end := src.EndOffsets(t, topic)
	source := kafkareq.NewCluster("source", src.Client(t))
	mem := NewFetchMemory(memLimit)
	obs := &totalObserver{held: map[int32]int64{}}
	feeds := make([]*feed, 5)
	for _, p := range []int32{4, 0, 1, 2, 3} { // the idle one first: the first fetch answers it

		meta, err := source.Metadata(context.Background(), topic, p)
		if err != nil {
			t.Fatal(err)
		}
		cfg := PartitionConfig{Mirror: "m1", Topic: topic, Partition: p, FetchMaxBytes: memMaxBytes, FetchBufferBytes: memBufferBytes, FetchMemory: mem, Observer: obs}
		feeds[p] = subscribe(source, meta, &cfg, 0)
		defer feeds[p].close()
	}

	// Nobody reads: the fetcher fills the memory and waits in line for room.
	bf := feeds[4].f
	deadline := time.Now().Add(30 * time.Second)
	for !inLine(mem, bf) {
		if time.Now().After(deadline) {
			t.Fatalf("the fetcher did not wait for fetch memory within 30 s (used %d of %d; buffers held up to %d together)", mem.Used(), memLimit, obs.mostHeld())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The idle partition's runner is still answered (with what the broker last said of it).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := feeds[4].next(ctx, 0); err != nil { // the answer of the session's first fetch
		t.Fatal(err)
	}
	idle, err := feeds[4].next(ctx, 0)
	if err != nil || len(idle.Batches) != 0 {
		t.Fatalf("the idle partition's runner, while the fetcher waited for memory: %d batches, %v; want an answer without news", len(idle.Batches), err)
	}

	largest := 0
	for p := range int32(4) {
		largest = max(largest, readFeed(t, feeds[p], 0, end[p]))
	}
	if most := obs.mostHeld(); most > memLimit+int64(largest) || most < memLimit/2 {
		t.Fatalf("the buffers held up to %d bytes together, want them filled up to the fetch memory (%d) plus at most one batch (%d), not each to its FetchBufferBytes (%d)", most, memLimit, largest, memBufferBytes)
	}
	for p := range int32(4) {
		if n := feeds[p].bufferedBytes(); n != 0 {
			t.Fatalf("%s[%d] holds %d bytes after its reader read everything", topic, p, n)
		}
	}
	// Feeds that leave give back what they hold, and so does the fetcher that stops.
	for _, fd := range feeds {
		fd.close()
	}
	requireGivenBack(t, mem)
}

// inLine tells whether bf waits for fetch memory.
func inLine(m *FetchMemory, bf *brokerFetcher) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.waiting) > 0 && m.waiting[0] == bf
}

func (fd *feed) bufferedBytes() int {
	fd.f.mu.Lock()
	defer fd.f.mu.Unlock()
	return fd.bufBytes
}

// Partitions mirror a backlog to a destination whose produces are slow through a fetch
// memory a fraction of their buffers: their buffers never hold more than it together, the
// logs end identical, and the partitions that stop give all of it back.
func TestMirrorWithinFetchMemory(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "bounded", 8, nil)
	for p := range int32(8) {
		for range 10 { // batches of ~1.5 KiB
			kafkatest.ProduceSync(t, prod, kafkatest.Records("bounded", p, 20, "a")...)
		}
	}
	slowProduces(dst, 5*time.Millisecond)
	mem := NewFetchMemory(memLimit)
	obs := &totalObserver{held: map[int32]int64{}}
	cfg := PartitionConfig{Mirror: "m1", Topic: "bounded", FirstStart: true, FetchMaxBytes: memMaxBytes, FetchBufferBytes: memBufferBytes, FetchMemory: mem, Observer: obs}
	run := startMirrorConfig(context.Background(), t, src.Client(t), dst.Client(t), cfg, 8)
	kafkatest.WaitIdentical(t, src, dst, "bounded", kafkatest.IdenticalWithin)
	run.stop(t)
	if most := obs.mostHeld(); most > memLimit+memMaxBytes {
		t.Fatalf("the buffers held up to %d bytes together, want at most the fetch memory (%d) plus one batch", most, memLimit)
	}
	requireGivenBack(t, mem)
}

// requireGivenBack waits until m holds nothing: the fetchers of the partitions that left stop
// and give back the room of their last fetches.
func requireGivenBack(t *testing.T, m *FetchMemory) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); m.Used() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fetch memory holds %d bytes once every partition left", m.Used())
		}
	}
}

// An answer the session took counts in the fetch memory until its writes are answered: the
// batches in flight are slices of it.
func TestFetchMemoryCountsAnAnswerUntilItsWritesAreAnswered(t *testing.T) {
	m := NewFetchMemory(1 << 20)
	bf := &brokerFetcher{obs: NopObserver{}, mem: m, wake: make(chan struct{}, 1)}
	fd := &feed{f: bf, maxBytes: 1 << 10, bufLimit: 8 << 10, ready: make(chan struct{}, 1),
		buf: []fetchResult{{from: 0, bytes: 100, hold: hold{bytes: 1000}}, {from: 10, bytes: 100, hold: hold{bytes: 3000}}}, bufBytes: 200}
	m.add(4000) // as add counted them
	ctx := context.Background()
	used := func(when string, want int64) {
		t.Helper()
		if got := m.Used(); got != want {
			t.Fatalf("%s: the fetch memory counts %d bytes, want %d", when, got, want)
		}
	}
	for i, from := range []int64{0, 10} {
		if _, err := fd.next(ctx, from); err != nil || fd.taking() != uint64(i+1) {
			t.Fatalf("answer %d: %v, numbered %d", i+1, err, fd.taking())
		}
	}
	used("both answers taken, their writes in flight", 4000)
	fd.doneWith(2) // the oldest write in flight comes from answer 2
	used("the first answer's writes answered", 3000)
	fd.doneWith(math.MaxUint64)
	used("every write answered", 0)
}

// Once the session took an answer and its writes are answered, the fetch memory counts it no
// more: nothing of the feed may keep its buffer alive then (the buffer a taken answer left
// in the feed's queue did, uncounted: a worker mirroring 128 partitions held twice its fetch
// memory).
func TestTakenAnswerIsNotKeptAlive(t *testing.T) {
	bf := &brokerFetcher{obs: NopObserver{}, wake: make(chan struct{}, 1)}
	fd := &feed{f: bf, maxBytes: 1 << 10, bufLimit: 8 << 10, ready: make(chan struct{}, 1)}
	first := bufferAnswer(t, fd, 0)
	bufferAnswer(t, fd, 1) // the queue goes on past the taken one
	f, err := fd.next(context.Background(), 0)
	if err != nil || len(f.Batches) != 1 {
		t.Fatalf("the first answer: %d batches, %v", len(f.Batches), err)
	}
	fd.doneWith(math.MaxUint64)
	for range 3 {
		runtime.GC()
	}
	if first.Value() != nil {
		t.Fatal("the taken answer's buffer is still reachable once its writes are answered")
	}
	runtime.KeepAlive(fd) // the feed lives on, with its queue
}

// bufferAnswer queues an answer of one batch at offset in fd, as deliver does, and returns a
// weak pointer to its buffer.
func bufferAnswer(t *testing.T, fd *feed, offset int64) weak.Pointer[byte] {
	answer := batchtest.Source(t, offset, 0, batchtest.Records(1, 1), -1, 0)
	fd.buf = append(fd.buf, fetchResult{from: offset, f: kafkareq.Fetched{Batches: []recordbatch.Batch{answer}}, bytes: len(answer)})
	fd.bufBytes += len(answer)
	return weak.Make(&answer[0])
}

// Once a write is answered, the session's queue of writes in flight does not keep its batch,
// a slice of a fetched answer the fetch memory counts no more, alive.
func TestAnsweredWriteIsNotKeptAlive(t *testing.T) {
	s := &session{m: &PartitionMirror{}, cfg: &PartitionConfig{Observer: NopObserver{}}}
	var first weak.Pointer[byte]
	for i := range int64(2) {
		batch := batchtest.Source(t, i, 0, batchtest.Records(1, 1), -1, 0)
		if i == 0 {
			first = weak.Make(&batch[0])
		}
		done := make(chan produced, 1)
		done <- produced{base: i}
		s.pending = append(s.pending, &inflight{batch: batch, expected: i, end: i + 1, done: done})
	}
	if err := s.awaitOldest(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runtime.GC()
	}
	if first.Value() != nil {
		t.Fatal("the answered write's batch is still reachable from the session's writes in flight")
	}
	runtime.KeepAlive(s)
}
