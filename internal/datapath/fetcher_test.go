package datapath

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// seenFetch is one of the mirror's fetches to a kfake cluster: its session epoch (0: full,
// starting a session) and the partitions it lists and forgets ("topic/partition", sorted).
type seenFetch struct {
	epoch            int32
	parts, forgotten []string
	maxBytes         map[string]int32 // PartitionMaxBytes of each of parts
	maxWait          int32
}

// fetchLog records the fetches of the mirror's fetchers to a kfake cluster: those of a fetch
// session that ask for at most fetchResponseMaxBytes, wait for data and name no rack (the
// comparator's consumers ask for more, a session's one-partition reads have no fetch session;
// session closes wait for nothing; raw reads and the cleaner's fetches name a rack).
type fetchLog struct {
	mu   sync.Mutex
	reqs []seenFetch
}

func watchFetches(t *testing.T, c *kafkatest.Cluster, topics ...string) *fetchLog {
	t.Helper()
	names := map[[16]byte]string{}
	for _, topic := range topics {
		names[c.Fake().TopicInfo(topic).TopicID] = topic
	}
	l := &fetchLog{}
	c.Fake().ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if req.Rack != "" || req.SessionEpoch < 0 || req.MaxBytes > fetchResponseMaxBytes || req.MaxWaitMillis == 0 {
			return nil, nil, false
		}
		name := func(topic string, id [16]byte) string {
			if req.Version >= 13 {
				return names[id]
			}
			return topic
		}
		seen := seenFetch{epoch: req.SessionEpoch, maxBytes: map[string]int32{}, maxWait: req.MaxWaitMillis}
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				part := fmt.Sprintf("%s/%d", name(rt.Topic, rt.TopicID), rp.Partition)
				seen.parts = append(seen.parts, part)
				seen.maxBytes[part] = rp.PartitionMaxBytes
			}
		}
		for _, ft := range req.ForgottenTopics {
			for _, p := range ft.Partitions {
				seen.forgotten = append(seen.forgotten, fmt.Sprintf("%s/%d", name(ft.Topic, ft.TopicID), p))
			}
		}
		slices.Sort(seen.parts)
		slices.Sort(seen.forgotten)
		l.mu.Lock()
		l.reqs = append(l.reqs, seen)
		l.mu.Unlock()
		return nil, nil, false
	})
	return l
}

