package kafkatest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// A kgo transactional producer's commit returns before the marker is in the
// log; meanwhile another producer's record lands before the marker, and
// every request for the transactional id answers CONCURRENT_TRANSACTIONS.
func TestStrictMarkersAreAsynchronous(t *testing.T) {
	gate := make(chan struct{})
	c := New(t, markerGate(gate))
	c.CreateTopic(t, "t", 1, nil)
	ctx := testCtx(t)

	txp := c.Client(t, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	transaction(ctx, t, txp, kgo.TryCommit, kgo.StringRecord("a"), kgo.StringRecord("b"))
	cl := c.Client(t)
	if got := partitionOffsets(t, cl, "t", 0); got != (offsets{0, 2, 0}) {
		t.Fatalf("right after the commit: offsets %+v, want the marker still missing {0 2 0}", got)
	}

	// Another producer's append is accepted and lands before the marker.
	other := c.Client(t, kgo.DefaultProduceTopic("t"))
	r, err := other.ProduceSync(ctx, kgo.StringRecord("other")).First()
	if err != nil || r.Offset != 2 {
		t.Fatalf("other producer: offset %d, %v; want offset 2", r.Offset, err)
	}

	// The transactional id is busy until the marker is written.
	pid, epoch, err := txp.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x := &rawTxn{t: t, cl: cl, id: "tx", pid: pid, epoch: epoch, seq: map[int32]int32{}}
	if err := x.add("t", 0); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Errorf("AddPartitionsToTxn while the marker is pending: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if _, err := x.end(false); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Errorf("EndTxn while the marker is pending: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if rp := x.produce("t", 0, kv("", "x", 1)); rp.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Errorf("transactional produce while the marker is pending: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(rp.ErrorCode))
	}
	ipReq := kmsg.NewPtrInitProducerIDRequest()
	ipReq.TransactionalID = kmsg.StringPtr("tx")
	ipReq.TransactionTimeoutMillis = 60000
	if resp, err := ipReq.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Errorf("InitProducerID while the marker is pending: %v %v, want CONCURRENT_TRANSACTIONS", err, resp)
	}
	aoReq := kmsg.NewPtrAddOffsetsToTxnRequest()
	aoReq.TransactionalID, aoReq.ProducerID, aoReq.ProducerEpoch, aoReq.Group = "tx", pid, epoch, "g"
	if resp, err := aoReq.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Errorf("AddOffsetsToTxn while the marker is pending: %v %v, want CONCURRENT_TRANSACTIONS", err, resp)
	}

	// The coordinator says the transaction is completing, for this id only.
	other2 := c.Client(t, kgo.TransactionalID("tx-other"), kgo.DefaultProduceTopic("t"))
	if _, _, err := other2.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	described, err := kadm.NewClient(cl).DescribeTransactions(ctx, "tx", "tx-other")
	if err != nil {
		t.Fatal(err)
	}
	if d := described["tx"]; d.State != "PrepareCommit" || d.ProducerID != pid {
		t.Errorf("DescribeTransactions while the marker is pending: %+v, want PrepareCommit of producer %d", d, pid)
	}
	if d := described["tx-other"]; d.Err != nil || d.State != "Empty" {
		t.Errorf("DescribeTransactions of another id: %+v, want kfake's Empty", d)
	}

	close(gate)
	waitOffsets(t, cl, "t", 0, offsets{0, 4, 4})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		described, err := kadm.NewClient(cl).DescribeTransactions(ctx, "tx")
		if err == nil && described["tx"].State == "Empty" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DescribeTransactions after the marker landed: %+v %v, want the transaction complete", described["tx"], err)
		}
	}
	if got := layout(readLog(t, cl, "t", 0)); got != "ttdC" {
		t.Fatalf("log %q, want ttdC", got)
	}

	// The producer carries on once the marker is there.
	transaction(ctx, t, txp, kgo.TryAbort, kgo.StringRecord("c"))
	waitOffsets(t, cl, "t", 0, offsets{0, 6, 6})
	if got := layout(readLog(t, cl, "t", 0)); got != "ttdCtA" {
		t.Fatalf("log %q, want ttdCtA", got)
	}
}

