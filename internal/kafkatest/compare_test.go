package kafkatest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Now().UnixMilli() // recent: kfake's retention deletes by record time

func hdr(k, v string) kmsg.Header { return kmsg.Header{Key: k, Value: []byte(v)} }

// history writes the same varied log to a cluster every time: batches of
// several records, headers, a null key, an empty value, a gzip batch, a
// committed and an aborted transaction, and a second partition.
func history(t *testing.T, c *Cluster, topic string) *kgo.Client {
	t.Helper()
	c.CreateTopic(t, topic, 2, nil)
	cl := c.Client(t)
	r := kv("k1", "v1", t0)
	r.headers = []kmsg.Header{hdr("h", "1"), {Key: "null"}}
	mustProduce(t, cl, topic, 0, r, kv("k2", "v2", t0+1), kv("k3", "v3", t0-5))
	mustProduce(t, cl, topic, 0, rec{value: []byte{}, ts: t0 + 2})
	rp := produceRaw(t, cl, topic, 0, buildBatch([]rec{kv("z1", "zipped", t0+3), kv("z2", "zipped", t0+4)}, batchSpec{gzip: true}))
	if rp.ErrorCode != 0 {
		t.Fatalf("gzip batch: %d", rp.ErrorCode)
	}
	x := newRawTxn(t, cl, "history")
	x.mustAdd(topic, 0)
	x.mustProduce(topic, 0, kv("t1", "committed", t0+5), kv("t2", "committed", t0+6))
	x.mustEnd(true)
	waitOffsets(t, cl, topic, 0, offsets{0, 9, 9})
	retry(t, func() error { return x.add(topic, 0) })
	x.mustProduce(topic, 0, kv("t3", "aborted", t0+7))
	x.mustEnd(false)
	waitOffsets(t, cl, topic, 0, offsets{0, 11, 11})
	mustProduce(t, cl, topic, 0, kv("k4", "v4", t0+8))
	mustProduce(t, cl, topic, 1, kv("p1", "a", t0), kv("p1", "b", t0+1))
	return cl
}

