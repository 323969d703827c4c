package datapath

import (
	"bytes"
	"context"
	"math"
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

// The parts of a fetch answer are forwarded from the answer's one buffer, which the fetch
// memory counts once, whole, until every part is let go. Only when memory is short, and only
// once the busy partition's part was written, is the small part that still waits in its
// buffer copied out: it alone would otherwise keep the whole answer alive. The fetcher waiting
// for room is woken when that becomes possible.
func TestFetchAnswerPartIsCopiedOutOnceTheOthersAreWritten(t *testing.T) {
	busy, few := partOf(t, 20), partOf(t, 1)
	a := deliverAnswer(t, busy, few)
	// Another fetcher waits for room.
	waiting := &brokerFetcher{wake: make(chan struct{}, 1)}
	if a.mem.take(waiting, 1<<20) != 0 {
		t.Fatal("the scenario needs a fetcher waiting for room")
	}

	a.bf.squeeze()
	a.used("squeezed before any part was written", len(a.answer))
	if !a.forwarded(1) {
		t.Fatal("the small part was copied out while the busy one, still buffered, keeps the answer alive anyway")
	}
	ctx := context.Background()
	if _, err := a.feeds[0].next(ctx, 0); err != nil {
		t.Fatal(err)
	}
	a.bf.squeeze()
	if !a.forwarded(1) {
		t.Fatal("the small part was copied out while the busy one's writes were in flight from the answer")
	}
	a.feeds[0].doneWith(math.MaxUint64)
	select {
	case <-waiting.wake:
	default:
		t.Fatal("the fetcher waiting for room was not woken once the answer could be squeezed")
	}
	a.used("the busy part written, the small one buffered", len(a.answer))

	a.bf.squeeze()
	a.used("squeezed", len(few))
	if a.forwarded(1) {
		t.Fatal("the small part still points into the answer's buffer: it keeps the whole answer alive")
	}
	f, err := a.feeds[1].next(ctx, 0)
	if err != nil || len(f.Batches) != 1 || !bytes.Equal(f.Batches[0], few) {
		t.Fatalf("the small part's copy: %v, %v; want its batch", f.Batches, err)
	}
	a.feeds[1].doneWith(math.MaxUint64)
	a.used("every part written", 0)
}

// Parts that hold more than half of their answer once the others are written are copied out
// only when their partitions are full (their writers may not take them for long): a copy that
// gives back less than it copies is not worth it while those writers read on.
func TestFetchAnswerPartsOfFullPartitionsAreCopiedOut(t *testing.T) {
	parts := [][]byte{partOf(t, 8), partOf(t, 6), partOf(t, 6)}
	a := deliverAnswer(t, parts...)
	if _, err := a.feeds[0].next(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	a.feeds[0].doneWith(math.MaxUint64)
	a.bf.squeeze()
	a.used("squeezed while the partitions read on", len(a.answer))
	if !a.forwarded(1) || !a.forwarded(2) {
		t.Fatal("parts were copied out while their partitions read on")
	}
	for _, fd := range a.feeds[1:] {
		fd.bufLimit = fd.bufBytes // full: no room for another answer
	}
	a.bf.squeeze()
	a.used("squeezed with the partitions full", len(parts[1])+len(parts[2]))
	if a.forwarded(1) || a.forwarded(2) {
		t.Fatal("the parts of full partitions still keep the whole answer alive")
	}
	for p := 1; p < 3; p++ {
		if b := a.bufferedBatches(p); !bytes.Equal(b, parts[p]) {
			t.Fatalf("partition %d holds %d bytes that are not its part", p, len(b))
		}
	}
}

// partOf returns a partition's part of a fetch answer: batches of 100 one-byte records.
func partOf(t *testing.T, batches int) []byte {
	var part []byte
	for i := range batches {
		part = append(part, batchtest.Source(t, int64(i*100), 0, batchtest.Records(100, 1), -1, 0)...)
	}
	return part
}

// deliveredAnswer is a fetch answer delivered to one feed per part, in a fetch memory with
// a KiB of room left.
type deliveredAnswer struct {
	t      *testing.T
	answer []byte // the answer's one buffer, as kgo reads it and kmsg slices it
	mem    *FetchMemory
	bf     *brokerFetcher
	feeds  []*feed
}

func deliverAnswer(t *testing.T, parts ...[]byte) *deliveredAnswer {
	t.Helper()
	a := &deliveredAnswer{t: t, answer: bytes.Join(parts, nil)}
	a.mem = NewFetchMemory(int64(len(a.answer) + 1024))
	id := [16]byte{1}
	a.bf = &brokerFetcher{src: kafkareq.NewCluster("source", nil), obs: NopObserver{}, mem: a.mem, wake: make(chan struct{}, 1), known: map[kafkareq.PartKey]kafkareq.Fetched{}}
	sent := map[kafkareq.PartKey]sentPart{}
	resp := kmsg.NewFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "t", id
	at := 0
	for p, part := range parts {
		fd := &feed{f: a.bf, topic: "t", meta: kafkareq.TopicMeta{ID: id}, partition: int32(p), maxBytes: 1 << 20, bufLimit: 4 << 20, ready: make(chan struct{}, 1)}
		a.feeds = append(a.feeds, fd)
		a.bf.feeds = append(a.bf.feeds, fd)
		sent[fd.key()] = sentPart{fd: fd, gen: fd.gen}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = int32(p), 2_000, 2_000, a.answer[at:at+len(part)]
		rt.Partitions = append(rt.Partitions, rp)
		at += len(part)
	}
	resp.Topics = append(resp.Topics, rt)
	a.bf.deliver(sent, &resp, nil, true)
	a.used("delivered", len(a.answer))
	for p := range parts {
		if !a.forwarded(p) {
			t.Fatalf("partition %d's part was copied out of the answer as it was delivered", p)
		}
	}
	return a
}

func (a *deliveredAnswer) used(when string, want int) {
	a.t.Helper()
	if got := a.mem.Used(); got != int64(want) {
		a.t.Fatalf("%s: the fetch memory counts %d bytes, want %d", when, got, want)
	}
}

// forwarded tells whether partition p's buffered part still points into the answer's buffer.
func (a *deliveredAnswer) forwarded(p int) bool {
	b := a.feeds[p].buf[0].f.Batches[0]
	at, start := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(a.answer)))
	return at >= start && at < start+uintptr(len(a.answer))
}

// bufferedBatches is partition p's buffered part.
func (a *deliveredAnswer) bufferedBatches(p int) []byte {
	var b []byte
	for _, r := range a.feeds[p].buf {
		for _, batch := range r.f.Batches {
			b = append(b, batch...)
		}
	}
	return b
}
