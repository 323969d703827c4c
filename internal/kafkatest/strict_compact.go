package kafkatest

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// Cleaner runs kfake's log compaction and makes what it leaves look like what Apache Kafka's
// log cleaner writes. Both keep a partially cleaned batch's base offset; Apache Kafka also
// keeps its original last offset (so the producer's last sequence survives) and its codec
// (MemoryRecords.filterTo, buildRetainedRecordsInto with overrideLastOffset), while kfake
// shrinks the last offset to the last record kept and stores the records uncompressed. So
// readers of an Apache Kafka log meet batches whose records start after the base offset and
// end before the last offset.
//
// kfake's stored batches cannot be changed, so the Cleaner answers every Fetch itself (but
// those fetch faults answer): it sends the same request (same version, made sessionless) on
// a client of its own, restores each rebuilt batch's last offset and codec in the answer,
// and returns that. An answer read while a Clean moved kfake's log start is read again: a
// long poll waiting across a Clean would otherwise carry kfake's log start, which a mirror
// copies to its destination. One Cleaner per cluster.
//
// kfake moves the log start to the first batch it keeps, as Apache Kafka 4.x was seen to do
// in the real-broker tier. Fetches older than v11 (no rack field to tell the Cleaner's own
// requests by) get kfake's shape.
//
// kfake also drops a transaction marker as soon as its producer has no data left in the
// log; Apache Kafka keeps a marker until delete.retention.ms (24 hours by default) after
// the round that found its transaction's data gone (LogCleaner, the delete horizon). The
// Cleaner keeps such markers and puts them back into fetch answers. When kfake moved the log
// start past markers it dropped (they were the first batches it would have kept), the
// Cleaner keeps Apache Kafka's log start at the first of them: in ListOffsets answers for the
// earliest offset (a request that asks only for that), in fetch answers, for fetches from
// there, and for a DeleteRecords below kfake's log start, which moves it. A DeleteRecords
// below the log start succeeds and changes nothing, as on Apache Kafka (kfake refuses it).
// While it cleans, other readers wait, so none sees a log start kfake moved before the
// Cleaner kept it (a mirror would copy it to its destination).
type Cleaner struct {
	c *Cluster

	mu      sync.Mutex
	kept    map[cleanedPartition]map[int64]keptBatch // by base offset
	markers map[cleanedPartition]map[int64][]byte    // markers kfake dropped, as stored, by offset
	starts  map[cleanedPartition]keptStart           // log starts kept below kfake's
	ids     map[string][16]byte                      // compacted topics' ids, for fetches by name
	clients map[int16][]*kgo.Client                  // the Cleaner's own fetches, idle ones by version
	all     []*kgo.Client                            // every one of them, to close
	own     *kgo.Client                              // the Cleaner's own ListOffsets and compaction request
	// cleaning is closed when the Clean under way is done; nil between Cleans. Meanwhile
	// other readers wait: kfake's log starts may have moved and the kept ones are not
	// worked out yet.
	cleaning chan struct{}
	cleans   int // Cleans begun: an answer read across one is read again
	// compaction is what the control of the Cleaner's compaction request runs (compact).
	compaction func()
}

// asCleaner reads kfake's own log, past the Cleaner's controls.
var asCleaner = reader{rack: cleanerRack, replica: debugReplica}

// cleanWait bounds a reader's wait for a Clean.
const cleanWait = 30 * time.Second

// awaitClean has the control's request sleep until the Clean under way, if any, is done.
func (k *Cleaner) awaitClean() {
	k.mu.Lock()
	done := k.cleaning
	k.mu.Unlock()
	if done != nil {
		k.c.fake.SleepControl(func() {
			select {
			case <-done:
			case <-time.After(cleanWait):
			}
		})
	}
}

type cleanedPartition struct {
	topic     [16]byte
	partition int32
}

// keptStart is Apache Kafka's log start, at, below kfake's, which kfake moved past markers it
// dropped.
type keptStart struct {
	at, kfake int64
}

// keptBatch is what Apache Kafka keeps of a batch kfake rebuilt.
type keptBatch struct {
	last  int64
	codec int16
}

// cleanerRack marks the Cleaner's own fetches, which kfake answers as it would; readerRack
// the comparator's, which see Apache Kafka's shape. Injected fetch faults spare both: they
// are for the mirror.
const (
	cleanerRack = "kafkatest-cleaner"
	readerRack  = "kafkatest-reader"
)