// mark is where the fetches sent from now on start.
func (l *fetchLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// since returns the fetches from mark on, once there are at least n.
func (l *fetchLog) since(t *testing.T, mark, n int) []seenFetch {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.mu.Lock()
		if len(l.reqs) >= mark+n {
			out := slices.Clone(l.reqs[mark:])
			l.mu.Unlock()
			return out
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d fetches within 30 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func partitionNames(topic string, partitions int32) []string {
	var out []string
	for p := range partitions {
		out = append(out, fmt.Sprintf("%s/%d", topic, p))
	}
	slices.Sort(out)
	return out
}

// sessionOf returns the partitions the fetch session of cl's fetcher of broker holds.
func sessionOf(cl *kgo.Client, broker int32) []string {
	fetchers.mu.Lock()
	bf := fetchers.m[brokerKey{cl, broker}]
	fetchers.mu.Unlock()
	if bf == nil {
		return nil
	}
	bf.mu.Lock()
	defer bf.mu.Unlock()
	var out []string
	for k := range bf.session {
		out = append(out, fmt.Sprintf("%s/%d", k.Topic, k.Partition))
	}
	slices.Sort(out)
	return out
}

// waitSession waits until the session of cl's fetcher of broker holds exactly want.
func waitSession(t *testing.T, cl *kgo.Client, broker int32, want []string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := sessionOf(cl, broker)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fetch session holds %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireIdleFetches checks the next fetches of an idle steady state: incremental, listing
// and forgetting nothing, so idle partitions cost no bytes on the wire, and each a long poll.
// The steady state begins with the first long poll: for a long poll's time after a partition
// joined, fetches wait only joinWait.
func requireIdleFetches(t *testing.T, l *fetchLog) {
	t.Helper()
	mark, deadline := l.mark(), time.Now().Add(30*time.Second)
	for l.since(t, mark, 1)[0].maxWait != kafkareq.FetchMaxWaitMillis {
		if time.Now().After(deadline) {
			t.Fatalf("no long poll within 30 s after partitions joined")
		}
		mark++
	}
	// The fetch in flight when the mark is taken may still carry the last change.
	for i, f := range l.since(t, mark, 4)[1:] {
		if f.epoch <= 0 || len(f.parts) > 0 || len(f.forgotten) > 0 || f.maxWait != kafkareq.FetchMaxWaitMillis {
			t.Fatalf("idle fetch %d: epoch %d, lists %v, forgets %v, waits %d ms; want an incremental fetch listing nothing, waiting %d ms", i, f.epoch, f.parts, f.forgotten, f.maxWait, kafkareq.FetchMaxWaitMillis)
		}
	}
}

// withoutPart returns the fetches after which the session holds part no more, replaying the
// session from fetches' first (a full fetch's list replaces the session, an incremental one
// adds to it and forgets).
func withoutPart(fetches []seenFetch, part string) []seenFetch {
	var out []seenFetch
	held := false
	for _, f := range fetches {
		switch {
		case slices.Contains(f.parts, part):
			held = true
		case f.epoch == 0 || slices.Contains(f.forgotten, part):
			held = false
		}
		if !held {
			out = append(out, f)
		}
	}
	return out
}

// One fetch session holds every partition the source broker leads (issue #16: one fetcher
// per source broker); once they are idle, fetches list none of them, and a record in one
// partition makes the fetches list only that one.
func TestMirrorOneFetchCarriesEveryPartitionOfABroker(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "wide", 8, nil)
	fetches := watchFetches(t, src, "wide")
	sc := src.Client(t)
	run := startMirrorClients(context.Background(), t, sc, dst.Client(t), "wide", 8, true)
	for p := range int32(8) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("wide", p, 50, "a")...)
	}
	kafkatest.WaitIdentical(t, src, dst, "wide", kafkatest.IdenticalWithin)
	waitSession(t, sc, 0, partitionNames("wide", 8))
	requireIdleFetches(t, fetches)

	// A record in one partition still arrives while the others keep waiting, and only its
	// partition is listed again (at its new offset).
	mark := fetches.mark()
	kafkatest.ProduceSync(t, prod, kafkatest.Records("wide", 5, 1, "b")...)
	kafkatest.WaitIdentical(t, src, dst, "wide", kafkatest.IdenticalWithin)
	for _, f := range fetches.since(t, mark, 1) {
		if len(f.parts) > 0 && !slices.Equal(f.parts, []string{"wide/5"}) {
			t.Fatalf("a fetch after a record in wide/5 lists %v, want only wide/5", f.parts)
		}
	}
	run.stop(t)
}

// Partitions join a running fetch session (another topic's mirror on the same source
// client) and leave it (that mirror stops) without disturbing the partitions that stay.
func TestFetcherPartitionsJoinAndLeave(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	for _, topic := range []string{"stays", "joins"} {
		createBoth(t, src, dst, topic, 3, nil)
	}
	fetches := watchFetches(t, src, "stays", "joins")
	prod := src.ManualProducer(t)
	write := func(topic, tag string) {
		for p := range int32(3) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 20, tag)...)
		}
	}
	sc, dc := src.Client(t), dst.Client(t)
	stays := startMirrorClients(context.Background(), t, sc, dc, "stays", 3, true)
	write("stays", "a")
	kafkatest.WaitIdentical(t, src, dst, "stays", kafkatest.IdenticalWithin)
	waitSession(t, sc, 0, partitionNames("stays", 3))
	requireIdleFetches(t, fetches)

	joins := startMirrorClients(context.Background(), t, sc, dc, "joins", 3, true)
	write("joins", "a")
	write("stays", "b")
	kafkatest.WaitIdentical(t, src, dst, "joins", kafkatest.IdenticalWithin)
	kafkatest.WaitIdentical(t, src, dst, "stays", kafkatest.IdenticalWithin)
	waitSession(t, sc, 0, append(partitionNames("stays", 3), partitionNames("joins", 3)...))
	requireIdleFetches(t, fetches)

	mark := fetches.mark()
	joins.stop(t)
	write("stays", "c")
	kafkatest.WaitIdentical(t, src, dst, "stays", kafkatest.IdenticalWithin)
	waitSession(t, sc, 0, partitionNames("stays", 3))
	var forgotten []string
	for _, f := range fetches.since(t, mark, 1) {
		if f.epoch <= 0 {
			t.Fatalf("a fetch after partitions left started a new session, want them forgotten in the session")
		}
		forgotten = append(forgotten, f.forgotten...)
	}
	if slices.Sort(forgotten); !slices.Equal(forgotten, partitionNames("joins", 3)) {
		t.Fatalf("fetches forgot %v after the mirror of joins stopped, want %v", forgotten, partitionNames("joins", 3))
	}
	requireIdleFetches(t, fetches)
	stays.stop(t)
}

