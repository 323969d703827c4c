package kafkatest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var compactConfig = map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}

// gzipBatch produces one gzip batch of records with the given keys (value: key and round).
// Timestamps are recent: kfake applies retention when it compacts.
func gzipBatch(t *testing.T, cl *kgo.Client, topic, round string, keys ...string) {
	t.Helper()
	now := time.Now().UnixMilli()
	recs := make([]rec, len(keys))
	for i, k := range keys {
		recs[i] = kv(k, k+"@"+round, now+int64(i))
	}
	if rp := produceRaw(t, cl, topic, 0, buildBatch(recs, batchSpec{gzip: true})); rp.ErrorCode != 0 {
		t.Fatalf("produce to %s: %v", topic, kerr.ErrorForCode(rp.ErrorCode))
	}
}

// consumed reads a partition with a kgo consumer (fetch sessions and all) and returns
// "offset:key" for every record.
func consumed(t *testing.T, c *Cluster, topic string, want int) []string {
	t.Helper()
	cl := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t)
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming %s: %v (so far %v)", topic, err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Key)) })
	}
	return got
}

// Apache Kafka's cleaner keeps a partially cleaned batch's base offset, original last offset
// and codec: leading, inner and trailing holes inside one batch. kfake's compaction shrinks
// the last offset and decompresses; the Cleaner restores both for every reader.
func TestStrictCleanerKeepsBaseLastOffsetAndCodec(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "c", 1, compactConfig)
	cl := c.Client(t)
	gzipBatch(t, cl, "c", "1", "a", "b", "c", "d", "e") // 0-4
	gzipBatch(t, cl, "c", "2", "a", "b", "f", "g", "h") // 5-9
	gzipBatch(t, cl, "c", "3", "d", "e", "x", "y", "z") // 10-14
	gzipBatch(t, cl, "c", "4", "f", "g", "q")           // 15-17
	gzipBatch(t, cl, "c", "5", "w")                     // 18: the active batch, never cleaned

	k := NewCleaner(t, c)
	k.Clean(t)
	l := readLog(t, cl, "c", 0)
	want := []batchSpan{{0, 4, 1, 1}, {5, 9, 3, 1}, {10, 14, 5, 1}, {15, 17, 3, 1}, {18, 18, 1, 1}}
	if got := l.batches; !slices.Equal(got, want) {
		t.Fatalf("batches %+v, want %+v (base, last, records, codec)", got, want)
	}
	if got := layout(l); got != "..d..dd..dddddddddd" {
		t.Fatalf("log %q", got)
	}
	wantRecords := []string{"2:c", "5:a", "6:b", "9:h", "10:d", "11:e", "12:x", "13:y", "14:z", "15:f", "16:g", "17:q", "18:w"}
	if got := consumed(t, c, "c", len(wantRecords)); !slices.Equal(got, wantRecords) {
		t.Fatalf("consumer read %v, want %v", got, wantRecords)
	}

	// A second round: the first batch loses its last record and goes; kfake moves the log
	// start to the next batch, which keeps its restored shape.
	gzipBatch(t, cl, "c", "6", "c", "h", "r") // 19-21
	gzipBatch(t, cl, "c", "7", "s")           // 22
	k.Clean(t)
	l = readLog(t, cl, "c", 0)
	want = []batchSpan{{5, 9, 2, 1}, {10, 14, 5, 1}, {15, 17, 3, 1}, {18, 18, 1, 1}, {19, 21, 3, 1}, {22, 22, 1, 1}}
	if got := l.batches; l.logStart != 5 || !slices.Equal(got, want) {
		t.Fatalf("log start %d, batches %+v; want 5 and %+v", l.logStart, got, want)
	}
	if got := layout(l); got != "dd...ddddddddddddd" {
		t.Fatalf("log %q", got)
	}
}