// NewCleaner returns the Cleaner of a kfake cluster.
func NewCleaner(t TB, c *Cluster) *Cleaner {
	t.Helper()
	if c.fake == nil {
		t.Fatalf("kafkatest.NewCleaner: %s is a real Kafka cluster; its own log cleaner compacts", c.id)
		return nil
	}
	k := &Cleaner{c: c, kept: map[cleanedPartition]map[int64]keptBatch{}, markers: map[cleanedPartition]map[int64][]byte{},
		starts: map[cleanedPartition]keptStart{}, ids: map[string][16]byte{}, clients: map[int16][]*kgo.Client{}}
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, cl := range k.all {
			cl.Close()
		}
		if k.own != nil {
			k.own.Close()
		}
	})
	c.controlFetches(func(fc *fetchControl) {
		if fc.cleaner != nil {
			t.Fatalf("kafkatest.NewCleaner: %s has a Cleaner already", c.id)
		}
		fc.cleaner = k
	})
	c.fake.ControlKey(int16(kmsg.ListOffsets), k.listOffsets)
	c.fake.ControlKey(int16(kmsg.DeleteRecords), k.deleteRecords)
	return k
}

// Clean compacts every compacted topic (kfake's Compact) and records, for each batch kfake
// rebuilt, the last offset and codec Apache Kafka's cleaner would have kept.
func (k *Cleaner) Clean(t TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := k.compactedTopics(ctx)
	if err != nil {
		t.Fatalf("kafkatest.Cleaner: %v", err)
		return
	}
	before := map[cleanedPartition]map[int64]batchSpan{}
	controls := map[cleanedPartition]map[int64][]byte{}
	for topic, m := range topics {
		for p := range m.leaders {
			tp := cleanedPartition{m.id, p}
			if before[tp], controls[tp], err = k.batches(ctx, asClient, topic, m, p); err != nil {
				t.Fatalf("kafkatest.Cleaner: %v", err)
				return
			}
		}
	}
	names := slices.Sorted(maps.Keys(topics))
	startsBefore, err := kadm.NewClient(k.c.internal).ListStartOffsets(ctx, names...)
	if err != nil {
		t.Fatalf("kafkatest.Cleaner: %v", err)
		return
	}
	k.mu.Lock()
	k.cleaning = make(chan struct{})
	k.cleans++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		close(k.cleaning)
		k.cleaning = nil
		k.mu.Unlock()
	}()
	startsAfter, err := k.compact(ctx, topics, startsBefore)
	if err != nil {
		t.Fatalf("kafkatest.Cleaner: %v", err)
		return
	}
	for topic, m := range topics {
		for p := range m.leaders {
			after, _, err := k.batches(ctx, asCleaner, topic, m, p)
			if err != nil {
				t.Fatalf("kafkatest.Cleaner: %v", err)
				return
			}
			tp := cleanedPartition{m.id, p}
			start, kfakeStart := startsAfter[tp], startsAfter[tp]
			if s, ok := startsBefore.Lookup(topic, p); ok {
				start = s.Offset                    // Apache Kafka's, before: what it keeps lies at or above it
				kfakeStart = max(kfakeStart, start) // restored above
			}
			k.mu.Lock()
			k.ids[topic] = m.id
			for base, raw := range controls[tp] {
				if _, ok := after[base]; !ok && base >= start {
					if k.markers[tp] == nil {
						k.markers[tp] = map[int64][]byte{}
					}
					k.markers[tp][base] = raw
				}
			}
			// Apache Kafka's log start is the first batch it keeps: a marker kfake dropped
			// below its own log start, if any.
			at := kfakeStart
			for base := range k.markers[tp] {
				if base >= start {
					at = min(at, base)
				}
			}
			if at < kfakeStart {
				k.starts[tp] = keptStart{at: at, kfake: kfakeStart}
			} else {
				delete(k.starts, tp)
			}
			for base, a := range after {
				if b, ok := before[tp][base]; ok && a.records != b.records {
					if k.kept[tp] == nil {
						k.kept[tp] = map[int64]keptBatch{}
					}
					k.kept[tp][base] = keptBatch{last: b.last, codec: b.codec}
				}
			}
			k.mu.Unlock()
		}
	}
}