// retry polls fn until it stops failing (CONCURRENT_TRANSACTIONS while a
// marker is on its way).
func retry(t *testing.T, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustCompare(t *testing.T, src, dst *kgo.Client, topic string) *Difference {
	t.Helper()
	d, err := CompareTopic(testCtx(t), src, dst, topic)
	if err != nil {
		t.Fatalf("CompareTopic: %v", err)
	}
	return d
}

func wantDifference(t *testing.T, d *Difference, partition int32, offset int64, what string) {
	t.Helper()
	if d == nil {
		t.Fatalf("no difference, want %q at partition %d offset %d", what, partition, offset)
	}
	if d.What != what || d.Partition != partition || d.Offset != offset {
		t.Fatalf("difference %v; want %q at partition %d offset %d", d, what, partition, offset)
	}
	if d.Source == "" || d.Destination == "" || strings.Contains(d.Error(), "\n") {
		t.Fatalf("difference not rendered on one line with both sides: %q", d.Error())
	}
	t.Logf("detected: %v", d)
}

func TestCompareIdentical(t *testing.T) {
	src, dst := Pair(t, Brokers(3))
	scl, dcl := history(t, src, "t"), history(t, dst, "t")
	if d := mustCompare(t, scl, dcl, "t"); d != nil {
		t.Fatalf("identical logs reported different: %v", d)
	}
	if d, err := ComparePartition(testCtx(t), scl, dcl, "t", 1); d != nil || err != nil {
		t.Fatalf("ComparePartition: %v, %v", d, err)
	}
	WaitIdentical(t, src, dst, "t", 5*time.Second)
}

// Each case writes the common history to both clusters, then something
// different to each.
func TestCompareDetectsDifferences(t *testing.T) {
	const n = 12 // partition 0's high watermark after history
	cases := []struct {
		name      string
		src, dst  func(t *testing.T, cl *kgo.Client)
		partition int32
		offset    int64
		what      string
	}{
		{
			name:   "different value",
			src:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "v", t0)) },
			dst:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "V", t0)) },
			offset: n, what: "value",
		},
		{
			name:   "different key",
			src:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "v", t0)) },
			dst:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, rec{value: []byte("v"), ts: t0}) },
			offset: n, what: "key",
		},
		{
			name:   "different timestamp",
			src:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "v", t0)) },
			dst:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "v", t0+1)) },
			offset: n, what: "timestamp",
		},
		{
			name: "different headers",
			src: func(t *testing.T, cl *kgo.Client) {
				r := kv("k", "v", t0)
				r.headers = []kmsg.Header{hdr("a", "1")}
				mustProduce(t, cl, "t", 0, r)
			},
			dst: func(t *testing.T, cl *kgo.Client) {
				r := kv("k", "v", t0)
				r.headers = []kmsg.Header{hdr("a", "2")}
				mustProduce(t, cl, "t", 0, r)
			},
			offset: n, what: "headers",
		},
		{
			name:   "missing record",
			src:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "v", t0)) },
			dst:    func(t *testing.T, cl *kgo.Client) {},
			offset: -1, what: "high watermark",
		},
		{
			name:      "extra record",
			src:       func(t *testing.T, cl *kgo.Client) {},
			dst:       func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 1, kv("k", "v", t0)) },
			partition: 1, offset: -1, what: "high watermark",
		},
		{
			name: "record where the other side has a lone abort marker",
			src: func(t *testing.T, cl *kgo.Client) {
				mustProduce(t, cl, "t", 0, kv("k", "v", t0))
				mustProduce(t, cl, "t", 0, kv("k", "w", t0))
			},
			dst: func(t *testing.T, cl *kgo.Client) {
				x := newRawTxn(t, cl, "filler")
				x.mustAdd("t", 0)
				x.mustEnd(false)
				waitOffsets(t, cl, "t", 0, offsets{0, n + 1, n + 1})
				mustProduce(t, cl, "t", 0, kv("k", "w", t0))
			},
			offset: n, what: "batch kind",
		},
		{
			name:   "commit vs abort marker",
			src:    func(t *testing.T, cl *kgo.Client) { oneTxn(t, cl, true) },
			dst:    func(t *testing.T, cl *kgo.Client) { oneTxn(t, cl, false) },
			offset: n + 1, what: "batch kind",
		},
		{
			name:   "different log start",
			src:    func(t *testing.T, cl *kgo.Client) { deleteRecords(t, cl, "t", 0, 2) },
			dst:    func(t *testing.T, cl *kgo.Client) { deleteRecords(t, cl, "t", 0, 3) },
			offset: -1, what: "log start offset",
		},
		{
			name: "batch boundaries",
			src:  func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("a", "1", t0), kv("b", "2", t0)) },
			dst: func(t *testing.T, cl *kgo.Client) {
				mustProduce(t, cl, "t", 0, kv("a", "1", t0))
				mustProduce(t, cl, "t", 0, kv("b", "2", t0))
			},
			offset: n, what: "batch boundaries",
		},
		{
			name: "open transaction vs plain record",
			src: func(t *testing.T, cl *kgo.Client) {
				x := newRawTxn(t, cl, "open")
				x.mustAdd("t", 0)
				x.mustProduce("t", 0, kv("k", "v", t0))
			},
			dst:    func(t *testing.T, cl *kgo.Client) { mustProduce(t, cl, "t", 0, kv("k", "v", t0)) },
			offset: -1, what: "last stable offset",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := Pair(t)
			scl, dcl := history(t, src, "t"), history(t, dst, "t")
			tc.src(t, scl)
			tc.dst(t, dcl)
			wantDifference(t, mustCompare(t, scl, dcl, "t"), tc.partition, tc.offset, tc.what)
		})
	}
}

func oneTxn(t *testing.T, cl *kgo.Client, commit bool) {
	t.Helper()
	x := newRawTxn(t, cl, "one")
	x.mustAdd("t", 0)
	x.mustProduce("t", 0, kv("k", "v", t0))
	x.mustEnd(commit)
	waitOffsets(t, cl, "t", 0, offsets{0, 14, 14})
}

