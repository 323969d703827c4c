package datapath

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// mirrorRun is a set of partition mirrors running in the background.
type mirrorRun struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	errs     map[int32]error
	mirrors  []*PartitionMirror
	sessions *atomic.Int64 // the mirrors' sessions that started copying
}

// mirroredTopic starts a source and a destination kfake cluster holding topic alike and
// returns them with a source producer built with opts.
func mirroredTopic(t *testing.T, topic string, partitions int32, configs map[string]*string, opts ...kgo.Opt) (src, dst *kafkatest.Cluster, prod *kgo.Client) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	createBoth(t, src, dst, topic, partitions, configs)
	return src, dst, src.ManualProducer(t, opts...)
}

// mirrorIdentical mirrors topic until the destination is identical to the source, then stops.
func mirrorIdentical(t *testing.T, src, dst *kafkatest.Cluster, topic string, partitions int32, firstStart bool) {
	t.Helper()
	run := startMirror(t, src, dst, topic, partitions, firstStart)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
}

// startMirror runs one PartitionMirror per partition of topic from src to dst.
func startMirror(t *testing.T, src, dst *kafkatest.Cluster, topic string, partitions int32, firstStart bool) *mirrorRun {
	t.Helper()
	return startMirrorCtx(context.Background(), t, src, dst, topic, partitions, firstStart)
}

func startMirrorCtx(parent context.Context, t *testing.T, src, dst *kafkatest.Cluster, topic string, partitions int32, firstStart bool) *mirrorRun {
	t.Helper()
	return startMirrorClients(parent, t, src.Client(t), dst.Client(t), topic, partitions, firstStart)
}

// startMirrorClients is startMirror on given clients: mirrors sharing a source client share
// its fetchers.
func startMirrorClients(parent context.Context, t *testing.T, sc, dc *kgo.Client, topic string, partitions int32, firstStart bool) *mirrorRun {
	t.Helper()
	return startMirrorConfig(parent, t, sc, dc, PartitionConfig{Mirror: "m1", Topic: topic, FirstStart: firstStart}, partitions)
}

// startMirrorConfig runs one PartitionMirror per partition of cfg's topic, with cfg.
func startMirrorConfig(parent context.Context, t *testing.T, sc, dc *kgo.Client, cfg PartitionConfig, partitions int32) *mirrorRun {
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	sessions := countSessions(cfg.Observer)
	cfg.Observer = sessions
	r := &mirrorRun{cancel: cancel, errs: map[int32]error{}, sessions: &sessions.n}
	for p := range partitions {
		cfg.Partition = p
		m := NewPartitionMirror(sc, dc, cfg)
		r.mirrors = append(r.mirrors, m)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			err := m.Run(ctx)
			r.mu.Lock()
			r.errs[p] = err
			r.mu.Unlock()
		}()
	}
	t.Cleanup(r.stopQuietly)
	return r
}

func (r *mirrorRun) stopQuietly() { r.cancel(); r.wg.Wait() }

// stop ends the mirrors and fails the test if any of them stopped with an error.
func (r *mirrorRun) stop(t *testing.T) {
	t.Helper()
	r.stopQuietly()
	for p, err := range r.errs {
		if err != nil {
			t.Fatalf("partition %d mirror failed: %v", p, err)
		}
	}
}

// waitErr waits for the mirror of partition p to stop on its own and returns its error.
func (r *mirrorRun) waitErr(t *testing.T, p int32) error {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		err, done := r.errs[p]
		r.mu.Unlock()
		if done {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("partition %d mirror did not stop", p)
	return nil
}

func TestMirrorPlainRecords(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "plain", 2, nil, kgo.ProducerBatchCompression(kgo.NoCompression()))
	kafkatest.ProduceSync(t, prod, kafkatest.Records("plain", 0, 500, "a")...)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("plain", 1, 300, "b")...)

	run := startMirror(t, src, dst, "plain", 2, true)
	kafkatest.WaitIdentical(t, src, dst, "plain", kafkatest.IdenticalWithin)

	// Mirroring is continuous: later records follow.
	kafkatest.ProduceSync(t, prod, kafkatest.Records("plain", 1, 200, "c")...)
	kafkatest.WaitIdentical(t, src, dst, "plain", kafkatest.IdenticalWithin)
	if p := run.mirrors[1].Progress(); p.Lag() != 0 || p.DestinationEnd != 500 {
		t.Fatalf("progress %+v, want destination end 500 and no lag", p)
	}
	run.stop(t)
}

func TestMirrorCompressedBatchesAreNotRecompressed(t *testing.T) {
	for _, codec := range []kgo.CompressionCodec{kgo.ZstdCompression(), kgo.Lz4Compression()} {
		src, dst, prod := mirroredTopic(t, "compressed", 1, nil, kgo.ProducerBatchCompression(codec))
		for i := range 10 {
			kafkatest.ProduceSync(t, prod, kafkatest.Records("compressed", 0, 200, fmt.Sprint("z", i))...)
		}

		mirrorIdentical(t, src, dst, "compressed", 1, true)

		srcBatches := rawBatches(t, src, "compressed", 0)
		dstBatches := rawBatches(t, dst, "compressed", 0)
		if len(srcBatches) < 2 || len(srcBatches) != len(dstBatches) {
			t.Fatalf("%d source batches, %d destination batches", len(srcBatches), len(dstBatches))
		}
		for i := range srcBatches {
			s, d := srcBatches[i], dstBatches[i]
			if s.Codec() == 0 || d.Codec() != s.Codec() {
				t.Fatalf("batch %d: source codec %d, destination codec %d", i, s.Codec(), d.Codec())
			}
			if !bytes.Equal(s[recordbatch.HeaderLen:], d[recordbatch.HeaderLen:]) {
				t.Fatalf("batch %d: destination payload differs from the source's compressed bytes", i)
			}
		}
	}
}