// Without the Cleaner, kfake's own shape: the last offset shrinks to the last record kept
// and the batch is stored uncompressed.
func TestKfakeCompactionShrinksLastOffset(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "c", 1, compactConfig)
	cl := c.Client(t)
	gzipBatch(t, cl, "c", "1", "a", "b", "c", "d", "e")
	gzipBatch(t, cl, "c", "2", "a", "b", "d", "e")
	gzipBatch(t, cl, "c", "3", "q")
	c.Fake().Compact()
	got := readLog(t, cl, "c", 0).batches
	if want := []batchSpan{{0, 2, 1, 0}, {5, 8, 4, 1}, {9, 9, 1, 1}}; !slices.Equal(got, want) {
		t.Fatalf("batches %+v, want %+v", got, want)
	}
}

// Every codec keeps its codec through the Cleaner.
func TestStrictCleanerEveryCodec(t *testing.T) {
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()} {
		c := New(t)
		c.CreateTopic(t, "c", 1, compactConfig)
		prod := c.Client(t, kgo.DefaultProduceTopic("c"), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(10*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		// One batch per round: 0-19 keeps k6 at 13 and k3-k5 at 17-19, 20-24 keeps k2-k0 at
		// 22-24, and 25 is the active batch.
		for round, keys := range [][]int{{0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5}, {0, 1, 2, 0, 1}, {9}} {
			var recs []*kgo.Record
			for _, k := range keys {
				recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint("k", k)), Value: []byte(fmt.Sprint(round))})
			}
			if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cl := c.Client(t)
		before := readLog(t, cl, "c", 0).batches
		NewCleaner(t, c).Clean(t)
		after := readLog(t, cl, "c", 0)
		if got := layout(after); got != ".............d...ddd..dddd" {
			t.Fatalf("codec %v: log %q", codec, got)
		}
		for i, b := range after.batches {
			if b.base != before[i].base || b.last != before[i].last || b.codec != before[i].codec {
				t.Fatalf("codec %v: batch %+v was %+v: base, last offset or codec changed", codec, b, before[i])
			}
		}
		if got := consumed(t, c, "c", len(after.entries)); len(got) != 8 || got[0] != "13:k6" || got[7] != "25:k9" {
			t.Fatalf("codec %v: consumer read %v", codec, got)
		}
	}
}

// cleanerCase is a kfake cluster with a topic "c" of configs, and what compacts it: the
// Cleaner, or kfake's own compaction.
func cleanerCase(t *testing.T, cleaner bool, configs map[string]*string) (*Cluster, *kgo.Client, func()) {
	c := New(t)
	c.CreateTopic(t, "c", 1, configs)
	if cleaner {
		k := NewCleaner(t, c)
		return c, c.Client(t), func() { k.Clean(t) }
	}
	return c, c.Client(t), c.Fake().Compact
}

// A marker whose producer has no data left stays, as in Apache Kafka until delete.retention.ms;
// kfake alone drops it.
func TestStrictCleanerKeepsMarkers(t *testing.T) {
	for _, cleaner := range []bool{false, true} {
		c, cl, clean := cleanerCase(t, cleaner, compactConfig)
		ctx := testCtx(t)
		now := time.Now().UnixMilli() // older records would fall to retention
		mustProduce(t, cl, "c", 0, kv("z", "0", now))
		txp := c.Client(t, kgo.TransactionalID("aborts"), kgo.DefaultProduceTopic("c"))
		transaction(ctx, t, txp, kgo.TryAbort, &kgo.Record{Key: []byte("a"), Value: []byte("x")})
		waitOffsets(t, cl, "c", 0, offsets{0, 3, 3})
		mustProduce(t, cl, "c", 0, kv("b", "1", now))
		mustProduce(t, cl, "c", 0, kv("b", "2", now))
		clean()
		want := "d..dd" // kfake: the aborted data and its marker are gone
		if cleaner {
			want = "d.Ldd" // the marker stays; with its data gone it closes nothing
		}
		if got := layout(readLog(t, cl, "c", 0)); got != want {
			t.Fatalf("cleaner %v: log %q, want %q", cleaner, got, want)
		}
	}
}

