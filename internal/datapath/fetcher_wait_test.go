package datapath

import (
	"context"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
)

// While partitions wait for room in their buffers, a fetch waits for data only until the
// first of them may have room again: about as long as its writer takes to write an answer.
// While partitions join, it waits only joinWait: the next may join meanwhile.
func TestFetchWaitsUntilAPartitionMayHaveRoom(t *testing.T) {
	const answer = 1 << 20
	longPoll := kafkareq.FetchMaxWaitMillis * time.Millisecond
	type part struct {
		full, failed bool
		writeTime    time.Duration // its writer took for its last answer
		joinedAgo    time.Duration // it joined the fetcher this long ago (0: long before)
	}
	idle := part{}
	for _, tc := range []struct {
		name  string
		parts []part
		want  time.Duration
	}{
		{"idle partitions: the long poll", []part{idle, idle}, longPoll},
		{"a full buffer whose writer wrote nothing yet", []part{idle, {full: true}}, minRoomWait},
		{"a writer that wrote its last answer in 40 ms", []part{idle, {full: true, writeTime: 40 * time.Millisecond}}, 40 * time.Millisecond},
		{"the first of two to have room", []part{idle, {full: true, writeTime: 40 * time.Millisecond}, {full: true, writeTime: 20 * time.Millisecond}}, 20 * time.Millisecond},
		{"a fast writer", []part{idle, {full: true, writeTime: time.Millisecond}}, minRoomWait},
		{"a slow writer", []part{idle, {full: true, writeTime: time.Second}}, longPoll},
		{"a failed partition waits for its session, not for room", []part{idle, {full: true, failed: true}}, longPoll},
		{"a partition that just joined", []part{idle, {joinedAgo: time.Millisecond}}, joinWait},
		{"a partition that joined a long poll ago", []part{idle, {joinedAgo: longPoll}}, longPoll},
		{"a partition that just joined beside one waiting for room", []part{{joinedAgo: time.Millisecond}, {full: true, writeTime: 40 * time.Millisecond}}, joinWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bf := &brokerFetcher{obs: NopObserver{}, session: map[kafkareq.PartKey]sentPart{}, known: map[kafkareq.PartKey]kafkareq.Fetched{}}
			for i, p := range tc.parts {
				fd := &feed{f: bf, topic: "t", meta: kafkareq.TopicMeta{ID: [16]byte{1}}, partition: int32(i), maxBytes: answer, bufLimit: 4 * answer,
					failed: p.failed, writeTime: p.writeTime, ready: make(chan struct{}, 1)}
				if p.joinedAgo > 0 {
					fd.joined = time.Now().Add(-p.joinedAgo)
				}
				if p.full {
					fd.bufBytes = fd.bufLimit
				}
				bf.feeds = append(bf.feeds, fd)
			}
			req, _, _, _ := bf.request()
			if req == nil {
				t.Fatal("no fetch: the idle partition must be fetched")
			}
			if got := time.Duration(req.MaxWaitMillis) * time.Millisecond; got != tc.want {
				t.Fatalf("the fetch waits up to %v, want %v", got, tc.want)
			}
		})
	}
}

// A writer's time for an answer runs from taking it to asking for the next; an answer
// without data (an idle partition's news) says nothing of its pace.
func TestFeedMeasuresItsWriter(t *testing.T) {
	bf := &brokerFetcher{obs: NopObserver{}, wake: make(chan struct{}, 1)}
	fd := &feed{f: bf, maxBytes: 1 << 20, bufLimit: 4 << 20, ready: make(chan struct{}, 1),
		buf: []fetchResult{{from: 0, bytes: 100}, {from: 10}, {from: 10, bytes: 100}}}
	ctx := context.Background()
	if _, err := fd.next(ctx, 0); err != nil || fd.took.IsZero() {
		t.Fatalf("taking an answer with data: %v, took %v; want its time kept", err, fd.took)
	}
	fd.took = fd.took.Add(-40 * time.Millisecond) // written in 40 ms
	if _, err := fd.next(ctx, 10); err != nil || fd.writeTime < 40*time.Millisecond {
		t.Fatalf("asking again: %v, write time %v; want at least 40 ms", err, fd.writeTime)
	}
	written := fd.writeTime
	if _, err := fd.next(ctx, 10); err != nil || fd.writeTime != written {
		t.Fatalf("asking again after an answer without data: %v, write time %v; want %v kept", err, fd.writeTime, written)
	}
}
