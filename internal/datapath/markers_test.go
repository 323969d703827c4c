package datapath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

// manyHoles is a run of source offsets without a record that takes several WriteTxnMarkers
// requests.
const manyHoles = 30_000

// holesSource writes one batch to partition 0 of topic whose key "b" is overwritten manyHoles
// times between a record "a" and a record "c" (then a last batch: kfake never compacts the
// last one, Apache Kafka never the active segment), and compacts it with compact: one batch
// with a run of manyHoles holes at offsets 1 to manyHoles.
func holesSource(t *testing.T, src *kafkatest.Cluster, topic string, compact func(prod *kgo.Client)) {
	t.Helper()
	prod := src.ManualProducer(t)
	keys := []string{"a"}
	for range manyHoles + 1 {
		keys = append(keys, "b")
	}
	produceRounds(t, newRoundWriter(t, src, 0), topic, 0, append(keys, "c"), []string{"last"})
	compact(prod)
}

// markerRequests counts the WriteTxnMarkers and EndTxn requests a destination client writes.
type markerRequests struct {
	writeTxnMarkers, endTxn *writeCounter
}

func countMarkerRequests() markerRequests {
	return markerRequests{&writeCounter{key: int16(kmsg.WriteTxnMarkers)}, &writeCounter{key: int16(kmsg.EndTxn)}}
}

func (r markerRequests) hooks() kgo.Opt { return kgo.WithHooks(r.writeTxnMarkers, r.endTxn) }

// checkFastPath fails t unless the holes went through WriteTxnMarkers, many per request, and
// no transaction wrote one. A session that starts again (a leader not ready yet on a new
// topic, a request retried) cuts the rest of the run at another request boundary, so the
// bound allows twice the fewest requests: still half full on average, never one per hole.
func (r markerRequests) checkFastPath(t *testing.T, topic string, holes int64) {
	t.Helper()
	per := markersPerRequest(topic)
	if n, most := r.writeTxnMarkers.n.Load(), 2*((holes+per-1)/per); n == 0 || n > most {
		t.Fatalf("%d WriteTxnMarkers requests for %d holes, want 1 to %d", n, holes, most)
	}
	if n := r.endTxn.n.Load(); n != 0 {
		t.Fatalf("%d EndTxn requests: holes were filled with transactions", n)
	}
}

// refuseWriteTxnMarkers makes a kfake destination answer every WriteTxnMarkers with
// CLUSTER_AUTHORIZATION_FAILED, as a broker answers a principal without CLUSTER_ACTION.
func refuseWriteTxnMarkers(dst *kafkatest.Cluster) {
	dst.Fake().ControlKey(int16(kmsg.WriteTxnMarkers), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		dst.Fake().KeepControl()
		return kafkatest.WriteTxnMarkersRefused(kreq.(*kmsg.WriteTxnMarkersRequest), kerr.ClusterAuthorizationFailed), nil, true
	})
}

// killAfterMarkers cancels the returned context once the killAt-th WriteTxnMarkers request
// of the client is on the wire: that request lands, the session ends before the next.
type killAfterMarkers struct {
	killAt int64
	n      writeCounter
	kill   context.CancelFunc
}

func (k *killAfterMarkers) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, bytes int, wait, write time.Duration, err error) {
	k.n.OnBrokerWrite(meta, key, bytes, wait, write, err)
	if k.n.n.Load() == k.killAt {
		k.kill()
	}
}