// The partitions of one source client and broker share one fetcher, which ends with the last
// of them.
func TestFetcherEndsWithItsLastPartition(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "t", 2, nil)
	for p := range int32(2) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("t", p, 10, "a")...)
	}
	sc := src.Client(t)
	run := startMirrorClients(context.Background(), t, sc, dst.Client(t), "t", 2, true)
	kafkatest.WaitIdentical(t, src, dst, "t", kafkatest.IdenticalWithin)
	fetchersOf := func(cl *kgo.Client) int {
		fetchers.mu.Lock()
		defer fetchers.mu.Unlock()
		n := 0
		for k := range fetchers.m {
			if k.cl == cl {
				n++
			}
		}
		return n
	}
	if n := fetchersOf(sc); n != 1 {
		t.Fatalf("%d fetchers run for one source client and broker, want 1", n)
	}
	run.stop(t)
	if n := fetchersOf(sc); n != 0 {
		t.Fatalf("%d fetchers run after their last partition left, want 0", n)
	}
}

// A broker that lost the fetch session, or sees a stale epoch or the other topic addressing,
// answers the fetch with a session error and reads nothing; a broker without a free session
// slot answers a full fetch with no session. The fetcher starts again with a full fetch of
// every partition, and no partition's data is lost or written twice.
func TestFetcherRecoversFromSessionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *kerr.Error // answers the next incremental fetch
		full bool        // then every full fetch is answered without a session until lifted
	}{
		{"session id not found", kerr.FetchSessionIDNotFound, false},
		{"invalid epoch", kerr.InvalidFetchSessionEpoch, false},
		{"topic id error", kerr.FetchSessionTopicIDError, false},
		{"no free slot", kerr.FetchSessionIDNotFound, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst, prod := mirroredTopic(t, "s", 4, nil)
			fetches := watchFetches(t, src, "s")
			write := func(tag string) {
				for p := range int32(4) {
					kafkatest.ProduceSync(t, prod, kafkatest.Records("s", p, 30, tag)...)
				}
			}
			sc := src.Client(t)
			run := startMirrorClients(context.Background(), t, sc, dst.Client(t), "s", 4, true)
			write("a")
			kafkatest.WaitIdentical(t, src, dst, "s", kafkatest.IdenticalWithin)
			waitSession(t, sc, 0, partitionNames("s", 4))

			var mu sync.Mutex
			kicked, sessionless, lifted := false, 0, false
			src.Fake().ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				src.Fake().KeepControl()
				req := kreq.(*kmsg.FetchRequest)
				mu.Lock()
				defer mu.Unlock()
				if req.Rack != "" || req.MaxWaitMillis == 0 { // not the mirror's (watchFetches)
					return nil, nil, false
				}
				switch {
				case !kicked && req.SessionEpoch > 0:
					kicked = true
					resp := req.ResponseKind().(*kmsg.FetchResponse)
					resp.ErrorCode = tc.err.Code
					return resp, nil, true
				case kicked && tc.full && !lifted && req.SessionEpoch == 0:
					sessionless++
					req.SessionEpoch = -1 // kfake answers without a session: SessionID 0
				}
				return nil, nil, false
			})
			mark := fetches.mark()
			write("b")
			kafkatest.WaitIdentical(t, src, dst, "s", kafkatest.IdenticalWithin)
			write("c")
			kafkatest.WaitIdentical(t, src, dst, "s", kafkatest.IdenticalWithin)
			mu.Lock()
			if !kicked || (tc.full && sessionless < 2) {
				t.Fatalf("the fault served %v and %d full fetches; want the session's loss and, without free slots, every fetch full", kicked, sessionless)
			}
			lifted = true
			mu.Unlock()
			fullAfter := false
			for _, f := range fetches.since(t, mark, 2) {
				// In any order: a fetch lists the partitions in the order they joined the fetcher.
				if f.epoch == 0 && slices.Equal(slices.Sorted(slices.Values(f.parts)), partitionNames("s", 4)) {
					fullAfter = true
				}
			}
			if !fullAfter {
				t.Fatal("no full fetch of every partition followed the session's loss")
			}
			// Once the broker has slots again, the next full fetch starts a session.
			mark = fetches.mark()
			write("d")
			kafkatest.WaitIdentical(t, src, dst, "s", kafkatest.IdenticalWithin)
			waitSession(t, sc, 0, partitionNames("s", 4))
			for n := 1; !slices.ContainsFunc(fetches.since(t, mark, n), func(f seenFetch) bool { return f.epoch > 0 }); n++ {
				// until an incremental fetch follows
			}
			requireIdleFetches(t, fetches)
			run.stop(t)
		})
	}
}