// rawBatches reads a whole partition's batches as stored.
func rawBatches(t *testing.T, c *kafkatest.Cluster, topic string, partition int32) []recordbatch.Batch {
	t.Helper()
	out, err := readBatches(t, c, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readBatches is rawBatches for callers that poll: it returns the error.
func readBatches(t *testing.T, c *kafkatest.Cluster, topic string, partition int32) ([]recordbatch.Batch, error) {
	t.Helper()
	ctx := context.Background()
	cl := kafkareq.NewCluster("test", c.Client(t))
	meta, err := cl.Metadata(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	start, end, err := cl.Offsets(ctx, topic, partition)
	if err != nil {
		return nil, err
	}
	var out []recordbatch.Batch
	for off := start; off < end; {
		f, err := cl.Fetch(ctx, meta, topic, partition, off, 1<<20)
		if err != nil {
			return nil, err
		}
		for _, b := range f.Batches {
			if b.LastOffset() >= off {
				out = append(out, b)
				off = b.LastOffset() + 1
			}
		}
	}
	return out, nil
}

func TestMirrorManyRecordsAcrossEightPartitions(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	createBoth(t, src, dst, "many", 8, nil)
	prod := src.Client(t, kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchCompression(kgo.SnappyCompression(), kgo.NoCompression()))

	const total = 120_000
	recs := make([]*kgo.Record, 0, total)
	for i := range total {
		recs = append(recs, &kgo.Record{Topic: "many", Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%08d", i))})
	}
	// Produce half before and half while mirroring.
	kafkatest.ProduceSync(t, prod, recs[:total/2]...)
	run := startMirror(t, src, dst, "many", 8, true)
	kafkatest.ProduceSync(t, prod, recs[total/2:]...)
	kafkatest.WaitIdentical(t, src, dst, "many", 2*kafkatest.IdenticalWithin)
	run.stop(t)
}

// A partition's writes stay in flight from one fetched answer into the next, while the next
// is already fetched: a session that waited for every answer of an answer's writes before
// handing over the next left the destination idle a round trip per answer (a single
// partition mirrored at 0.74–0.95 of the destination's direct ingest).
func TestMirrorWritesStayInFlightAcrossAnswers(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "across", 1, nil)
	const batches = 40
	for i := range batches {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("across", 0, 20, fmt.Sprint("b", i))...)
	}
	slowProduces(dst, 20*time.Millisecond)
	dc := dst.Client(t)
	// Each answer holds one batch (a partition's first batch comes whole however small the
	// limit), and the buffer holds many answers ahead of the writes.
	cfg := PartitionConfig{Mirror: "m1", Topic: "across", FirstStart: true, MaxInFlight: 5,
		FetchMaxBytes: 1, FetchBufferBytes: 1 << 20}
	var most atomic.Int64
	sampled := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
				if n := int64(pipelined(dc, "across", 0)); n > most.Load() {
					most.Store(n)
				}
			}
		}
	}()
	run := startMirrorConfig(context.Background(), t, src.Client(t), dc, cfg, 1)
	kafkatest.WaitIdentical(t, src, dst, "across", kafkatest.IdenticalWithin)
	close(done)
	<-sampled
	run.stop(t)
	if most := most.Load(); most < 2 {
		t.Fatalf("at most %d batch of a one-batch answer was handed to the destination at once, want up to %d (MaxInFlight): the writes of the next answer waited for the last ones of the one before", most, cfg.MaxInFlight)
	}
}

// A batch fetched while the writes of the one before are still unanswered is written at
// once: a session that waited for those answers before it took the next one added a produce
// round trip to a stream of small batches (p99 30 ms more than a consumer+producer copier on
// Apache Kafka 4.4).
func TestMirrorWritesTheNextAnswerWhileTheLastIsUnanswered(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "stream", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("stream", 0, 1, "first")...)
	dc := dst.Client(t)
	run := startMirrorConfig(context.Background(), t, src.Client(t), dc, PartitionConfig{Mirror: "m1", Topic: "stream", FirstStart: true, MaxInFlight: 5}, 1)
	defer run.stop(t)
	kafkatest.WaitIdentical(t, src, dst, "stream", kafkatest.IdenticalWithin)

	// The destination holds every produce's answer from now until the gate opens.
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(release)
	dst.Fake().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.Fake().KeepControl()
		dst.Fake().SleepControl(func() { <-gate })
		return nil, nil, false
	})
	kafkatest.ProduceSync(t, prod, kafkatest.Records("stream", 0, 1, "held")...)
	kafkatest.WaitUntil(t, time.Minute, "the first batch in flight", func() bool { return pipelined(dc, "stream", 0) == 1 })
	kafkatest.ProduceSync(t, prod, kafkatest.Records("stream", 0, 1, "next")...)
	kafkatest.WaitFor(t, 10*time.Second, "the next batch handed to the destination beside the unanswered one", func() (bool, string) {
		n := pipelined(dc, "stream", 0)
		return n == 2, fmt.Sprintf("%d batch(es) handed over and unanswered", n)
	})
	release()
	kafkatest.WaitIdentical(t, src, dst, "stream", kafkatest.IdenticalWithin)
}

// pipelined counts the batches of a partition handed to the produce pipelines of dst and not
// answered yet.
func pipelined(dst *kgo.Client, topic string, partition int32) int {
	n := 0
	ours := func(t string, p int32) bool { return t == topic && p == partition }
	brokerProducers.each(func(k brokerKey) bool { return k.cl == dst }, func(bp *brokerProducer) {
		bp.mu.Lock()
		for k, c := range bp.partsInFlight {
			if ours(k.Topic, k.Partition) {
				n += c
			}
		}
		bp.mu.Unlock()
		bp.queue.each(func(it *produceItem) {
			if ours(it.topic, it.partition) {
				n++
			}
		})
	})
	return n
}