// holesScenario mirrors a run of manyHoles holes: through WriteTxnMarkers, several requests;
// a worker killed after killAt of them resumes inside the run, in a session that writes
// markers with a new epoch of the same producer id. Both sessions' markers are legal on the
// destination, and the logs are identical.
func holesScenario(t *testing.T, src, dst *kafkatest.Cluster, topic string, killAt int64) {
	counts := countMarkerRequests()
	dc := dst.Client(t, counts.hooks())
	if killAt > 0 {
		ctx, kill := context.WithCancel(context.Background())
		defer kill()
		killer := &killAfterMarkers{killAt: killAt, n: writeCounter{key: int16(kmsg.WriteTxnMarkers)}, kill: kill}
		run := startMirrorClients(ctx, t, src.Client(t), dst.Client(t, kgo.WithHooks(killer)), topic, 1, true)
		run.wg.Wait()
		if err := run.errs[0]; err != nil {
			t.Fatal(err)
		}
		_, end, err := kafkareq.NewCluster("destination", dc).Offsets(context.Background(), topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 + killAt*markersPerRequest(topic); end != want {
			t.Fatalf("killed with the destination ending at %d, want %d: inside the run of holes after %d requests", end, want, killAt)
		}
	}
	run := startMirrorClients(context.Background(), t, src.Client(t), dc, topic, 1, killAt == 0)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
	counts.checkFastPath(t, topic, manyHoles)
}

func TestMirrorTensOfThousandsOfHoles(t *testing.T) {
	for _, killAt := range []int64{0, 2} {
		t.Run(fmt.Sprint("killed after request ", killAt), func(t *testing.T) {
			src, dst := kafkatest.Pair(t)
			createBoth(t, src, dst, "holes", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
			holesSource(t, src, "holes", func(*kgo.Client) { src.Fake().Compact() })
			holesScenario(t, src, dst, "holes", killAt)
		})
	}
}

func TestKafkaMirrorTensOfThousandsOfHoles(t *testing.T) {
	onKafka(t, func(t *testing.T, src, dst *kafkatest.Cluster) {
		for _, killAt := range []int64{0, 2} {
			t.Run(fmt.Sprint("killed after request ", killAt), func(t *testing.T) {
				topic := kafkatest.TopicFor(t, "")
				src.CreateTopic(t, topic, 1, cleanedSoon)
				holesSource(t, src, topic, func(prod *kgo.Client) {
					waitCleaned(t, src, prod, topic, 1)
					stopCleaning(t, src, topic, 1)
				})
				// Compacted, but never cleaned while the test compares.
				dst.CreateTopic(t, topic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
				holesScenario(t, src, dst, topic, killAt)
			})
		}
	})
}

// A destination principal without CLUSTER_ACTION: WriteTxnMarkers is refused once, and the
// gap writers fill the holes, identical and without a marker lost or doubled.
func TestMirrorHolesWithoutClusterAction(t *testing.T) {
	src, dst := kafkatest.Pair(t, kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("mirror", "mirror-secret"))
	createBoth(t, src, dst, "holes", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	noClusterActionScenario(t, src, dst, "holes", func(*kgo.Client) { src.Fake().Compact() })
}

func TestKafkaMirrorHolesWithoutClusterAction(t *testing.T) {
	kafkatest.RequireKafka(t)
	versions := kafkatest.KafkaVersions()
	for _, v := range versions {
		t.Run("kafka-"+versions[0]+"-to-"+v, func(t *testing.T) {
			src := kafkatest.Shared(t, "source-"+versions[0], kafkatest.Kafka(versions[0]))
			dst := kafkatest.New(t, kafkatest.Kafka(v), kafkatest.WithACLs("admin", "admin-secret"), kafkatest.User("mirror", "mirror-secret"))
			kafkatest.Tally(t, src.Broker()+" → "+dst.Broker()+" (SASL, ACLs)")
			topic := kafkatest.TopicFor(t, "")
			src.CreateTopic(t, topic, 1, cleanedSoon)
			dst.CreateTopic(t, topic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
			noClusterActionScenario(t, src, dst, topic, func(prod *kgo.Client) {
				waitCleaned(t, src, prod, topic, 1)
				stopCleaning(t, src, topic, 1)
			})
		})
	}
}

// noClusterActionScenario mirrors 20 holes to a destination where the mirror's principal
// has every right it needs but CLUSTER_ACTION (and ALTER, which Kafka 3.8+ also accepts for
// WriteTxnMarkers) on the cluster.
func noClusterActionScenario(t *testing.T, src, dst *kafkatest.Cluster, topic string, compact func(prod *kgo.Client)) {
	dst.CreateACLs(t,
		kadm.NewACLs().Allow("User:mirror").AllowHosts().Topics("*").TransactionalIDs("*").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:mirror").AllowHosts().Clusters().Operations(kadm.OpIdempotentWrite, kadm.OpDescribe, kadm.OpDescribeConfigs).ResourcePatternType(kadm.ACLPatternLiteral))
	prod := src.ManualProducer(t)
	produceRounds(t, newRoundWriter(t, src, 0), topic, 0, append([]string{"a"}, append(keyRange("b", 0, 20), keyRange("b", 0, 20)...)...), []string{"last"})
	compact(prod)

	counts := countMarkerRequests()
	cl, err := kgo.NewClient(append(dst.ClientOptsAs("mirror", "mirror-secret"), counts.hooks())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	run := startMirrorClients(context.Background(), t, src.Client(t), cl, topic, 1, true)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
	if n := counts.writeTxnMarkers.n.Load(); n != 1 {
		t.Fatalf("%d WriteTxnMarkers requests, want the one refused", n)
	}
	if n := counts.endTxn.n.Load(); n < 20 {
		t.Fatalf("%d EndTxn requests for 20 holes: the gap writers did not fill them", n)
	}

	// What the broker answers: CLUSTER_AUTHORIZATION_FAILED, and nothing appended.
	ctx, d := context.Background(), kafkareq.NewCluster("destination", cl)
	meta, err := d.Metadata(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, before, err := d.Offsets(ctx, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := kafkareq.MarkerRun{Topic: topic, Producer: recordbatch.Producer{ID: 1}, N: 3}
	if err := d.WriteMarkers(ctx, meta.Leader, []kafkareq.MarkerRun{refused})[0]; !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("WriteTxnMarkers without CLUSTER_ACTION answered %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	if _, after, err := d.Offsets(ctx, topic, 0); err != nil || after != before {
		t.Fatalf("destination end %d after a refused WriteTxnMarkers, was %d (%v)", after, before, err)
	}
}

// markerLog records the partitions ("topic/partition") of each WriteTxnMarkers request a
// kfake cluster receives. With hold set, the first request is held until hold() is true
// (polled, for at most 30 s): the worker's next marker requests wait behind it.
type markerLog struct{ requestLog[[]string] }

func watchMarkers(c *kafkatest.Cluster, hold func() bool) *markerLog {
	l := &markerLog{}
	c.Fake().ControlKey(int16(kmsg.WriteTxnMarkers), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		var parts []string
		for _, m := range kreq.(*kmsg.WriteTxnMarkersRequest).Markers {
			for _, mt := range m.Topics {
				for _, p := range mt.Partitions {
					parts = append(parts, fmt.Sprintf("%s/%d", mt.Topic, p))
				}
			}
		}
		slices.Sort(parts)
		l.add(c, slices.Compact(parts), hold)
		return nil, nil, false
	})
	return l
}

// queuedMarkerRuns counts the marker runs waiting to join a request in the marker writers
// of cl.
func queuedMarkerRuns(cl *kgo.Client) int {
	n := 0
	markerWriters.each(func(k brokerKey) bool { return k.cl == cl }, func(mw *markerWriter) {
		mw.queue.each(func(*markerItem) { n++ })
	})
	return n
}

// holesInEveryPartition writes, to each partition of topic, a record, 20 keys written twice
// and a last batch, and compacts it: every partition has a run of 20 holes after offset 0.
func holesInEveryPartition(t *testing.T, src *kafkatest.Cluster, topic string, partitions int32, compact func(prod *kgo.Client)) {
	t.Helper()
	prod, w := src.ManualProducer(t), newRoundWriter(t, src, 0)
	for p := range partitions {
		produceRounds(t, w, topic, p, append([]string{"a"}, append(keyRange("b", 0, 20), keyRange("b", 0, 20)...)...), []string{"last"})
	}
	compact(prod)
}

// markerProducers gives each partition of topic the producer id of a transactional id of its
// own, as a session's markers have.
func markerProducers(t *testing.T, d kafkareq.Cluster, topic string, partitions int32) []recordbatch.Producer {
	t.Helper()
	out := make([]recordbatch.Producer, partitions)
	for p := range partitions {
		id := fmt.Sprintf("%s.markers", PartitionTxnPrefix("m1", topic, p))
		pr, err := d.InitProducerID(context.Background(), &id, 60_000)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = pr
	}
	return out
}

// The lone markers of the partitions one destination broker leads share WriteTxnMarkers
// requests (issue #16): the runs handed over while a request is answered go together in the
// next one, each partition's markers land at its end, and the partitions' answers are
// their own.
func TestMarkerWriterSharesRequestsAcrossPartitions(t *testing.T) {
	const partitions = 4
	c := kafkatest.New(t)
	c.CreateTopic(t, "holes", partitions, nil)
	dc := c.Client(t)
	d := kafkareq.NewCluster("destination", dc)
	meta, err := d.Metadata(context.Background(), "holes", 0)
	if err != nil {
		t.Fatal(err)
	}
	producers := markerProducers(t, d, "holes", partitions)
	wire := watchMarkers(c, func() bool { return queuedMarkerRuns(dc) == partitions-1 })
	mw := acquireMarkerWriter(d, meta.Leader)
	t.Cleanup(mw.release)
	errs := make([]error, partitions)
	var wg sync.WaitGroup
	for p := range int32(partitions) {
		if p == 1 {
			// The first run's request is on its way (and held) before the others are handed over.
			kafkatest.WaitUntil(t, 30*time.Second, "the first WriteTxnMarkers request", func() bool { return len(wire.requests()) == 1 })
		}
		wg.Go(func() {
			errs[p] = mw.write(context.Background(), kafkareq.MarkerRun{Topic: "holes", Partition: p, Producer: producers[p], N: int(p) + 1})
		})
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
		if _, end, err := d.Offsets(context.Background(), "holes", int32(p)); err != nil || end != int64(p)+1 {
			t.Fatalf("partition %d ends at %d after %d markers (%v)", p, end, p+1, err)
		}
	}
	if reqs := wire.requests(); len(reqs) != 2 || !slices.Equal(reqs[0], []string{"holes/0"}) || len(reqs[1]) != partitions-1 {
		t.Fatalf("WriteTxnMarkers requests carried %v, want partition 0's markers and then the %d others' in one request", reqs, partitions-1)
	}
}

// Apache Kafka answers each partition of a WriteTxnMarkers request on its own: a marker the
// partition refuses (an epoch below its producer's) fails its run alone, and the other
// partition's markers in the request land.
func TestKafkaMarkerRequestAnswersEachPartition(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, _, dst *kafkatest.Cluster, topic string) {
		dst.CreateTopic(t, topic, 2, nil)
		ctx, d := context.Background(), kafkareq.NewCluster("destination", dst.Client(t))
		meta, err := d.Metadata(ctx, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		old := markerProducers(t, d, topic, 2)
		bumped := markerProducers(t, d, topic, 1)[0] // partition 0's id again: a higher epoch
		if err := d.WriteMarkers(ctx, meta.Leader, []kafkareq.MarkerRun{{Topic: topic, Partition: 0, Producer: bumped, N: 1}})[0]; err != nil {
			t.Fatal(err)
		}
		errs := d.WriteMarkers(ctx, meta.Leader, []kafkareq.MarkerRun{
			{Topic: topic, Partition: 0, Producer: old[0], N: 2},
			{Topic: topic, Partition: 1, Producer: old[1], N: 3},
		})
		if !errors.Is(errs[0], kerr.InvalidProducerEpoch) || errs[1] != nil {
			t.Fatalf("answers %v, want INVALID_PRODUCER_EPOCH for partition 0 and none for partition 1", errs)
		}
		for p, want := range []int64{1, 3} {
			if _, end, err := d.Offsets(ctx, topic, int32(p)); err != nil || end != want {
				t.Fatalf("partition %d ends at %d, want %d (%v)", p, end, want, err)
			}
		}
	})
}

// On Apache Kafka, one request carries several partitions' markers (each its own producer
// id) when they wait together; whatever the grouping, every partition's holes are filled at
// their offsets.
func TestKafkaMirrorHolesInManyPartitions(t *testing.T) {
	const partitions = 4
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, partitions, cleanedSoon)
		holesInEveryPartition(t, src, topic, partitions, func(prod *kgo.Client) {
			waitCleaned(t, src, prod, topic, partitions)
			stopCleaning(t, src, topic, partitions)
		})
		dst.CreateTopic(t, topic, partitions, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
		counts := countMarkerRequests()
		run := startMirrorClients(context.Background(), t, src.Client(t), dst.Client(t, counts.hooks()), topic, partitions, true)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		run.stop(t)
		if n := counts.writeTxnMarkers.n.Load(); n == 0 || n > partitions {
			t.Fatalf("%d WriteTxnMarkers requests for %d partitions with one run of holes each, want 1 to %d", n, partitions, partitions)
		}
		if n := counts.endTxn.n.Load(); n != 0 {
			t.Fatalf("%d EndTxn requests: holes were filled with transactions", n)
		}
	})
}