// Without a gate the markers land on their own, and a producer that starts
// its next transaction at once is held off (kgo retries
// CONCURRENT_TRANSACTIONS) until they have.
func TestStrictMarkersLandByThemselves(t *testing.T) {
	c := New(t)
	c.CreateTopic(t, "t", 1, nil)
	ctx := testCtx(t)
	txp := c.Client(t, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	for i := range 4 {
		transaction(ctx, t, txp, kgo.TransactionEndTry(i%2 == 0), kgo.StringRecord("a"), kgo.StringRecord("b"))
	}
	cl := c.Client(t)
	waitOffsets(t, cl, "t", 0, offsets{0, 12, 12})
	if got := layout(readLog(t, cl, "t", 0)); got != "ttCttAttCttA" {
		t.Fatalf("log %q, want ttCttAttCttA", got)
	}
}

// EndTxn v5 (KIP-890) answers with the bumped epoch at once; the new epoch
// works once the marker is written.
func TestStrictEndTxnV5(t *testing.T) {
	for _, brokers := range []int{1, 3} {
		t.Run(strconv.Itoa(brokers)+" brokers", func(t *testing.T) { testStrictEndTxnV5(t, brokers) })
	}
}

func testStrictEndTxnV5(t *testing.T, brokers int) {
	gate := make(chan struct{})
	cl := clusterWithT(t, 1, markerGate(gate), Brokers(brokers))
	x := newRawTxn(t, cl, "replay")
	oldEpoch := x.epoch
	x.mustAdd("t", 0)
	x.mustProduce("t", 0, kv("k", "v", 1000))
	resp, err := x.end(true)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 5 || resp.ProducerEpoch != oldEpoch+1 {
		t.Fatalf("EndTxn v%d answered epoch %d, want v5+ with epoch %d", resp.Version, resp.ProducerEpoch, oldEpoch+1)
	}
	if err := x.add("t", 0); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("AddPartitionsToTxn with the new epoch before the marker: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	close(gate)
	waitOffsets(t, cl, "t", 0, offsets{0, 2, 2})
	retry(t, func() error { return x.add("t", 0) }) // the coordinator completes the transaction after its marker
	if off := x.mustProduce("t", 0, kv("k", "w", 1001)); off != 2 {
		t.Fatalf("next transaction's record at %d, want 2", off)
	}
	x.mustEnd(false)
	waitOffsets(t, cl, "t", 0, offsets{0, 4, 4})
	if got := layout(readLog(t, cl, "t", 0)); got != "tCtA" {
		t.Fatalf("log %q, want tCtA", got)
	}
}

// The id stays busy a little after its markers land, as a real coordinator
// logs the transaction's completion only then; it is free afterwards.
func TestStrictIdBusyAfterMarkersLand(t *testing.T) {
	const delay = 400 * time.Millisecond // the id stays busy delay/4 after the marker
	cl := clusterWithT(t, 1, MarkerDelay(delay))
	x := newRawTxn(t, cl, "replay")
	x.mustAdd("t", 0)
	x.mustProduce("t", 0, kv("k", "v", 1000))
	x.mustEnd(true)
	waitOffsets(t, cl, "t", 0, offsets{0, 2, 2})
	landed := time.Now()
	err := x.add("t", 0)
	if time.Since(landed) < delay/4 && !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("AddPartitionsToTxn right after the marker landed: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	retry(t, func() error { return x.add("t", 0) })
	if busy := time.Since(landed); busy < delay/8 {
		t.Fatalf("the id was free %v after the marker landed, want about %v", busy, delay/4)
	}
	x.mustProduce("t", 0, kv("k", "w", 1001))
	x.mustEnd(false)
	waitOffsets(t, cl, "t", 0, offsets{0, 4, 4})
}

// InitProducerID for an id with an ongoing transaction answers
// CONCURRENT_TRANSACTIONS while the abort markers are written later, as on a
// real broker; the retry then succeeds with a higher epoch.
func TestStrictInitProducerIDFencesAsynchronously(t *testing.T) {
	gate := make(chan struct{})
	cl := clusterWithT(t, 1, markerGate(gate))
	x := newRawTxn(t, cl, "tx")
	x.mustAdd("t", 0)
	x.mustProduce("t", 0, kv("k", "v", 1))

	init := func() (*kmsg.InitProducerIDResponse, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr("tx")
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp, kerr.ErrorForCode(resp.ErrorCode)
	}
	if _, err := init(); !errors.Is(err, kerr.ConcurrentTransactions) {
		t.Fatalf("InitProducerID over an ongoing transaction: %v, want CONCURRENT_TRANSACTIONS", err)
	}
	if got := partitionOffsets(t, cl, "t", 0); got != (offsets{0, 1, 0}) {
		t.Fatalf("offsets %+v, want the abort marker still missing", got)
	}
	close(gate)
	var resp *kmsg.InitProducerIDResponse
	retry(t, func() (err error) { resp, err = init(); return err })
	if resp.ProducerEpoch <= x.epoch {
		t.Fatalf("epoch %d after fencing, was %d", resp.ProducerEpoch, x.epoch)
	}
	waitOffsets(t, cl, "t", 0, offsets{0, 2, 2})
	if got := layout(readLog(t, cl, "t", 0)); got != "tA" {
		t.Fatalf("log %q, want tA", got)
	}
}

// EndTxns that write no marker are answered by kfake at once.
func TestStrictEndTxnWithoutMarkerIsImmediate(t *testing.T) {
	gate := make(chan struct{}) // never opened: nothing may wait on it
	cl := clusterWithT(t, 1, markerGate(gate))
	defer close(gate)
	x := newRawTxn(t, cl, "tx")

	// Aborting an empty transaction (v5): epoch bump, no marker.
	if _, err := x.end(false); err != nil {
		t.Fatalf("empty abort: %v", err)
	}
	x.mustAdd("t", 0) // not held: nothing is pending

	// A stale epoch is fenced right away.
	stale := &rawTxn{t: t, cl: cl, id: "tx", pid: x.pid, epoch: x.epoch - 1, seq: map[int32]int32{}}
	if _, err := stale.end(true); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("stale epoch: %v, want PRODUCER_FENCED", err)
	}
	if got := partitionOffsets(t, cl, "t", 0); got.hw != 0 {
		t.Fatalf("high watermark %d, want 0", got.hw)
	}
}

// An empty transaction with the partition added ends in a lone abort marker:
// how the mirror fills gaps.
func TestStrictLoneAbortMarker(t *testing.T) {
	cl := clusterWithT(t, 1)
	mustProduce(t, cl, "t", 0, kv("k", "v", 1))
	x := newRawTxn(t, cl, "filler")
	for range 3 {
		// The id is busy until the previous marker is written.
		for {
			err := x.add("t", 0)
			if err == nil {
				break
			}
			if !errors.Is(err, kerr.ConcurrentTransactions) {
				t.Fatal(err)
			}
		}
		x.mustEnd(false)
	}
	mustProduce(t, cl, "t", 0, kv("k", "w", 2))
	waitOffsets(t, cl, "t", 0, offsets{0, 5, 5})
	got := layout(readLog(t, cl, "t", 0))
	if strings.Count(got, "L") != 3 || got[0] != 'd' {
		t.Fatalf("log %q, want d, three lone aborts and d in some order", got)
	}
}

// WriteTxnMarkers as a broker checks it: a marker whose producer epoch or coordinator epoch
// is below the last one of its producer id on the partition is refused and not written;
// markers at the same epochs are written again and again.
func TestStrictWriteTxnMarkersEpochs(t *testing.T) {
	cl := clusterWithT(t, 1)
	ctx := testCtx(t)
	write := func(epoch int16, coordinatorEpoch int32) error {
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch = 7, epoch, coordinatorEpoch
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = "t", []int32{0}
		m.Topics = append(m.Topics, mt)
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		req.Markers = []kmsg.WriteTxnMarkersRequestMarker{m, m}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Markers[0].Topics[0].Partitions[0].ErrorCode)
	}
	for _, tc := range []struct {
		epoch            int16
		coordinatorEpoch int32
		want             error
	}{
		{3, 2, nil},
		{3, 2, nil},
		{2, 2, kerr.InvalidProducerEpoch},
		{4, 1, kerr.TransactionCoordinatorFenced},
		{4, 2, nil},
	} {
		if err := write(tc.epoch, tc.coordinatorEpoch); !errors.Is(err, tc.want) && err != tc.want {
			t.Fatalf("markers at epoch %d, coordinator epoch %d: %v, want %v", tc.epoch, tc.coordinatorEpoch, err, tc.want)
		}
	}
	waitOffsets(t, cl, "t", 0, offsets{0, 6, 6})
}

func TestLenientMarkersAreSynchronous(t *testing.T) {
	c := New(t, Lenient())
	c.CreateTopic(t, "t", 1, nil)
	ctx := testCtx(t)
	txp := c.Client(t, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"))
	transaction(ctx, t, txp, kgo.TryCommit, kgo.StringRecord("a"))
	if got := partitionOffsets(t, c.Client(t), "t", 0); got != (offsets{0, 2, 2}) {
		t.Fatalf("offsets %+v, want the marker written inside EndTxn", got)
	}
}

// Close writes the markers it still holds, so a DataDir cluster restarts
// with them.
func TestStrictCloseDeliversHeldMarkers(t *testing.T) {
	dir := t.TempDir()
	gate := make(chan struct{})
	defer close(gate)
	c, err := Start(DataDir(dir), markerGate(gate))
	if err != nil {
		t.Fatal(err)
	}
	c.CreateTopic(t, "t", 1, nil)
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	x := newRawTxn(t, cl, "tx")
	x.mustAdd("t", 0)
	x.mustProduce("t", 0, kv("k", "v", 1))
	x.mustEnd(true)
	cl.Close()
	c.Close()
	if err := c.strictErr(); err != nil {
		t.Fatal(err)
	}

	c2 := New(t, DataDir(dir))
	if got := partitionOffsets(t, c2.Client(t), "t", 0); got != (offsets{0, 2, 2}) {
		t.Fatalf("after restart: offsets %+v, want the commit marker at 1", got)
	}
}

func TestStrictProduceValidation(t *testing.T) { checkProduceValidation(t, New(t)) }

// Strict mode's produce checks are Apache Kafka's: the same table on a real broker.
func TestKafkaProduceValidation(t *testing.T) {
	for _, v := range KafkaVersions() {
		t.Run(v, func(t *testing.T) {
			c := Shared(t, "kafka-"+v, Kafka(v))
			Tally(t, c.Broker())
			checkProduceValidation(t, c)
		})
	}
}

// checkProduceValidation produces hand-built batches that real Kafka's LogValidator
// rejects (and some it accepts) and checks the answers.
func checkProduceValidation(t *testing.T, c *Cluster) {
	c.CreateTopic(t, "plain", 1, nil)
	c.CreateTopic(t, "compacted", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact")})
	c.CreateTopic(t, "altered", 1, nil)
	c.CreateTopic(t, "legacy-altered", 1, nil)
	ctx := testCtx(t)
	adm := c.Admin(t)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("delete,compact")}}, "altered"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}, "legacy-altered"); err != nil {
		t.Fatal(err)
	}

	two := []rec{kv("k1", "a", 100), kv("k2", "b", 101)}
	nullKey := []rec{kv("k1", "a", 100), kv("", "b", 101)}
	cases := []struct {
		name  string
		topic string
		batch []byte
		want  *kerr.Error // nil: appended
	}{
		{"valid", "plain", buildBatch(two, batchSpec{}), nil},
		{"valid gzip", "plain", buildBatch(two, batchSpec{gzip: true}), nil},
		{"valid idempotent", "plain", buildBatch(two, batchSpec{pid: 4242, epoch: 0, seq: 0}), nil},
		{"empty batch", "plain", buildBatch(nil, batchSpec{}), kerr.InvalidRecord},
		{"offset range wider than count", "plain", buildBatch(two, batchSpec{lod: i32(10)}), kerr.InvalidRecord},
		{"count says 10, 2 present", "plain", buildBatch(two, batchSpec{lod: i32(9), count: i32(10)}), kerr.InvalidRecord},
		{"gzip count says 3, 2 present", "plain", buildBatch(two, batchSpec{gzip: true, lod: i32(2), count: i32(3)}), kerr.InvalidRecord},
		{"CRC false", "plain", buildBatch(two, batchSpec{badCRC: true}), kerr.CorruptMessage},
		// The CRC holds (it is computed over the cut records), the last record does not.
		{"record cut short", "plain", buildBatch(two, batchSpec{cut: 1}), kerr.InvalidRecord},
		{"gzip record cut short", "plain", buildBatch(two, batchSpec{gzip: true, cut: 1}), kerr.InvalidRecord},
		// Records that do not decompress: Kafka's decompressing stream throws, unmapped.
		{"gzip stream damaged", "plain", buildBatch(two, batchSpec{gzip: true, damage: true}), kerr.UnknownServerError},
		{"producer id without sequence", "plain", buildBatch(two, batchSpec{pid: 77, epoch: 0, seq: -1}), kerr.InvalidRecord},
		{"null key, plain topic", "plain", buildBatch(nullKey, batchSpec{}), nil},
		{"null key, compacted at creation", "compacted", buildBatch(nullKey, batchSpec{}), kerr.InvalidRecord},
		{"keys, compacted", "compacted", buildBatch(two, batchSpec{}), nil},
		{"null key, compacted by IncrementalAlterConfigs", "altered", buildBatch(nullKey, batchSpec{}), kerr.InvalidRecord},
		{"null key, compacted by AlterConfigs", "legacy-altered", buildBatch(nullKey, batchSpec{}), kerr.InvalidRecord},
	}
	for _, version := range []int16{13, 11} {
		v := kversion.Stable()
		v.SetMaxKeyVersion(int16(kmsg.Produce), version)
		cl := c.Client(t, kgo.MaxVersions(v))
		for _, tc := range cases {
			before := partitionOffsets(t, cl, tc.topic, 0).hw
			rp := produceRaw(t, cl, tc.topic, 0, tc.batch)
			after := partitionOffsets(t, cl, tc.topic, 0).hw
			switch reject := tc.want != nil; {
			case reject && rp.ErrorCode != tc.want.Code:
				t.Errorf("v%d %s: %v, want %s", version, tc.name, kerr.ErrorForCode(rp.ErrorCode), tc.want.Message)
			case reject && after != before:
				t.Errorf("v%d %s: high watermark %d -> %d: want nothing appended", version, tc.name, before, after)
			// Strict mode says why; Apache Kafka answers most of these without a message.
			case reject && c.Fake() != nil && (rp.ErrorMessage == nil || *rp.ErrorMessage == ""):
				t.Errorf("v%d %s: high watermark %d -> %d, message %v: want nothing appended and a reason", version, tc.name, before, after, rp.ErrorMessage)
			case !reject && rp.ErrorCode != 0:
				t.Errorf("v%d %s: %v, want success", version, tc.name, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
}

// Only the invalid partition of a request is refused.
func TestStrictRejectsOnlyTheInvalidPartition(t *testing.T) {
	cl := clusterWithT(t, 2)
	mustProduce(t, cl, "t", 1, kv("k", "first", 1))
	rps := produceRawTo(t, cl, nil,
		target{"t", 0, buildBatch(nil, batchSpec{})},
		target{"t", 1, buildBatch([]rec{kv("k", "v", 2)}, batchSpec{})},
	)
	if rps[0].ErrorCode != kerr.InvalidRecord.Code || rps[1].ErrorCode != 0 || rps[1].BaseOffset != 1 {
		t.Fatalf("answers %+v, want INVALID_RECORD for partition 0 and offset 1 for partition 1", rps)
	}
	// The one-request fault is gone: the next valid batch to partition
	// 0 goes in.
	if off := mustProduce(t, cl, "t", 0, kv("k", "v", 3)); off != 0 {
		t.Fatalf("offset %d, want 0", off)
	}
}

func TestLenientAcceptsWhatStrictRejects(t *testing.T) {
	cl := clusterWithT(t, 1, Lenient())
	if rp := produceRaw(t, cl, "t", 0, buildBatch(nil, batchSpec{})); rp.ErrorCode != 0 {
		t.Fatalf("lenient empty batch: %v, want kfake's acceptance", kerr.ErrorForCode(rp.ErrorCode))
	}
}

func TestValidateProduceBatch(t *testing.T) {
	// Malformed batches are left to kfake's own checks.
	good := buildBatch([]rec{kv("k", "v", 1)}, batchSpec{})
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 0xff
	for name, raw := range map[string][]byte{"short": good[:30], "bad crc": badCRC, "two batches": append(append([]byte(nil), good...), good...)} {
		if code, _, _ := validateProduceBatch(raw); code != 0 {
			t.Errorf("%s: code %d, want 0 (kfake decides)", name, code)
		}
	}
	if code, _, nullKey := validateProduceBatch(buildBatch([]rec{kv("", "v", 1)}, batchSpec{})); code != 0 || !nullKey {
		t.Errorf("null key: code %d nullKey %v", code, nullKey)
	}
}

// Several transactional producers at once: every EndTxn sleeps for its
// lookup while the others go on; nothing deadlocks and every marker lands.
func TestStrictConcurrentProducers(t *testing.T) {
	c := New(t, Brokers(2))
	c.CreateTopic(t, "t", 1, nil)
	const producers, txns = 4, 5
	errc := make(chan error, producers)
	ctx := testCtx(t)
	for i := range producers {
		cl := c.Client(t, kgo.TransactionalID("tx"+strconv.Itoa(i)), kgo.DefaultProduceTopic("t"))
		go func() {
			for j := range txns {
				if err := cl.BeginTransaction(); err != nil {
					errc <- err
					return
				}
				if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
					errc <- err
					return
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(j%2 == 0)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range producers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	cl := c.Client(t)
	const n = producers * txns * 2
	waitOffsets(t, cl, "t", 0, offsets{0, n, n})
	got := layout(readLog(t, cl, "t", 0))
	if strings.Count(got, "t") != n/2 || strings.Count(got, "C") != producers*3 {
		t.Fatalf("log %q: want %d transactional records and %d commits", got, n/2, producers*3)
	}
	if strings.Count(got, "A") != producers*2 {
		t.Fatalf("log %q: want %d aborts", got, producers*2)
	}
}