func TestMirrorSourceWithLogStartAhead(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "advanced", 1, nil, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	const logStart = 10_000_000
	advanceSource(t, src, "advanced", logStart)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("advanced", 0, 300, "x")...)

	run := startMirror(t, src, dst, "advanced", 1, true)
	// Ten million filler offsets through strict mode's validation of every record: about 5 s
	// alone, over a minute beside the real-broker tier's JVMs on two cores.
	kafkatest.WaitIdentical(t, src, dst, "advanced", 4*kafkatest.IdenticalWithin)

	// Later source log start moves are propagated.
	src.DeleteRecords(t, "advanced", 0, logStart+120)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("advanced", 0, 10, "y")...)
	kafkatest.WaitIdentical(t, src, dst, "advanced", kafkatest.IdenticalWithin)
	run.stop(t)
}

func TestMirrorLogStartPastAnEndedTransaction(t *testing.T) {
	onFakeTopic(t, logStartPastEndedTransaction)
}

// onFakeTopic runs scenario on a pair of kfake clusters, on a topic named after the test.
func onFakeTopic(t *testing.T, scenario func(t *testing.T, src, dst *kafkatest.Cluster, topic string)) {
	src, dst := kafkatest.Pair(t)
	scenario(t, src, dst, kafkatest.TopicFor(t, ""))
}

// logStartPastEndedTransaction deletes, while the mirror is stopped, the source marker of one
// of two transactions the destination has open, and nothing of the other (still open): the
// destination has room for one abort marker below the new log start. The mirror must abort
// the replayed transaction whose marker is gone and keep the other open, whichever producer id
// sorts first, so no transaction stays open on the destination once the source ends the other.
func logStartPastEndedTransaction(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
	createBoth(t, src, dst, topic, 1, nil)
	ctx := context.Background()
	plain := src.ManualProducer(t)
	var apps [2]*kgo.Client
	var pids [2]int64
	for i := range apps {
		apps[i] = src.ManualProducer(t, kgo.TransactionalID(fmt.Sprintf("%s-app-%d", topic, i)))
		if err := apps[i].BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		kafkatest.ProduceSync(t, apps[i], kafkatest.Records(topic, 0, 2, fmt.Sprint("open", i))...)
		pid, _, err := apps[i].ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids[i] = pid
	}
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 1, "plain")...)
	run := startMirror(t, src, dst, topic, 1, true)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)

	// The producer whose id sorts first goes on, the other's transaction ends.
	goesOn, ends := apps[0], apps[1]
	if pids[1] < pids[0] {
		goesOn, ends = apps[1], apps[0]
	}
	end := func() int64 {
		ends, err := src.Admin(t).ListEndOffsets(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset
	}
	marker := end()
	if err := ends.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitUntil(t, 30*time.Second, "the commit marker to land", func() bool { return end() == marker+1 })
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 1, "past")...)
	src.DeleteRecords(t, topic, 0, marker+1)

	run = startMirror(t, src, dst, topic, 1, false)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	kafkatest.ProduceSync(t, goesOn, kafkatest.Records(topic, 0, 2, "goes-on")...)
	if err := goesOn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 1, "last")...)
	waitStable(t, src, topic)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
}

// The source log start moves to its end while the mirror is stopped (retention deleted every
// record of a quiet partition): the source has no record left to fetch, so the destination
// must move to that log start on an empty fetch answer, aborting the replayed transaction whose
// marker was deleted, and not wait for the next record. Until it does, a consumer that failed
// over with an offset committed at the source's end would find it past the destination's end.
func TestMirrorLogStartAtTheSourceEnd(t *testing.T) {
	onFakeTopic(t, logStartAtTheSourceEnd)
}

func logStartAtTheSourceEnd(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
	ctx := context.Background()
	plain, app := plainAndApp(t, src, dst, topic)
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 3, "first")...)
	if err := app.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, app, kafkatest.Records(topic, 0, 2, "txn")...)
	run := startMirror(t, src, dst, topic, 1, true)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)

	if err := app.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 3, "deleted")...)
	waitStable(t, src, topic)
	src.DeleteRecords(t, topic, 0, src.EndOffsets(t, topic)[0])

	run = startMirror(t, src, dst, topic, 1, false)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 2, "after")...)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
}

// plainAndApp creates topic, of one partition, on both clusters and returns a plain and a
// transactional producer of the source.
func plainAndApp(t *testing.T, src, dst *kafkatest.Cluster, topic string) (plain, app *kgo.Client) {
	createBoth(t, src, dst, topic, 1, nil)
	return src.ManualProducer(t), src.ManualProducer(t, kgo.TransactionalID(topic+"-app"))
}

// The marker that ends a replayed transaction lands twice on the destination, as its
// coordinator writes it again when its first write's answer was lost (a destination leader
// move) or a new coordinator completes the transaction; Apache Kafka appends the repeat. The
// mirror cannot undo that offset: it stops the partition naming the repeat, when its next
// write lands past it and again when a new session finds it, not blaming a foreign writer.
func TestMirrorStopsOnARepeatedMarker(t *testing.T) {
	onFakeTopic(t, repeatedMarker)
}