// compact runs kfake's compaction and moves the log starts it moved back below Apache
// Kafka's forward again, inside a control of a request of the Cleaner's own (compactReplica):
// controls run one at a time and kfake answers a request its control let through before it
// takes the next, so no reader's request is between its control reading the Cleaner's state
// and kfake's answer meanwhile. kfake's Compact called from outside may run right there: a
// mirror's DeleteRecords on its destination could be refused below the log start kfake had
// just moved (the likeliest cause of TestMirrorRandomized/seed-490217699 failing in CI once).
// It returns kfake's log starts after compaction.
func (k *Cleaner) compact(ctx context.Context, topics map[string]topicMeta, startsBefore kadm.ListedOffsets) (map[cleanedPartition]int64, error) {
	startsAfter := map[cleanedPartition]int64{}
	node := int32(-1)
	for _, m := range topics {
		for _, leader := range m.leaders {
			node = leader
		}
	}
	if node < 0 { // no compacted topic: no log start for the Cleaner to keep
		k.c.fake.Compact()
		return startsAfter, nil
	}
	var jobErr error
	k.mu.Lock()
	k.compaction = func() {
		// kfake moves a partition's log start to the base of the first batch it keeps,
		// which lies below the log start when DeleteRecords had moved it into that batch;
		// Apache Kafka's log start never moves back.
		k.c.fake.Compact()
		for topic, m := range topics {
			for p := range m.leaders {
				info := k.c.fake.PartitionInfo(topic, p)
				if info == nil {
					jobErr = fmt.Errorf("%s/%d is gone", topic, p)
					return
				}
				tp := cleanedPartition{m.id, p}
				startsAfter[tp] = info.LogStartOffset
				if b, ok := startsBefore.Lookup(topic, p); ok && info.LogStartOffset < b.Offset {
					if err := k.c.fake.DeleteRecords(topic, p, b.Offset); err != nil {
						jobErr = fmt.Errorf("restoring the log start of %s/%d: %w", topic, p, err)
						return
					}
					k.mu.Lock()
					delete(k.starts, tp) // kfake's log start moves to Apache Kafka's
					k.mu.Unlock()
				}
			}
		}
	}
	k.mu.Unlock()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = compactReplica
	if _, err := k.ownRequest(node, req); err != nil {
		return nil, fmt.Errorf("compacting: %w", err)
	}
	return startsAfter, jobErr
}

func (k *Cleaner) compactedTopics(ctx context.Context) (map[string]topicMeta, error) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, k.c.internal)
	if err != nil {
		return nil, err
	}
	out := map[string]topicMeta{}
	for _, t := range resp.Topics {
		if t.Topic == nil || !isCompacted(k.c.fake.TopicInfo(*t.Topic)) {
			continue
		}
		if out[*t.Topic], err = describeTopic(ctx, k.c.internal, *t.Topic); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// batches reads a partition's batches by base offset, and its control batches as stored:
// through the Cleaner like any client, or kfake's own.
func (k *Cleaner) batches(ctx context.Context, as reader, topic string, m topicMeta, partition int32) (map[int64]batchSpan, map[int64][]byte, error) {
	l, err := as.readPartition(ctx, k.c.internal, topic, m, partition)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s/%d: %w", topic, partition, err)
	}
	out := make(map[int64]batchSpan, len(l.batches))
	for _, b := range l.batches {
		out[b.base] = b
	}
	return out, l.controls, nil
}

// fetch answers a Fetch with kfake's answer, rebuilt batches restored.
func (k *Cleaner) fetch(req *kmsg.FetchRequest) (kmsg.Response, error, bool) {
	if req.Version < 11 {
		return nil, nil, false
	}
	// restore needs every partition's fetch offset, which an incremental fetch omits.
	if resp := withoutSession(req); resp != nil {
		return resp, nil, true
	}
	node := k.c.fake.CurrentNode()
	var resp *kmsg.FetchResponse
	err := k.consistent(func() (err error) {
		resp, err = asleep(k.c.fake, "fetch", func() (*kmsg.FetchResponse, error) { return k.refetch(node, req) })
		return err
	}, func() { k.restore(req, resp) })
	if err != nil {
		return nil, fmt.Errorf("kafkatest.Cleaner: %w", err), true // the client reconnects and asks again
	}
	return resp, nil, true
}