// bufferObserver keeps the most each partition's fetch-ahead buffer held.
type bufferObserver struct {
	NopObserver
	mu  sync.Mutex
	max map[int32]int64
}

func (o *bufferObserver) FetchBuffered(_, _ string, partition int32, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.max[partition] = max(o.max[partition], bytes)
}

func (o *bufferObserver) most(partition int32) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.max[partition]
}

// readFeed reads fd from offset until end and returns the largest batch it read. Every
// batch must start where the one before ended: nothing lost, nothing twice. What it read
// it is done with at once, as a session whose writes are all answered.
func readFeed(t *testing.T, fd *feed, offset, end int64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	largest := 0
	for offset < end {
		fd.doneWith(math.MaxUint64)
		f, err := fd.next(ctx, offset)
		if err != nil {
			t.Fatalf("reading %s[%d] at %d (end %d): %v", fd.topic, fd.partition, offset, end, err)
		}
		for _, b := range f.Batches {
			if b.BaseOffset() != offset {
				t.Fatalf("%s[%d]: a batch at %d, want %d", fd.topic, fd.partition, b.BaseOffset(), offset)
			}
			offset = b.LastOffset() + 1
			largest = max(largest, len(b))
		}
	}
	return largest
}

// A partition whose writer does not take its answers (a slow destination partition) fills
// its fetch-ahead buffer up to FetchBufferBytes, then leaves the fetch session; the other
// partitions of its source broker keep being fetched. When its writer reads again it
// rejoins where its buffer ends, and nothing of it is lost.
func TestFetcherSlowPartitionStallsNobody(t *testing.T) {
	src := kafkatest.New(t)
	src.CreateTopic(t, "slow", 3, nil)
	fetches := watchFetches(t, src, "slow")
	mark := fetches.mark()
	slowPartitionScenario(t, src, "slow")
	// slow/0 leaves the session when its buffer is full: forgotten by an incremental fetch,
	// or, when the other buffers were full at that moment too, left out of the session that
	// closed and of the full fetch that started the next one.
	var forgotten []string
	left := false
	for _, f := range fetches.since(t, mark, 1) {
		// A partition is fetched only while its buffer has room for a whole answer: never
		// into a sliver of room, one small batch a fetch.
		for part, max := range f.maxBytes {
			if max != slowMaxBytes {
				t.Fatalf("a fetch asked for %d bytes of %s, want %d (FetchMaxBytes)", max, part, slowMaxBytes)
			}
		}
		forgotten = append(forgotten, f.forgotten...)
		left = left || slices.Contains(f.forgotten, "slow/0") || (f.epoch == 0 && len(f.parts) > 0 && !slices.Contains(f.parts, "slow/0"))
	}
	if !left {
		t.Fatalf("the fetches forgot %v and every new session held slow/0; want slow/0, whose buffer was full, to leave the session", forgotten)
	}
	// While slow/0 waits for room, no fetch waits out a long poll: it rejoins the session
	// only once the fetch in flight is answered. Its reader took nothing, so it may have room
	// any moment. (Up to its rejoining: the scenario's end closes it.)
	seen := fetches.since(t, mark, 1)
	for len(seen) > 0 && !slices.Contains(seen[len(seen)-1].parts, "slow/0") {
		seen = seen[:len(seen)-1]
	}
	for _, f := range withoutPart(seen, "slow/0") {
		if f.maxWait != int32(minRoomWait.Milliseconds()) {
			t.Fatalf("a fetch while slow/0 waited for room in its buffer waited up to %d ms, want %v (minRoomWait)", f.maxWait, minRoomWait)
		}
	}
}