func repeatedMarker(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
	ctx := context.Background()
	plain, app := plainAndApp(t, src, dst, topic)
	if err := app.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, app, kafkatest.Records(topic, 0, 2, "txn")...)
	if err := app.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitStable(t, src, topic)
	run := startMirror(t, src, dst, topic, 1, true)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)

	// The coordinator's repeat: the destination's last batch, the replayed transaction's
	// marker, again.
	pid, _, err := app.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	txnID := PartitionTxnPrefix("m1", topic, 0) + strconv.FormatInt(pid, 10)
	batches := dst.RawBatches(t, topic, 0)
	first := recordbatch.Batch(batches[len(batches)-1])
	producers, err := dst.Admin(t).DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	// kfake lists only producers with a transaction open: its coordinator epoch is 0.
	coordinatorEpoch := producers[topic].Partitions[0].ActiveProducers[first.ProducerID()].CoordinatorEpoch
	repeatAt := first.LastOffset() + 1
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	marker := kmsg.NewWriteTxnMarkersRequestMarker()
	marker.ProducerID, marker.ProducerEpoch, marker.CoordinatorEpoch, marker.Committed = first.ProducerID(), first.Producer().Epoch, coordinatorEpoch, true
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{0}
	marker.Topics = append(marker.Topics, mt)
	req.Markers = append(req.Markers, marker)
	resp, err := req.RequestWith(ctx, dst.Client(t).Broker(int(partitionLeader(t, dst, topic, 0))))
	if err == nil {
		err = kerr.ErrorForCode(resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("write the repeated marker: %v", err)
	}

	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 1, "after")...)
	wantRepeat := func(err error) {
		t.Helper()
		var repeated *mirrorerr.RepeatedMarkerError
		if !errors.As(err, &repeated) || repeated.Offset != repeatAt || repeated.TransactionalID != txnID {
			t.Fatalf("mirror error: %v; want the repeated marker of %s at offset %d", err, txnID, repeatAt)
		}
	}
	wantRepeat(run.waitErr(t, 0))
	run = startMirror(t, src, dst, topic, 1, false)
	wantRepeat(run.waitErr(t, 0))
}

// advanceSource moves an empty source partition's log start to n with filler and
// DeleteRecords, the way a long-lived topic with retention looks.
func advanceSource(t *testing.T, c *kafkatest.Cluster, topic string, n int64) {
	t.Helper()
	ctx := context.Background()
	cl := kafkareq.NewCluster("source", c.Client(t))
	meta, err := cl.Metadata(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	batches := map[int64][]byte{}
	for written := int64(0); written < n; {
		size := min(n-written, fillerBatchRecords)
		if batches[size] == nil {
			b, err := recordbatch.Filler(int(size), nil, 4, time.Now().UnixMilli(), recordbatch.Producer{ID: -1, Epoch: -1, Sequence: -1})
			if err != nil {
				t.Fatal(err)
			}
			batches[size] = b
		}
		if _, err := cl.Produce(ctx, meta.Leader, topic, meta.ID, 0, batches[size], nil); err != nil {
			t.Fatal(err)
		}
		written += size
	}
	if err := cl.DeleteRecords(ctx, topic, 0, n); err != nil {
		t.Fatal(err)
	}
}

func TestMirrorCompactedSourceWithHoles(t *testing.T) {
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	src, dst, prod := mirroredTopic(t, "compacted", 1, compact, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	// Keys overwritten across and inside batches, so compaction leaves holes in batches.
	for round := range 5 {
		var recs []*kgo.Record
		for i := range 40 {
			recs = append(recs, &kgo.Record{Topic: "compacted", Key: []byte(fmt.Sprintf("k%d", (i*round)%13)), Value: []byte(fmt.Sprintf("r%d-%d", round, i))})
		}
		kafkatest.ProduceSync(t, prod, recs...)
	}
	src.Fake().Compact()
	holes := false
	for _, b := range rawBatches(t, src, "compacted", 0) {
		holes = holes || !b.Contiguous()
	}
	if !holes {
		t.Fatal("compaction left no batch with holes; the scenario does not test what it should")
	}
	kafkatest.ProduceSync(t, prod, kafkatest.Records("compacted", 0, 20, "after")...)

	mirrorIdentical(t, src, dst, "compacted", 1, true)
}

// A long run of source offsets without a record (a key overwritten sixty times in one
// batch, compacted) on a destination that refuses WriteTxnMarkers becomes sixty abort
// markers written by several gap writers at once: identical logs, and more than one gap
// transactional id was used.
func TestMirrorLongRunOfHolesUsesSeveralGapWriters(t *testing.T) {
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	src, dst, prod := mirroredTopic(t, "holes", 1, compact)
	refuseWriteTxnMarkers(dst)
	kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: "holes", Key: []byte("a"), Value: []byte("first")})
	var overwritten []*kgo.Record
	for i := range 61 {
		overwritten = append(overwritten, &kgo.Record{Topic: "holes", Key: []byte("b"), Value: []byte(fmt.Sprint(i))})
	}
	kafkatest.ProduceSync(t, prod, overwritten...)
	kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: "holes", Key: []byte("c"), Value: []byte("last")})
	src.Fake().Compact()

	mirrorIdentical(t, src, dst, "holes", 1, true)
	listed, err := dst.Admin(t).ListTransactions(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var gapWriterIDs []string
	for id := range listed {
		if strings.HasPrefix(id, PartitionTxnPrefix("m1", "holes", 0)+gapTxnSuffix) {
			gapWriterIDs = append(gapWriterIDs, id)
		}
	}
	if len(gapWriterIDs) < 2 {
		t.Fatalf("gap writers used: %v, want several for a run of 60 holes", gapWriterIDs)
	}
}

func TestMirrorInterleavedTransactions(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	createBoth(t, src, dst, "txns", 1, nil)
	interleavedTransactions(t, src, dst, "txns")
}

func TestMirrorFollowsSourceLeaderChange(t *testing.T) {
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.Brokers(3))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"), kafkatest.Brokers(3))
	createBoth(t, src, dst, "moving", 3, nil)
	prod := src.ManualProducer(t)
	for p := range int32(3) {
		kafkatest.ProduceSync(t, prod, kafkatest.Records("moving", p, 200, "before")...)
	}
	run := startMirror(t, src, dst, "moving", 3, true)
	kafkatest.WaitIdentical(t, src, dst, "moving", kafkatest.IdenticalWithin)

	for i := range 3 {
		src.Fake().ShufflePartitionLeaders()
		dst.Fake().ShufflePartitionLeaders()
		for p := range int32(3) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records("moving", p, 100, fmt.Sprintf("after%d", i))...)
		}
	}
	kafkatest.WaitIdentical(t, src, dst, "moving", kafkatest.IdenticalWithin)
	run.stop(t)
}