func deleteRecords(t *testing.T, cl *kgo.Client, topic string, partition int32, at int64) {
	t.Helper()
	if rp := deleteRecordsAnswer(t, cl, topic, partition, at); rp.ErrorCode != 0 {
		t.Fatalf("DeleteRecords(%d): %v", at, kerr.ErrorForCode(rp.ErrorCode))
	}
}

// deleteRecordsAnswer is the partition's answer to a DeleteRecords sent to its leader.
func deleteRecordsAnswer(t *testing.T, cl *kgo.Client, topic string, partition int32, at int64) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, at
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	meta, err := describeTopic(testCtx(t), cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := req.RequestWith(testCtx(t), cl.Broker(int(meta.leaders[partition])))
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("DeleteRecords: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// compactedSource writes k1:a, k1:b, k2:c as one batch and k3:d, k4:e as
// single batches, then compacts: offset 0 becomes a gap inside a compacted
// batch. Then k5:f (4 and 5 are kept as the log's last batches).
func compactedSource(t *testing.T, c *Cluster) *kgo.Client {
	t.Helper()
	compact := map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")}
	c.CreateTopic(t, "c", 1, compact)
	cl := c.Client(t)
	mustProduce(t, cl, "c", 0, kv("k1", "a", t0), kv("k1", "b", t0+1), kv("k2", "c", t0+2))
	mustProduce(t, cl, "c", 0, kv("k9", "x", t0+3))
	mustProduce(t, cl, "c", 0, kv("k9", "y", t0+4))
	mustProduce(t, cl, "c", 0, kv("k4", "e", t0+5))
	c.Fake().Compact()
	if got := layout(readLog(t, cl, "c", 0)); got != ".dd.dd" {
		t.Fatalf("compacted source %q, want .dd.dd", got)
	}
	return cl
}

// destination writes what a correct mirror writes for compactedSource, with
// gaps filled by lone abort markers, or with data instead when dataAt0.
func mirroredCompacted(t *testing.T, c *Cluster, dataAt0 bool) *kgo.Client {
	t.Helper()
	c.CreateTopic(t, "c", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	cl := c.Client(t)
	x := newRawTxn(t, cl, "filler")
	fill := func(hw int64) {
		retry(t, func() error { return x.add("c", 0) })
		x.mustEnd(false)
		waitOffsets(t, cl, "c", 0, offsets{0, hw, hw})
	}
	if dataAt0 {
		mustProduce(t, cl, "c", 0, kv("k1", "a", t0))
	} else {
		fill(1)
	}
	mustProduce(t, cl, "c", 0, kv("k1", "b", t0+1), kv("k2", "c", t0+2))
	fill(4)
	mustProduce(t, cl, "c", 0, kv("k9", "y", t0+4))
	mustProduce(t, cl, "c", 0, kv("k4", "e", t0+5))
	return cl
}

func TestCompareGapMayBeLoneAbortMarker(t *testing.T) {
	src, dst := Pair(t)
	scl, dcl := compactedSource(t, src), mirroredCompacted(t, dst, false)
	if got := layout(readLog(t, dcl, "c", 0)); got != "LddLdd" {
		t.Fatalf("destination %q, want LddLdd", got)
	}
	if d := mustCompare(t, scl, dcl, "c"); d != nil {
		t.Fatalf("gaps filled with lone abort markers reported different: %v", d)
	}
}

func TestCompareGapIsNotData(t *testing.T) {
	src, dst := Pair(t)
	scl, dcl := compactedSource(t, src), mirroredCompacted(t, dst, true)
	wantDifference(t, mustCompare(t, scl, dcl, "c"), 0, 0, "batch kind")
}

func TestComparePartitionCount(t *testing.T) {
	src, dst := Pair(t)
	src.CreateTopic(t, "t", 2, nil)
	dst.CreateTopic(t, "t", 1, nil)
	scl, dcl := src.Client(t), dst.Client(t)
	wantDifference(t, mustCompare(t, scl, dcl, "t"), -1, -1, "partition count")
	d, err := ComparePartition(testCtx(t), scl, dcl, "t", 1)
	if err != nil {
		t.Fatal(err)
	}
	wantDifference(t, d, 1, -1, "partition count")
	src.CreateTopic(t, "only-source", 1, nil)
	d = mustCompare(t, scl, dcl, "only-source")
	wantDifference(t, d, -1, -1, "partition count")
	if !strings.Contains(d.Destination, "no such topic") {
		t.Fatalf("destination rendered %q", d.Destination)
	}
	// A topic on neither side is a mistake, not two identical logs.
	if d, err := CompareTopic(testCtx(t), scl, dcl, "typo"); d != nil || err == nil {
		t.Fatalf("missing topic: %v, %v; want an error", d, err)
	}
}

func TestViewsOfTransactions(t *testing.T) {
	c := New(t)
	cl := history(t, c, "t")
	l := readLog(t, cl, "t", 0)
	if got := layout(l); got != "ddddddttCtAd" {
		t.Fatalf("history layout %q", got)
	}
	for _, tc := range []struct {
		committed bool
		want      []int64
	}{
		{true, []int64{0, 1, 2, 3, 4, 5, 6, 7, 11}},
		{false, []int64{0, 1, 2, 3, 4, 5, 6, 7, 9, 11}},
	} {
		views, err := consumeView(testCtx(t), cl, "t", map[int32]viewPlan{0: planView(l, tc.committed)}, tc.committed)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range views[0] {
			got = append(got, r.offset)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("committed=%v: offsets %v, want %v", tc.committed, got, tc.want)
		}
		if r := views[0][0]; string(r.key) != "k1" || r.timestamp != t0 || len(r.headers) != 2 || r.headers[1].Value != nil {
			t.Errorf("first record %v", r)
		}
	}
}

func TestCompareViews(t *testing.T) {
	a := []viewRecord{{offset: 1, key: []byte("k"), value: []byte("v"), timestamp: 5}, {offset: 2, value: []byte("w")}}
	if d := compareViews("t", 0, "read_committed view", a, a); d != nil {
		t.Fatal(d)
	}
	b := []viewRecord{a[0]}
	wantDifference(t, compareViews("t", 0, "read_committed view", a, b), 0, 2, "read_committed view")
	c := []viewRecord{a[0], {offset: 2, value: nil}}
	wantDifference(t, compareViews("t", 0, "read_uncommitted view", a, c), 0, 2, "read_uncommitted view")
}

func TestWaitIdentical(t *testing.T) {
	src, dst := Pair(t)
	scl := src.Client(t)
	dcl := dst.Client(t)
	src.CreateTopic(t, "t", 1, nil)
	dst.CreateTopic(t, "t", 1, nil)
	mustProduce(t, scl, "t", 0, kv("k", "v", t0))

	// A destination that is behind fails at the deadline with the last
	// difference.
	f := &fakeTB{TB: t}
	WaitIdentical(f, src, dst, "t", 200*time.Millisecond)
	if !strings.Contains(f.failed, "high watermark: source 1, destination 0") {
		t.Fatalf("failure message %q", f.failed)
	}

	// One that catches up while WaitIdentical polls passes.
	errc := make(chan error, 1)
	go func() {
		r := &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(t0)}
		errc <- dcl.ProduceSync(context.Background(), r).FirstErr()
	}()
	WaitIdentical(t, src, dst, "t", 10*time.Second)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestDifferenceError(t *testing.T) {
	d := &Difference{Topic: "t", Partition: 3, Offset: 7, What: "value", Source: `"a"`, Destination: `"b"`}
	if got, want := d.Error(), `topic "t" partition 3 offset 7: value: source "a", destination "b"`; got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	d = &Difference{Topic: "t", Partition: -1, Offset: -1, What: "partition count", Source: "2", Destination: "1"}
	if got, want := d.Error(), `topic "t": partition count: source 2, destination 1`; got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	if got := renderBytes([]byte{0, 1, 2}); got != "0x000102" {
		t.Fatal(got)
	}
}