func TestKafkaFetcherSlowPartitionStallsNobody(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, _ *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, 3, nil)
		slowPartitionScenario(t, src, topic)
	})
}

// The slow partition scenario's limits: a buffer of two answers.
const slowMaxBytes, slowBufferBytes = 4 << 10, 8 << 10

// slowPartitionScenario reads partitions 1 and 2 of topic (3 partitions, one leader) through
// their fetcher while partition 0's reader takes nothing.
func slowPartitionScenario(t *testing.T, src *kafkatest.Cluster, topic string) {
	prod := src.ManualProducer(t)
	write := func(tag string) map[int32]int64 {
		for p := range int32(3) {
			for range 20 { // batches of ~1.5 KiB
				kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 20, tag)...)
			}
		}
		return src.EndOffsets(t, topic)
	}

	// Written first: a real broker may not know a new topic's leader epoch yet.
	end := write("a")
	sc := src.Client(t)
	source := kafkareq.NewCluster("source", sc)
	obs := &bufferObserver{max: map[int32]int64{}}
	feeds := make([]*feed, 3)
	for p := range int32(3) {
		meta, err := source.Metadata(context.Background(), topic, p)
		if err != nil {
			t.Fatal(err)
		}
		cfg := PartitionConfig{Mirror: "m1", Topic: topic, Partition: p, FetchMaxBytes: slowMaxBytes, FetchBufferBytes: slowBufferBytes, Observer: obs}
		feeds[p] = subscribe(source, meta, &cfg, 0)
		defer feeds[p].close()
	}
	broker := feeds[0].f.key.broker
	name := func(p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

	// Partition 0's reader takes nothing while the others read two rounds of data.
	readFeed(t, feeds[1], 0, end[1])
	readFeed(t, feeds[2], 0, end[2])
	waitSession(t, sc, broker, []string{name(1), name(2)})
	more := write("b")
	readFeed(t, feeds[1], end[1], more[1])
	readFeed(t, feeds[2], end[2], more[2])

	// Its reader reads again: everything arrives, in order, and it rejoins the session.
	largest := readFeed(t, feeds[0], 0, more[0])
	if most := obs.most(0); most > slowBufferBytes+int64(largest) || most < slowBufferBytes/2 {
		t.Fatalf("%s's buffer held up to %d bytes, want it filled up to FetchBufferBytes (%d) plus at most one batch (%d)", name(0), most, slowBufferBytes, largest)
	}
	waitSession(t, sc, broker, []string{name(0), name(1), name(2)})
}

// Source leadership moves between brokers while data flows: each moved partition leaves
// its old leader's fetch session and joins its new leader's, the partitions that stay are
// not disturbed, and the logs end identical.
func TestFetcherFollowsLeadersMidStream(t *testing.T) {
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.Brokers(3))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"), kafkatest.Brokers(3))
	const partitions = 9
	createBoth(t, src, dst, "moving", partitions, nil)
	sc := src.Client(t)
	run := startMirrorClients(context.Background(), t, sc, dst.Client(t), "moving", partitions, true)
	leaders := map[int32]int32{}
	moved := 0
	followLeaders := func() {
		t.Helper()
		want := map[int32][]string{}
		for p := range int32(partitions) {
			leader := src.Fake().LeaderFor("moving", p)
			if old, ok := leaders[p]; ok && old != leader {
				moved++
			}
			leaders[p] = leader
			want[leader] = append(want[leader], fmt.Sprintf("moving/%d", p))
		}
		for broker := range int32(3) {
			waitSession(t, sc, broker, want[broker])
		}
	}

	prod := src.ManualProducer(t)
	ctx, cancel := context.WithTimeout(context.Background(), kafkatest.IdenticalWithin)
	defer cancel()
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			p := int32(i % partitions)
			if err := prod.ProduceSync(ctx, kafkatest.Records("moving", p, 10, fmt.Sprintf("r%d", i))...).FirstErr(); err != nil {
				produced <- err
				return
			}
		}
	}()
	followLeaders()
	for range 3 {
		src.Fake().ShufflePartitionLeaders()
		followLeaders()
	}
	close(stop)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if moved == 0 {
		t.Fatal("no leader moved")
	}
	kafkatest.WaitIdentical(t, src, dst, "moving", kafkatest.IdenticalWithin)
	run.stop(t)
}