// The mirror is killed at random points while it copies plain and transactional data, and
// restarted; the destination must end identical every time, nothing lost or doubled.
func TestMirrorKilledAndRestarted(t *testing.T) {
	src, dst, plain := mirroredTopic(t, "crashy", 2, nil, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	txn := src.ManualProducer(t, kgo.TransactionalID("crashy-app"))
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))

	open := false
	for i := range 24 {
		for p := range int32(2) {
			kafkatest.ProduceSync(t, plain, kafkatest.Records("crashy", p, 50+rng.IntN(200), fmt.Sprintf("p%d", i))...)
		}
		// Transactions span restarts: some commit, some abort, some stay open.
		if !open {
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			open = true
		}
		kafkatest.ProduceSync(t, txn, kafkatest.Records("crashy", int32(i%2), 5, fmt.Sprintf("t%d", i))...)
		if rng.IntN(3) > 0 {
			if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(rng.IntN(2) == 0)); err != nil {
				t.Fatal(err)
			}
			open = false
		}

		// Kill the mirror when the clusters receive its k-th request (a fetch, a produce, a
		// transaction call, an offset lookup...): the request still takes effect but its
		// answer is lost, as in a crash.
		ctx, kill := context.WithCancel(context.Background())
		var mu sync.Mutex
		killAt, seen := 1+rng.IntN(40), 0
		for _, c := range []*kafkatest.Cluster{src, dst} {
			c.Fake().Control(func(kmsg.Request) (kmsg.Response, error, bool) {
				mu.Lock()
				defer mu.Unlock()
				if seen++; seen >= killAt {
					kill()
					c.Fake().DropControl()
				}
				return nil, nil, false
			})
		}
		run := startMirrorCtx(ctx, t, src, dst, "crashy", 2, i == 0)
		run.wg.Wait()
		kill()
		for p, err := range run.errs {
			if err != nil {
				t.Fatalf("round %d: partition %d: %v", i, p, err)
			}
		}

		run = startMirror(t, src, dst, "crashy", 2, false)
		kafkatest.WaitIdentical(t, src, dst, "crashy", kafkatest.IdenticalWithin)
		run.stop(t)
	}
}

func TestMirrorStopsOnForeignWrite(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "guarded", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("guarded", 0, 100, "a")...)
	run := startMirror(t, src, dst, "guarded", 1, true)
	kafkatest.WaitIdentical(t, src, dst, "guarded", kafkatest.IdenticalWithin)

	kafkatest.ProduceSync(t, dst.ManualProducer(t), &kgo.Record{Topic: "guarded", Value: []byte("intruder")})
	kafkatest.ProduceSync(t, prod, kafkatest.Records("guarded", 0, 10, "b")...)

	err := run.waitErr(t, 0)
	var mismatch *mirrorerr.OffsetMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("mirror error %v, want an offset mismatch", err)
	}
	if mismatch.Expected != 100 || mismatch.Actual != 101 {
		t.Fatalf("mismatch expected %d actual %d, want 100 and 101", mismatch.Expected, mismatch.Actual)
	}
	// Nothing was written past the mismatch: the destination holds the intruder and the one
	// batch the broker appended after it, no more.
	_, end, err := kafkareq.NewCluster("destination", dst.Client(t)).Offsets(context.Background(), "guarded", 0)
	if err != nil {
		t.Fatal(err)
	}
	if end > 111 {
		t.Fatalf("destination end %d: the mirror wrote past the mismatch", end)
	}
}

func TestMirrorBadInput(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "only-source", 1, nil)
	src.CreateTopic(t, "three", 3, nil)
	dst.CreateTopic(t, "three", 2, nil)
	src.CreateTopic(t, "full", 1, nil)
	dst.CreateTopic(t, "full", 1, nil)
	kafkatest.ProduceSync(t, dst.ManualProducer(t), &kgo.Record{Topic: "full", Value: []byte("already here")})

	run := func(topic string) error {
		m := NewPartitionMirror(src.Client(t), dst.Client(t), PartitionConfig{Mirror: "m1", Topic: topic, FirstStart: true})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return m.Run(ctx)
	}

	var unknown *mirrorerr.UnknownTopicError
	if err := run("nowhere"); !errors.As(err, &unknown) || unknown.Cluster != "source" {
		t.Fatalf("missing source topic: %v", err)
	}
	if err := run("only-source"); !errors.As(err, &unknown) || unknown.Cluster != "destination" {
		t.Fatalf("missing destination topic: %v", err)
	}
	var count *mirrorerr.PartitionCountMismatchError
	if err := run("three"); !errors.As(err, &count) || count.Source != 3 || count.Destination != 2 {
		t.Fatalf("partition count mismatch: %v", err)
	}
	var notEmpty *mirrorerr.DestinationNotEmptyError
	if err := run("full"); !errors.As(err, &notEmpty) || notEmpty.EndOffset != 1 {
		t.Fatalf("non-empty destination: %v", err)
	}
}

func TestMirrorAuthorizationFailures(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("reader", "reader-secret"))
	createBoth(t, src, dst, "secured", 1, nil)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records("secured", 0, 10, "s")...)

	// The mirror may read the destination topic but not write it.
	acl := kadm.NewACLs().Allow("User:reader").Topics("secured").Operations(kadm.OpDescribe, kadm.OpRead, kadm.OpDescribeConfigs).ResourcePatternType(kadm.ACLPatternLiteral)
	acl.AllowHosts()
	dst.CreateACLs(t, acl)

	for _, tc := range []struct {
		name     string
		src, dst *kgo.Client
		cluster  string
	}{
		{"source", clientAs(t, src, "reader", "reader-secret"), dst.Client(t), "source"},
		{"destination", src.Client(t), clientAs(t, dst, "reader", "reader-secret"), "destination"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewPartitionMirror(tc.src, tc.dst, PartitionConfig{Mirror: "m1", Topic: "secured", FirstStart: true})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := m.Run(ctx)
			var auth *mirrorerr.AuthorizationError
			if !errors.As(err, &auth) || auth.Cluster != tc.cluster {
				t.Fatalf("error %v, want an authorization error on the %s cluster", err, tc.cluster)
			}
		})
	}
}