// kfake drops an aborted transaction's marker once its data is gone and, when that leaves the
// marker first, moves the log start past it; Apache Kafka keeps the marker, and so the log
// start, until delete.retention.ms. The Cleaner keeps the log start at the marker for every
// reader until a DeleteRecords moves it.
func TestStrictCleanerKeepsTheLogStartAtAMarker(t *testing.T) {
	for _, cleaner := range []bool{false, true} {
		// Apache Kafka refuses DeleteRecords unless the policy has delete.
		c, cl, clean := cleanerCase(t, cleaner, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact,delete")})
		ctx := testCtx(t)
		now := time.Now().UnixMilli() // older records would fall to retention
		txp := c.Client(t, kgo.TransactionalID("aborts"), kgo.DefaultProduceTopic("c"))
		transaction(ctx, t, txp, kgo.TryAbort, &kgo.Record{Key: []byte("a"), Value: []byte("x")})
		waitOffsets(t, cl, "c", 0, offsets{0, 2, 2})
		for i := range 3 { // 2, 3 and 4, the active batch, which is never cleaned
			mustProduce(t, cl, "c", 0, kv("b", fmt.Sprint(i), now))
		}
		clean()
		l := readLog(t, cl, "c", 0)
		start, want := int64(3), "dd" // kfake: the marker is gone, the log starts after it
		if cleaner {
			start, want = 1, "L.dd"
		}
		if got := layout(l); l.logStart != start || got != want {
			t.Fatalf("cleaner %v: log start %d, log %q; want %d, %q", cleaner, l.logStart, got, start, want)
		}
		if !cleaner {
			continue
		}
		if got := consumed(t, c, "c", 2); !slices.Equal(got, []string{"3:b", "4:b"}) {
			t.Fatalf("consumer read %v", got)
		}
		for _, at := range []int64{2, 3} { // below kfake's log start, then at it
			deleteRecords(t, cl, "c", 0, at)
			if got := readLog(t, cl, "c", 0).logStart; got != at {
				t.Fatalf("after DeleteRecords(%d) the log starts at %d", at, got)
			}
		}
	}
}

// A DeleteRecords below the log start leaves it and succeeds, as on Apache Kafka
// (TestKafkaDeleteRecordsBelowTheLogStart), where kfake refuses it OFFSET_OUT_OF_RANGE; one past
// the high watermark is refused.
func TestStrictCleanerDeletesRecordsBelowTheLogStart(t *testing.T) {
	// Apache Kafka refuses DeleteRecords unless the policy has delete.
	c, cl, _ := cleanerCase(t, true, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact,delete")})
	for i := range 3 {
		mustProduce(t, cl, "c", 0, kv("k", fmt.Sprint(i), time.Now().UnixMilli()))
	}
	deleteRecords(t, c.Client(t), "c", 0, 2)
	if rp := deleteRecordsAnswer(t, cl, "c", 0, 1); rp.ErrorCode != 0 || rp.LowWatermark != 2 {
		t.Fatalf("DeleteRecords(1) below the log start 2: %v, low watermark %d; want no error, 2", kerr.ErrorForCode(rp.ErrorCode), rp.LowWatermark)
	}
	if got := partitionOffsets(t, cl, "c", 0); got.start != 2 {
		t.Fatalf("offsets %+v after DeleteRecords(2) and DeleteRecords(1), want the log start at 2", got)
	}
	if rp := deleteRecordsAnswer(t, cl, "c", 0, 4); rp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("DeleteRecords(4) past the high watermark 3: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(rp.ErrorCode))
	}
}

// markerFirst is a cleaned topic "c" whose first batch is an aborted transaction's marker
// (offset 1), which the Cleaner keeps and kfake dropped: the log starts at 1 for readers,
// kfake's own at 3. Clean cleans it; the log ends at 5.
func markerFirst(t *testing.T) (c *Cluster, cl *kgo.Client, clean func()) {
	t.Helper()
	// Apache Kafka refuses DeleteRecords unless the policy has delete.
	c, cl, clean = cleanerCase(t, true, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact,delete")})
	now := time.Now().UnixMilli() // older records would fall to retention
	txp := c.Client(t, kgo.TransactionalID("aborts"), kgo.DefaultProduceTopic("c"))
	transaction(testCtx(t), t, txp, kgo.TryAbort, &kgo.Record{Key: []byte("a"), Value: []byte("x")})
	waitOffsets(t, cl, "c", 0, offsets{0, 2, 2})
	for i := range 3 { // 2, 3 and 4, the active batch, which is never cleaned
		mustProduce(t, cl, "c", 0, kv("b", fmt.Sprint(i), now))
	}
	return c, cl, clean
}

// A fetch waiting for records while a Clean runs is answered with the log start the Cleaner
// keeps, not the one kfake moved meanwhile (a mirror copies it to its destination: seed
// 415529436 of the datapath's randomized test).
func TestStrictCleanerAnswersALongPollAcrossAClean(t *testing.T) {
	c, cl, clean := markerFirst(t)
	waiting := make(chan struct{})
	var once sync.Once
	c.Fake().ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		if kreq.(*kmsg.FetchRequest).MaxWaitMillis == 10_000 { // the fetch below, as kfake gets it
			once.Do(func() { close(waiting) })
		}
		return nil, nil, false
	})
	req, br := fetchRequest(t, c, "c", map[int32]int64{0: 5}, 10*time.Second)
	type answer struct {
		resp *kmsg.FetchResponse
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := req.RequestWith(testCtx(t), br)
		answers <- answer{resp, err}
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch never reached kfake")
	}
	clean()
	mustProduce(t, cl, "c", 0, kv("z", "5", time.Now().UnixMilli()))
	a := <-answers
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.resp.Topics) != 1 || len(a.resp.Topics[0].Partitions) != 1 {
		t.Fatalf("answer %+v", a.resp)
	}
	if p := a.resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LogStartOffset != 1 || p.HighWatermark != 6 {
		t.Fatalf("answer: error %v, log start %d, high watermark %d; want none, 1, 6", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset, p.HighWatermark)
	}
}

