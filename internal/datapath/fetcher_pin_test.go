package datapath

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch/batchtest"
)

// A partition fed a few records in an answer that carries a busy partition's megabytes gets
// a copy of its part: waiting in its buffer while its writes are slow, it must not keep the
// whole answer alive. The busy partition's part, most of the answer, is forwarded from the
// answer's buffer, uncopied; the fetch memory counts the whole buffer for it, the copy for
// the other.
func TestFetchAnswerSmallPartIsCopiedOut(t *testing.T) {
	var busy []byte
	for i := range 20 {
		busy = append(busy, batchtest.Source(t, int64(i*100), 0, batchtest.Records(100, 1), -1, 0)...)
	}
	few := batchtest.Source(t, 0, 0, batchtest.Records(1, 1), -1, 0)
	if !copiesOut(len(few), len(busy)+len(few)) || copiesOut(len(busy), len(busy)+len(few)) {
		t.Fatalf("a part of %d bytes beside one of %d: the scenario needs the small one copied and the large one not", len(few), len(busy))
	}
	// One buffer for the whole answer, as kgo reads it and kmsg slices it.
	answer := append(append([]byte(nil), busy...), few...)
	id := [16]byte{1}
	bf := &brokerFetcher{src: kafkareq.NewCluster("source", nil), obs: NopObserver{}, known: map[kafkareq.PartKey]kafkareq.Fetched{}}
	sent := map[kafkareq.PartKey]sentPart{}
	resp := kmsg.NewFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic, rt.TopicID = "t", id
	feeds := make([]*feed, 2)
	for p, part := range [][]byte{answer[:len(busy)], answer[len(busy):]} {
		fd := &feed{f: bf, topic: "t", meta: kafkareq.TopicMeta{ID: id}, partition: int32(p), maxBytes: 1 << 20, bufLimit: 4 << 20, ready: make(chan struct{}, 1)}
		feeds[p] = fd
		sent[fd.key()] = sentPart{fd: fd, gen: fd.gen}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.RecordBatches = int32(p), 2_000, 2_000, part
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	bf.deliver(sent, &resp, nil, true)

	clear(answer) // what still points into the answer's buffer sees this
	got := func(p int) []byte {
		var b []byte
		for _, batch := range feeds[p].buf[0].f.Batches {
			b = append(b, batch...)
		}
		return b
	}
	if !bytes.Equal(got(1), few) {
		t.Fatal("the small part still points into the answer's buffer: it keeps the whole answer alive")
	}
	if bytes.Equal(got(0), busy) {
		t.Fatal("the busy partition's part was copied out of the answer: its bytes are copied once more than needed")
	}
	if alive := []int64{feeds[0].buf[0].alive, feeds[1].buf[0].alive}; alive[0] != int64(len(answer)) || alive[1] != int64(len(few)) {
		t.Fatalf("the parts keep %v bytes alive, want %v: the answer's buffer and the copy", alive, []int{len(answer), len(few)})
	}
}

// Of two parts of an answer of equal size, both are copied out: a part forwarded from the
// answer's buffer keeps the other's bytes alive, and its partition's slow writer would keep
// them counted in the fetch memory after the other partition's writer took its part.
func TestFetchAnswerHalvesAreCopiedOut(t *testing.T) {
	if !copiesOut(100, 200) || copiesOut(101, 200) || copiesOut(0, 200) {
		t.Fatal("a part is forwarded from its answer's buffer only when it is more than half of it")
	}
}