func clientAs(t *testing.T, c *kafkatest.Cluster, user, password string) *kgo.Client {
	cl, err := kgo.NewClient(c.ClientOptsAs(user, password)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// countRequests counts the requests of one kind a cluster receives (that match, if match is
// set) without answering them.
func countRequests(c *kafkatest.Cluster, key kmsg.Key, match func(kmsg.Request) bool) *atomic.Int64 {
	var n atomic.Int64
	c.Fake().ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		if match == nil || match(req) {
			n.Add(1)
		}
		return nil, nil, false
	})
	return &n
}

// sessionCounter counts the sessions that start copying and passes every report on.
type sessionCounter struct {
	Observer
	n atomic.Int64
}

func countSessions(next Observer) *sessionCounter {
	if next == nil {
		next = NopObserver{}
	}
	return &sessionCounter{Observer: next}
}

func (c *sessionCounter) SessionStarted(mirror, topic string, partition int32) {
	c.n.Add(1)
	c.Observer.SessionStarted(mirror, topic, partition)
}

// requireOneSession fails the test unless sessions counted exactly one mirror session.
func requireOneSession(t *testing.T, sessions *atomic.Int64) {
	t.Helper()
	if n := sessions.Load(); n != 1 {
		t.Fatalf("%d mirror sessions, want 1", n)
	}
}

// slowProduces holds every produce d before the destination handles it, as a loaded broker
// does: a marker written while produces are in flight would take their offsets.
func slowProduces(dst *kafkatest.Cluster, d time.Duration) {
	dst.Fake().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		dst.Fake().KeepControl()
		dst.Fake().SleepControl(func() { time.Sleep(d) })
		return nil, nil, false
	})
}

// roundWriter writes each round of records as exactly one batch, under one idempotent
// producer: kgo cannot promise that (the drain goroutine of one flush can take the first
// records of the next round into a batch of their own), and the compacted scenarios need
// their batch boundaries.
type roundWriter struct {
	cl    kafkareq.Cluster
	codec int16
	as    recordbatch.Producer
	seq   map[int32]int32
}

// newRoundWriter writes to c in codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func newRoundWriter(t *testing.T, c *kafkatest.Cluster, codec int16) *roundWriter {
	t.Helper()
	cl := kafkareq.NewCluster("source", c.Client(t))
	as, err := cl.InitProducerID(context.Background(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &roundWriter{cl: cl, codec: codec, as: as, seq: map[int32]int32{}}
}

// produceRounds produces one batch per round to partition p, each record keyed by its key.
func produceRounds(t *testing.T, w *roundWriter, topic string, p int32, rounds ...[]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, keys := range rounds {
		now := time.Now().UnixMilli() // kfake applies retention when it compacts
		recs := make([]kmsg.Record, len(keys))
		for j, k := range keys {
			recs[j] = kmsg.Record{OffsetDelta: int32(j), Key: []byte(k), Value: []byte(fmt.Sprintf("%s@%d", k, i)),
				Headers: []kmsg.Header{{Key: "round", Value: []byte(strconv.Itoa(i))}}}
		}
		as := w.as
		as.Sequence = w.seq[p]
		batch, err := recordbatch.Encode(recordbatch.Spec{Codec: w.codec, FirstTimestamp: now, MaxTimestamp: now, Producer: as}, recs)
		if err != nil {
			t.Fatal(err)
		}
		// A fresh topic's leader can refuse a write until it learned it leads; the batch is
		// written again under the same sequence, which the broker takes once.
		for {
			meta, err := w.cl.Metadata(ctx, topic, p)
			if err == nil {
				_, err = w.cl.Produce(ctx, meta.Leader, topic, meta.ID, p, batch, nil)
			}
			if err == nil {
				break
			}
			if !kerr.IsRetriable(err) || kafkareq.Sleep(ctx, 50*time.Millisecond) != nil {
				t.Fatalf("producing round %d to %s/%d: %v", i, topic, p, err)
			}
		}
		w.seq[p] += int32(len(recs))
	}
}

func keyRange(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(prefix, i))
	}
	return out
}