// consistent runs read (kfake's log) and then, under the Cleaner's lock, apply (its kept
// state), with no Clean begun or under way from the one to the other; else it reads again.
// It is run by a control, whose request sleeps while a Clean is under way.
func (k *Cleaner) consistent(read func() error, apply func()) error {
	for {
		k.awaitClean()
		k.mu.Lock()
		began, busy := k.cleans, k.cleaning != nil
		k.mu.Unlock()
		if busy {
			continue
		}
		if err := read(); err != nil {
			return err
		}
		k.mu.Lock()
		settled := k.cleans == began && k.cleaning == nil
		if settled {
			apply()
		}
		k.mu.Unlock()
		if settled {
			return nil
		}
	}
}

// asleep returns what ask answers, asked while the control's request sleeps: a control must
// not block kfake's loop, which answers the Cleaner's own request.
func asleep[R comparable](fake *kfake.Cluster, what string, ask func() (R, error)) (R, error) {
	var r, none R
	var err error
	fake.SleepControl(func() { r, err = ask() })
	if err == nil && r == none {
		err = fmt.Errorf("the cluster closed before the Cleaner's %s was answered", what)
	}
	return r, err
}

func (k *Cleaner) refetch(node int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	cl, err := k.client(req.Version)
	if err != nil {
		return nil, err
	}
	defer k.release(req.Version, cl)
	own := *req
	own.Rack = cleanerRack
	// kfake answers a fetch below its log start OFFSET_OUT_OF_RANGE: one from a log start
	// kept below it reads from kfake's, and restore puts the markers before it back.
	own.Topics = slices.Clone(req.Topics)
	k.mu.Lock()
	for i := range own.Topics {
		rt := &own.Topics[i]
		id := k.topicID(req.Version, rt.TopicID, rt.Topic)
		rt.Partitions = slices.Clone(rt.Partitions)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if ks, ok := k.starts[cleanedPartition{id, rp.Partition}]; ok && rp.FetchOffset >= ks.at && rp.FetchOffset < ks.kfake {
				rp.FetchOffset = ks.kfake
			}
		}
	}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+time.Duration(req.MaxWaitMillis)*time.Millisecond)
	defer cancel()
	kresp, err := cl.Broker(int(node)).Request(ctx, &own)
	if err != nil {
		return nil, err
	}
	return kresp.(*kmsg.FetchResponse), nil
}

// client returns an idle client of the Cleaner's for Fetch version v: the answer must have
// the request's shape, and kgo sends the highest version it may. Each fetch has a client of
// its own while it waits: a broker answers one fetch a connection at a time, so a long poll
// would hold up every other one.
func (k *Cleaner) client(v int16) (*kgo.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if idle := k.clients[v]; len(idle) > 0 {
		k.clients[v] = idle[:len(idle)-1]
		return idle[len(idle)-1], nil
	}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Fetch), v)
	cl, err := kgo.NewClient(append(k.c.ClientOpts(), kgo.MaxVersions(versions))...)
	if err != nil {
		return nil, err
	}
	k.all = append(k.all, cl)
	return cl, nil
}

// release makes a client of client's idle again.
func (k *Cleaner) release(v int16, cl *kgo.Client) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.clients[v] = append(k.clients[v], cl)
}

// restore gives a fetch answer the log starts the Cleaner keeps, every batch kfake rebuilt
// the last offset and codec Apache Kafka keeps, and puts back the markers kfake dropped. The
// caller holds k.mu.
func (k *Cleaner) restore(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) {
	fetchOffsets := map[cleanedPartition]int64{}
	for _, rt := range req.Topics {
		id := k.topicID(req.Version, rt.TopicID, rt.Topic)
		for _, rp := range rt.Partitions {
			fetchOffsets[cleanedPartition{id, rp.Partition}] = rp.FetchOffset
		}
	}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		id := k.topicID(req.Version, rt.TopicID, rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			tp := cleanedPartition{id, rp.Partition}
			rp.LogStartOffset = k.keptStart(tp, rp.LogStartOffset)
			if kept := k.kept[tp]; kept != nil {
				rp.RecordBatches = restoreBatches(rp.RecordBatches, kept)
			}
			if markers := k.markers[tp]; markers != nil && rp.ErrorCode == 0 {
				rp.RecordBatches = restoreMarkers(rp.RecordBatches, markers, max(fetchOffsets[tp], rp.LogStartOffset), rp.HighWatermark)
			}
		}
	}
}

// logStart is the log start of a partition of topic id (kfake's, kfakeStart) that readers
// see: the one the Cleaner keeps below kfake's, if any.
func (k *Cleaner) logStart(id [16]byte, partition int32, kfakeStart int64) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keptStart(cleanedPartition{id, partition}, kfakeStart)
}