// liveSession returns the fetch session of cl's fetcher of broker: its id and epoch (epoch
// 0: none).
func liveSession(cl *kgo.Client, broker int32) (id, epoch int32) {
	fetchers.mu.Lock()
	bf := fetchers.m[brokerKey{cl, broker}]
	fetchers.mu.Unlock()
	if bf == nil {
		return 0, 0
	}
	bf.mu.Lock()
	defer bf.mu.Unlock()
	return bf.sessionID, bf.sessionEpoch
}

// Real Kafka gives the fetcher an incremental fetch session that holds every partition and
// goes on while they are idle; a broker without session slots
// (max.incremental.fetch.session.cache.slots=0) answers every full fetch without one, and
// the fetcher keeps fetching in full fetches. Either way the logs end identical.
func TestKafkaFetchSession(t *testing.T) {
	onKafka(t, func(t *testing.T, src, dst *kafkatest.Cluster) { fetchSessionScenario(t, src, dst, true) })
}

func TestKafkaFetchWithoutSessionSlots(t *testing.T) {
	noSlots := []kafkatest.Option{kafkatest.BrokerConfig("max.incremental.fetch.session.cache.slots", "0")}
	onKafkaFrom(t, "source-no-fetch-sessions", noSlots, func(t *testing.T, src, dst *kafkatest.Cluster) {
		fetchSessionScenario(t, src, dst, false)
	})
}

func fetchSessionScenario(t *testing.T, src, dst *kafkatest.Cluster, sessions bool) {
	topic := kafkatest.TopicFor(t, "")
	const partitions = 8
	createBoth(t, src, dst, topic, partitions, nil)
	prod := src.ManualProducer(t)
	sc := src.Client(t)
	run := startMirrorClients(context.Background(), t, sc, dst.Client(t), topic, partitions, true)
	for p := range int32(partitions) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 50, "a")...)
	}
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	meta, err := kafkareq.NewCluster("source", sc).Metadata(context.Background(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitSession(t, sc, meta.Leader, partitionNames(topic, partitions))

	// Idle, the session goes on, one incremental fetch after another.
	id, from := liveSession(sc, meta.Leader)
	if (id != 0) != sessions {
		t.Fatalf("fetch session id %d, want a session: %v", id, sessions)
	}
	for deadline := time.Now().Add(30 * time.Second); sessions; {
		now, epoch := liveSession(sc, meta.Leader)
		if now != id {
			t.Fatalf("the idle fetch session %d was replaced by %d", id, now)
		}
		if epoch >= from+3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle fetch session %d at epoch %d after 30 s, from %d", id, epoch, from)
		}
		time.Sleep(10 * time.Millisecond)
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 5, 1, "b")...)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
}

// The session moves on with each answer as the broker's does (FetchMetadata.nextEpoch):
// a full fetch's answer names the session (or none), an incremental one the next epoch,
// which wraps from the largest int32 to 1 (0 would start a new session).
func TestFetchSessionEpochs(t *testing.T) {
	for _, tc := range []struct {
		name              string
		id, epoch         int32 // before
		answerID          int32
		wantID, wantEpoch int32
	}{
		{"full fetch starts a session", 0, 0, 7, 7, 1},
		{"full fetch replaces a session", 7, 0, 8, 8, 1},
		{"no free slot", 7, 0, 0, 0, 0},
		{"incremental", 7, 41, 7, 7, 42},
		{"wraps", 7, math.MaxInt32, 7, 7, 1},
		{"the session ended", 7, 41, 0, 0, 0},
		{"another session", 7, 41, 9, 0, 0},
	} {
		bf := &brokerFetcher{sessionID: tc.id, sessionEpoch: tc.epoch}
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch = tc.id, tc.epoch
		resp := kmsg.NewPtrFetchResponse()
		resp.SessionID = tc.answerID
		bf.sessionAnswered(req, resp)
		if bf.sessionID != tc.wantID || bf.sessionEpoch != tc.wantEpoch {
			t.Errorf("%s: session %d epoch %d, want %d epoch %d", tc.name, bf.sessionID, bf.sessionEpoch, tc.wantID, tc.wantEpoch)
		}
	}
}