// compactedSource fills a compacted, compressed topic of two partitions and compacts it with
// compact (kfake's own compaction, or kafkatest's Cleaner for Apache Kafka's batch shape).
// Partition 0 loses its whole first batch (its log start moves to the second batch, offset
// 725) and the leading records of the second; partition 1 loses records at the start, the
// inside and the end of its first batch.
func compactedSource(t *testing.T, src *kafkatest.Cluster, topic string, codec int16, compact func()) *roundWriter {
	t.Helper()
	prod := newRoundWriter(t, src, codec)
	first := make([]string, 725)
	for i := range first {
		first[i] = fmt.Sprint("k", i%25)
	}
	produceRounds(t, prod, topic, 0, first, keyRange("k", 0, 25), keyRange("k", 0, 10), []string{"active"})
	produceRounds(t, prod, topic, 1, keyRange("a", 0, 20), append([]string{"a0", "a1", "a7"}, keyRange("a", 15, 20)...), []string{"active"})
	compact()
	start, _, err := kafkareq.NewCluster("source", src.Client(t)).Offsets(context.Background(), topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if start != 725 {
		t.Fatalf("partition 0 log start %d after compaction, want 725: the scenario does not test what it should", start)
	}
	return prod
}

// A compacted, compressed source in every codec, as kfake compacts it and as Apache Kafka's
// cleaner does (base and original last offset kept): leading, inner and trailing holes, a
// log start moved to the first batch kept, and with the log start inside a batch. Produces
// are slower than markers, so a lone marker written with produces in flight would take their
// offsets.
func TestMirrorCompactedCompressedTopic(t *testing.T) {
	codecs := []struct {
		name  string
		codec int16
	}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}
	for _, shape := range []string{"kfake", "kafka"} {
		for _, c := range codecs {
			for _, logStartInside := range []bool{false, true} {
				if logStartInside && c.name != "gzip" {
					continue
				}
				name := shape + "/" + c.name
				if logStartInside {
					name += "/log-start-inside-batches"
				}
				t.Run(name, func(t *testing.T) {
					src, dst := kafkatest.Pair(t)
					configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete")}
					createBoth(t, src, dst, "compacted", 2, configs)
					compact := src.Fake().Compact
					if shape == "kafka" {
						compact = func() { kafkatest.NewCleaner(t, src).Clean(t) }
					}
					prod := compactedSource(t, src, "compacted", c.codec, compact)
					if logStartInside {
						// 730 lies in partition 0's leading hole at 725-734, 3 in the run
						// partition 1 keeps at 2-6.
						src.DeleteRecords(t, "compacted", 0, 730)
						src.DeleteRecords(t, "compacted", 1, 3)
					}
					slowProduces(dst, 40*time.Millisecond)

					run := startMirror(t, src, dst, "compacted", 2, true)
					kafkatest.WaitIdentical(t, src, dst, "compacted", kafkatest.IdenticalWithin)
					produceRounds(t, prod, "compacted", 1, keyRange("b", 0, 5))
					kafkatest.WaitIdentical(t, src, dst, "compacted", kafkatest.IdenticalWithin)
					run.stop(t)
					if n := run.sessions.Load(); n != 2 {
						t.Fatalf("%d mirror sessions for 2 partitions: a session ended on the way", n)
					}
				})
			}
		}
	}
}

// A session ends (here: killed) while it fills the holes of a compacted batch, with
// WriteTxnMarkers or through the gap writers (the destination refuses WriteTxnMarkers); the
// next one resumes inside that batch, also inside its trailing hole.
func TestMirrorResumesInsideCompactedBatch(t *testing.T) {
	// Through the gap writers the holes 0-1 take AddPartitionsToTxn 1 and 2 (two gap writers
	// at once), hole 7 the third, the holes 15-19 the fourth to eighth; with WriteTxnMarkers
	// each run of holes is one request.
	for _, tc := range []struct {
		markers bool
		killAt  int64
	}{{false, 3}, {false, 4}, {false, 6}, {true, 1}, {true, 2}} {
		name := fmt.Sprint("gap writers killed at lone marker ", tc.killAt)
		if tc.markers {
			name = fmt.Sprint("killed after WriteTxnMarkers request ", tc.killAt)
		}
		t.Run(name, func(t *testing.T) {
			compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
			src, dst, _ := mirroredTopic(t, "resume", 1, compact)
			// Offsets 0-19 keep runs 2-6 and 8-14: holes at 0-1, 7 and 15-19.
			produceRounds(t, newRoundWriter(t, src, 3), "resume", 0, keyRange("a", 0, 20), append([]string{"a0", "a1", "a7"}, keyRange("a", 15, 20)...), []string{"active"})
			kafkatest.NewCleaner(t, src).Clean(t)

			ctx, kill := context.WithCancel(context.Background())
			defer kill()
			dc := dst.Client(t)
			if tc.markers {
				dc = dst.Client(t, kgo.WithHooks(&killAfterMarkers{killAt: tc.killAt, n: writeCounter{key: int16(kmsg.WriteTxnMarkers)}, kill: kill}))
			} else {
				// Every lone marker starts with an AddPartitionsToTxn of its gap writer; the
				// killAt-th takes effect but its answer is lost.
				refuseWriteTxnMarkers(dst)
				adds := int64(0)
				dst.Fake().ControlKey(int16(kmsg.AddPartitionsToTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
					dst.Fake().KeepControl()
					if adds++; adds == tc.killAt {
						kill()
						dst.Fake().DropControl()
					}
					return nil, nil, false
				})
			}
			run := startMirrorClients(ctx, t, src.Client(t), dc, "resume", 1, true)
			run.wg.Wait()
			if err := run.errs[0]; err != nil {
				t.Fatal(err)
			}
			_, end, err := kafkareq.NewCluster("destination", dst.Client(t)).Offsets(context.Background(), "resume", 0)
			if err != nil {
				t.Fatal(err)
			}
			if end == 0 || end >= 20 {
				t.Fatalf("killed with the destination ending at %d, not inside the compacted batch 0-19", end)
			}

			run = startMirror(t, src, dst, "resume", 1, false)
			kafkatest.WaitIdentical(t, src, dst, "resume", kafkatest.IdenticalWithin)
			run.stop(t)
		})
	}
}

// A tiered-storage read that did not finish in time answers no records with the real high
// watermark: the mirror fills nothing and asks again, in the same session.
func TestMirrorEmptyFetchAnswers(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "tiered", 1, nil, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	kafkatest.ProduceSync(t, prod, kafkatest.Records("tiered", 0, 50, "a")...)
	empty := src.EmptyFetches(t, "tiered", 0, 5)

	run := startMirror(t, src, dst, "tiered", 1, true)
	empty.Wait(t, kafkatest.IdenticalWithin)
	kafkatest.WaitIdentical(t, src, dst, "tiered", kafkatest.IdenticalWithin)

	// Again in the middle of the log. The records arrive while the mirror waits out a
	// throttle, so its next fetch asks below the high watermark: a long poll at the end of
	// the log would get them straight from the broker, and no empty answer would be served.
	throttled := src.ThrottleFetches(t, "tiered", 0, 1, 3*time.Second)
	throttled.Wait(t, kafkatest.IdenticalWithin)
	empty = src.EmptyFetches(t, "tiered", 0, 3)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("tiered", 0, 30, "b")...)
	empty.Wait(t, kafkatest.IdenticalWithin)
	kafkatest.WaitIdentical(t, src, dst, "tiered", kafkatest.IdenticalWithin)
	run.stop(t)
	requireOneSession(t, run.sessions)
}