// keptStart is logStart; the caller holds k.mu.
func (k *Cleaner) keptStart(tp cleanedPartition, kfakeStart int64) int64 {
	if ks, ok := k.starts[tp]; ok && ks.at < kfakeStart {
		return ks.at
	}
	return kfakeStart
}

// topicID is the id of a topic a request names by id (Fetch v13+) or by name.
func (k *Cleaner) topicID(version int16, id [16]byte, name string) [16]byte {
	if version < 13 {
		return k.ids[name]
	}
	return id
}

// listOffsets answers a request for earliest offsets only with the log starts kept below
// kfake's; every other ListOffsets, and the Cleaner's own (the debugging replica id, which
// kfake answers on any broker), go to kfake. The Cleaner's compaction request runs its
// compaction here.
func (k *Cleaner) listOffsets(kreq kmsg.Request) (kmsg.Response, error, bool) {
	k.c.fake.KeepControl()
	req := kreq.(*kmsg.ListOffsetsRequest)
	switch req.ReplicaID {
	case compactReplica:
		k.mu.Lock()
		compaction := k.compaction
		k.compaction = nil
		k.mu.Unlock()
		if compaction != nil {
			compaction()
		}
		return req.ResponseKind(), nil, true
	case debugReplica:
		return nil, nil, false
	}
	k.awaitClean()
	kept := false
	k.mu.Lock()
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if rp.Timestamp != earliestOffset {
				k.mu.Unlock()
				return nil, nil, false
			}
			_, ok := k.starts[cleanedPartition{k.ids[rt.Topic], rp.Partition}]
			kept = kept || ok
		}
	}
	k.mu.Unlock()
	if !kept {
		return nil, nil, false // answered by kfake before any compaction can run (compact)
	}
	node := k.c.fake.CurrentNode()
	var resp *kmsg.ListOffsetsResponse
	err := k.consistent(func() (err error) {
		resp, err = asleep(k.c.fake, "ListOffsets", func() (*kmsg.ListOffsetsResponse, error) { return k.listOwn(node, req) })
		return err
	}, func() {
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				if ks, ok := k.starts[cleanedPartition{k.ids[rt.Topic], rp.Partition}]; ok && rp.ErrorCode == 0 && ks.at < rp.Offset {
					rp.Offset = ks.at
				}
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("kafkatest.Cleaner: %w", err), true
	}
	return resp, nil, true
}

// ListOffsets: the earliest offset, and the replica id kfake answers as a debugging tool.
const (
	earliestOffset = -2
	debugReplica   = -2
	compactReplica = -3 // no client sends it: the Cleaner's compaction request
)

// listOwn sends req as the debugging replica, which kfake answers on any broker: a broker
// that does not lead a partition answers NOT_LEADER_OR_FOLLOWER for it, as it would have.
func (k *Cleaner) listOwn(node int32, req *kmsg.ListOffsetsRequest) (*kmsg.ListOffsetsResponse, error) {
	own := *req
	own.ReplicaID = debugReplica
	kresp, err := k.ownRequest(node, &own)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			if rp := &rt.Partitions[j]; rp.ErrorCode == 0 && k.c.fake.LeaderFor(rt.Topic, rp.Partition) != node {
				rp.ErrorCode, rp.Offset, rp.Timestamp = kerr.NotLeaderForPartition.Code, -1, -1
			}
		}
	}
	return resp, nil
}

// ownRequest sends req to node on a client no reader shares: the request it answers sleeps
// on its own connection meanwhile.
func (k *Cleaner) ownRequest(node int32, req kmsg.Request) (kmsg.Response, error) {
	k.mu.Lock()
	cl := k.own
	if cl == nil {
		var err error
		if cl, err = kgo.NewClient(k.c.ClientOpts()...); err != nil {
			k.mu.Unlock()
			return nil, err
		}
		k.own = cl
	}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Broker(int(node)).Request(ctx, req)
}