// Fetch faults injected on a cleaned cluster are served, with the log start the Cleaner keeps.
func TestStrictCleanerServesFetchFaults(t *testing.T) {
	c, _, clean := markerFirst(t)
	clean()
	faults := c.EmptyFetches(t, "c", 0, 1)
	resp := sessionlessFetch(t, c, "c", 1)
	if hw, n, err := answered(resp); hw != 5 || n != 0 || err != nil {
		t.Fatalf("empty answer: hw %d, %d batches, %v; want hw 5, no batches, no error", hw, n, err)
	}
	if got := resp.Topics[0].Partitions[0].LogStartOffset; got != 1 {
		t.Fatalf("empty answer: log start %d, want the marker's, 1", got)
	}
	faults.Wait(t, time.Second)
	if hw, n, err := answered(sessionlessFetch(t, c, "c", 1)); hw != 5 || n != 3 || err != nil {
		t.Fatalf("after the fault: hw %d, %d batches, %v; want the marker and two batches", hw, n, err)
	}
}

// A DeleteRecords below the log start succeeds and leaves the log start where it is: what the
// Cleaner answers for a log start it keeps below kfake's, which refuses it.
func TestKafkaDeleteRecordsBelowTheLogStart(t *testing.T) {
	for _, v := range KafkaVersions() {
		t.Run(v, func(t *testing.T) {
			c := Shared(t, "kafka-"+v, Kafka(v))
			Tally(t, c.Broker())
			c.CreateTopic(t, "below", 1, nil)
			cl := c.Client(t)
			for i := range 3 {
				mustProduce(t, cl, "below", 0, kv("k", fmt.Sprint(i), time.Now().UnixMilli()))
			}
			deleteRecords(t, cl, "below", 0, 2)
			deleteRecords(t, cl, "below", 0, 1)
			if got := partitionOffsets(t, cl, "below", 0); got.start != 2 {
				t.Fatalf("offsets %+v after DeleteRecords(2) and DeleteRecords(1), want the log start at 2", got)
			}
		})
	}
}