// A throttled fetch answers with no partitions: the mirror waits and asks again, in the same
// session.
func TestMirrorThrottledFetches(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "throttled", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("throttled", 0, 50, "a")...)
	throttled := src.ThrottleFetches(t, "throttled", 0, 3, 30*time.Millisecond)

	run := startMirror(t, src, dst, "throttled", 1, true)
	throttled.Wait(t, kafkatest.IdenticalWithin)
	kafkatest.WaitIdentical(t, src, dst, "throttled", kafkatest.IdenticalWithin)
	run.stop(t)
	requireOneSession(t, run.sessions)
}

// A fetch answered OFFSET_OUT_OF_RANGE from an offset the source's log holds, as from a
// leader replaced meanwhile whose log start its successor had not reached, ends the session
// only: the next one fetches again, and the partition never fails.
func TestMirrorRetriesAFetchOutOfRangeInsideTheLog(t *testing.T) {
	src, dst, prod := mirroredTopic(t, "moved", 1, nil)
	kafkatest.ProduceSync(t, prod, kafkatest.Records("moved", 0, 50, "a")...)
	var refused atomic.Int32
	src.AnswerFetches(t, "moved", 0, func(fp kmsg.FetchRequestTopicPartition) *kmsg.FetchResponseTopicPartition {
		if fp.FetchOffset >= 50 || refused.Add(1) > 1 {
			return nil
		}
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.ErrorCode = kerr.OffsetOutOfRange.Code
		return &rp
	})

	run := startMirror(t, src, dst, "moved", 1, true)
	kafkatest.WaitIdentical(t, src, dst, "moved", kafkatest.IdenticalWithin)
	run.stop(t)
	if refused.Load() == 0 {
		t.Fatal("no fetch was answered out of range")
	}
}

// A coordinator keeps a transactional id busy a little after its markers land: the mirror's
// next AddPartitionsToTxn gets CONCURRENT_TRANSACTIONS and is retried in place.
func TestMirrorRetriesConcurrentTransactions(t *testing.T) {
	// The id stays busy a quarter of the marker delay after the marker: longer than the
	// mirror's marker polls take to see it.
	src, dst := kafkatest.Pair(t, kafkatest.MarkerDelay(600*time.Millisecond))
	createBoth(t, src, dst, "busy", 1, nil)
	txn := src.ManualProducer(t, kgo.TransactionalID("busy-app"))
	ctx := context.Background()
	const txns = 3
	for i := range txns {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		kafkatest.ProduceSync(t, txn, kafkatest.Records("busy", 0, 3, fmt.Sprint("t", i))...)
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(i%2 == 0)); err != nil {
			t.Fatal(err)
		}
	}
	sessions := countSessions(nil)
	// Strict mode answers a busy id itself, before any control of the test sees the request:
	// count what the mirror's client writes.
	adds := &writeCounter{key: int16(kmsg.AddPartitionsToTxn)}
	m := NewPartitionMirror(src.Client(t), dst.Client(t, kgo.WithHooks(adds)), PartitionConfig{Mirror: "m1", Topic: "busy", FirstStart: true, Observer: sessions})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	kafkatest.WaitIdentical(t, src, dst, "busy", kafkatest.IdenticalWithin)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	requireOneSession(t, &sessions.n)
	if n := adds.n.Load(); n <= txns {
		t.Fatalf("%d AddPartitionsToTxn for %d transactions: none was answered CONCURRENT_TRANSACTIONS, the test shows nothing", n, txns)
	}
}

// writeCounter counts the requests of one kind a client writes.
type writeCounter struct {
	key int16
	n   atomic.Int64
}

func (c *writeCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == c.key && err == nil {
		c.n.Add(1)
	}
}

func TestSessionRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		backoff    time.Duration
		progressed bool
		now, next  time.Duration
	}{
		{initialBackoff, false, initialBackoff, 2 * initialBackoff},
		{time.Second, false, time.Second, maxBackoff},
		{maxBackoff, false, maxBackoff, maxBackoff},
		{maxBackoff, true, initialBackoff, 2 * initialBackoff},
	} {
		if now, next := retryBackoff(tc.backoff, tc.progressed); now != tc.now || next != tc.next {
			t.Errorf("retryBackoff(%v, %v) = %v, %v; want %v, %v", tc.backoff, tc.progressed, now, next, tc.now, tc.next)
		}
	}
}

// A draining mirror returns by itself once no replayed transaction is open: while one is,
// it keeps copying until the source's marker is on the destination.
func TestMirrorDrainStopsAtTransactionBoundary(t *testing.T) {
	src, dst, txn := mirroredTopic(t, "drain", 1, nil, kgo.TransactionalID("drain-app"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, txn, kafkatest.Records("drain", 0, 5, "open")...)
	m := NewPartitionMirror(src.Client(t), dst.Client(t), PartitionConfig{Mirror: "m1", Topic: "drain", FirstStart: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	kafkatest.WaitIdentical(t, src, dst, "drain", kafkatest.IdenticalWithin)

	m.Drain()
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the mirror did not return after the transaction ended")
	}
	// It returned after copying the commit marker, not before.
	kafkatest.WaitIdentical(t, src, dst, "drain", kafkatest.IdenticalWithin)
}

func TestNextSequenceWraps(t *testing.T) {
	for _, tc := range []struct{ seq, n, want int32 }{
		{0, 5, 5},
		{2147483647 - 2, 2, 2147483647},
		{2147483647 - 2, 3, 0},
		{2147483647, 10, 9},
	} {
		if got := nextSequence(tc.seq, tc.n); got != tc.want {
			t.Errorf("nextSequence(%d, %d) = %d, want %d", tc.seq, tc.n, got, tc.want)
		}
	}
}