// deleteRecords answers a DeleteRecords whose offsets all lie below kfake's log start as
// Apache Kafka does: one below the log start leaves it and succeeds, with the log start as the
// low watermark (Partition.deleteRecordsOnLeader only moves it forward;
// TestKafkaDeleteRecordsBelowTheLogStart), where kfake refuses it OFFSET_OUT_OF_RANGE; one
// below kfake's log start moves a log start kept below it. A request with any other offset
// ends the kept log start at or below it and goes to kfake whole (every caller here asks for
// one partition at a time).
func (k *Cleaner) deleteRecords(kreq kmsg.Request) (kmsg.Response, error, bool) {
	k.c.fake.KeepControl()
	req := kreq.(*kmsg.DeleteRecordsRequest)
	k.awaitClean()
	node := k.c.fake.CurrentNode()
	infos := map[topicPartition]*kfake.PartitionInfo{} // kfake's, of the partitions led here
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if info := k.c.fake.PartitionInfo(rt.Topic, rp.Partition); info != nil && info.Leader == node {
				infos[topicPartition{rt.Topic, rp.Partition}] = info
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	below := true // every offset of the request lies below kfake's log start
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			tp := cleanedPartition{k.ids[rt.Topic], rp.Partition}
			ks, kept := k.starts[tp]
			info := infos[topicPartition{rt.Topic, rp.Partition}]
			switch {
			case info == nil || rp.Offset < 0 || rp.Offset >= info.LogStartOffset: // -1: the high watermark
				if kept && info != nil && (rp.Offset < 0 || rp.Offset <= info.HighWatermark) {
					delete(k.starts, tp) // kfake moves its log start, past the kept one
				}
				below = false
			case kept:
				ks.at = max(ks.at, rp.Offset)
				k.starts[tp] = ks
				sp.LowWatermark = ks.at
			default:
				sp.LowWatermark = info.LogStartOffset
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !below {
		return nil, nil, false
	}
	return resp, nil, true
}

type topicPartition struct {
	topic     string
	partition int32
}

// restoreMarkers puts the markers from offset from on back among the batches of a fetch
// answer: between the batches it holds, or all of those below the high watermark when it
// holds none. A marker past its last batch waits for the fetch that reaches it, so that the
// offsets in between are not taken for gaps.
func restoreMarkers(raw []byte, markers map[int64][]byte, from, hw int64) []byte {
	batches := splitBatches(raw)
	rest := raw
	for _, b := range batches {
		rest = rest[len(b):]
	}
	until := hw
	if len(batches) > 0 {
		last := batches[len(batches)-1]
		until = int64(binary.BigEndian.Uint64(last)) + int64(int32(binary.BigEndian.Uint32(last[23:]))) + 1
	}
	var add [][]byte
	for _, at := range slices.Sorted(maps.Keys(markers)) {
		if at >= from && at < until {
			add = append(add, markers[at])
		}
	}
	if len(add) == 0 {
		return raw
	}
	merged := slices.SortedFunc(slices.Values(append(batches, add...)), func(a, b []byte) int {
		return cmp.Compare(int64(binary.BigEndian.Uint64(a)), int64(binary.BigEndian.Uint64(b)))
	})
	return append(slices.Concat(merged...), rest...) // a partial batch at the end stays last
}

func restoreBatches(raw []byte, kept map[int64]keptBatch) []byte {
	var out []byte
	for _, b := range splitBatches(raw) {
		raw = raw[len(b):]
		if kb, ok := kept[int64(binary.BigEndian.Uint64(b))]; ok {
			b = restoreBatch(b, kb)
		}
		out = append(out, b...)
	}
	return append(out, raw...) // a partial batch at the end stays as it was
}

// restoreBatch rewrites a batch kfake rebuilt with Apache Kafka's last offset and codec.
func restoreBatch(raw []byte, kb keptBatch) []byte {
	var b kmsg.RecordBatch
	if b.ReadFrom(raw) != nil {
		return raw
	}
	codec := b.Attributes & attrCodec
	if b.FirstOffset+int64(b.LastOffsetDelta) == kb.last && codec == kb.codec {
		return raw
	}
	records := b.Records
	if codec != 0 {
		var err error
		if records, err = decompressor.Decompress(records, kgo.CompressionCodecType(codec)); err != nil {
			return raw
		}
	}
	// recordbatch's compressors live as long as the process: a compressor made per batch
	// kept its pools of zstd encoders alive (a hunt of 60 seeds grew to 11 GiB).
	codec, records = recordbatch.Compress(kb.codec, records)
	b.Attributes = b.Attributes&^attrCodec | codec
	b.LastOffsetDelta = int32(kb.last - b.FirstOffset)
	b.Records = records
	enc := b.AppendTo(nil)
	binary.BigEndian.PutUint32(enc[8:], uint32(len(enc)-12))
	binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], crc32c))
	return enc
}
