package datapath

// The data path's scenarios on real Apache Kafka brokers: the newest version as the source,
// every version of the real-broker tier as the destination (kafkatest.KafkaVersions). The
// clusters are shared by the tests of this package; every scenario uses topics of its own.

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/recordbatch"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// onKafka runs scenario from the newest real Kafka to each Kafka version of the tier.
func onKafka(t *testing.T, scenario func(t *testing.T, src, dst *kafkatest.Cluster)) {
	t.Helper()
	onKafkaFrom(t, "source", nil, scenario)
}

// onKafkaTopic is onKafka for a scenario on a topic of its own, named after the test.
func onKafkaTopic(t *testing.T, scenario func(t *testing.T, src, dst *kafkatest.Cluster, topic string)) {
	t.Helper()
	onKafka(t, func(t *testing.T, src, dst *kafkatest.Cluster) { scenario(t, src, dst, kafkatest.TopicFor(t, "")) })
}

// onKafkaFrom is onKafka with a source of the newest version started with opts and shared
// under name, for scenarios that need a source of their own kind (3 brokers, a quota).
func onKafkaFrom(t *testing.T, name string, opts []kafkatest.Option, scenario func(t *testing.T, src, dst *kafkatest.Cluster)) {
	t.Helper()
	onKafkaClusters(t, kafkaClusters{source: name, sourceOpts: opts, destination: "destination"}, scenario)
}

// kafkaClusters name the shared clusters of a scenario, and the options they start with.
type kafkaClusters struct {
	source, destination         string
	sourceOpts, destinationOpts []kafkatest.Option
}

// onKafkaClusters is onKafka on the shared clusters cs names.
func onKafkaClusters(t *testing.T, cs kafkaClusters, scenario func(t *testing.T, src, dst *kafkatest.Cluster)) {
	t.Helper()
	kafkatest.RequireKafka(t)
	versions := kafkatest.KafkaVersions()
	for _, v := range versions {
		t.Run("kafka-"+versions[0]+"-to-"+v, func(t *testing.T) {
			src := kafkatest.Shared(t, cs.source+"-"+versions[0], append([]kafkatest.Option{kafkatest.Kafka(versions[0])}, cs.sourceOpts...)...)
			dst := kafkatest.Shared(t, cs.destination+"-"+v, append([]kafkatest.Option{kafkatest.Kafka(v)}, cs.destinationOpts...)...)
			kafkatest.Tally(t, clusterLabel(src)+" → "+clusterLabel(dst))
			scenario(t, src, dst)
		})
	}
}

// clusterLabel names a cluster's Kafka version and how many brokers it has, if more than one.
func clusterLabel(c *kafkatest.Cluster) string {
	if n := len(c.BrokerIDs()); n > 1 {
		return fmt.Sprintf("%s (%d brokers)", c.Broker(), n)
	}
	return c.Broker()
}

// createBoth creates topic on both clusters with the same configs.
func createBoth(t *testing.T, src, dst *kafkatest.Cluster, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	src.CreateTopic(t, topic, partitions, configs)
	dst.CreateTopic(t, topic, partitions, configs)
}

func TestKafkaMirrorPlainAndEveryCodec(t *testing.T) {
	onKafka(t, func(t *testing.T, src, dst *kafkatest.Cluster) {
		codecs := map[string]kgo.CompressionCodec{
			"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
			"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
		}
		for name, codec := range codecs {
			topic := kafkatest.TopicFor(t, name)
			createBoth(t, src, dst, topic, 2, nil)
			prod := src.ManualProducer(t, kgo.ProducerBatchCompression(codec))
			for i := range 4 {
				kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, int32(i%2), 150, fmt.Sprint(name, i))...)
			}
			// And a batch of 40 KiB that no codec shrinks: Rewrite updates the CRC of a large
			// batch from the header bytes it changes, and the broker checks it.
			large := kafkatest.Records(topic, 0, 40, name+"-large")
			for _, r := range large {
				r.Value = make([]byte, 1<<10)
				crand.Read(r.Value)
			}
			kafkatest.ProduceSync(t, prod, large...)
			run := startMirror(t, src, dst, topic, 2, true)
			kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 1, 80, name+"-later")...)
			kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
			run.stop(t)

			// Forwarded, not recompressed: the payload bytes are the source's.
			s, d := rawBatches(t, src, topic, 0), rawBatches(t, dst, topic, 0)
			if len(s) != len(d) {
				t.Fatalf("%s: %d source batches, %d destination batches", name, len(s), len(d))
			}
			largest := 0
			for i := range s {
				if !bytes.Equal(s[i][recordbatch.HeaderLen:], d[i][recordbatch.HeaderLen:]) || s[i].Codec() != d[i].Codec() {
					t.Fatalf("%s: batch %d at offset %d differs in codec or payload bytes", name, i, s[i].BaseOffset())
				}
				largest = max(largest, len(s[i]))
			}
			if largest < 32<<10 {
				t.Fatalf("%s: the largest source batch has %d bytes, want one of about 40 KiB", name, largest)
			}
		}
	})
}

func TestKafkaMirrorInterleavedTransactions(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		createBoth(t, src, dst, topic, 1, nil)
		interleavedTransactions(t, src, dst, topic)
	})
}

// interleavedTransactions writes plain data and three producers' transactions interleaved
// (committed, aborted, one left open while the mirror starts, back-to-back ones) into topic's
// partition 0 and mirrors it: the destination must be identical.
func interleavedTransactions(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
	plain := src.ManualProducer(t)
	var txn [3]*kgo.Client
	for i := range txn {
		txn[i] = src.ManualProducer(t, kgo.TransactionalID(topic+fmt.Sprint(".app-", i)))
	}
	ctx := context.Background()
	begin := func(i int) {
		if err := txn[i].BeginTransaction(); err != nil {
			t.Fatal(err)
		}
	}
	end := func(i int, commit kgo.TransactionEndTry) {
		if err := txn[i].EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	write := func(i int, tag string) { kafkatest.ProduceSync(t, txn[i], kafkatest.Records(topic, 0, 3, tag)...) }

	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 5, "plain1")...)
	begin(0)
	begin(1)
	begin(2)
	write(0, "t0a")
	write(1, "t1a")
	write(2, "t2a")
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 2, "plain2")...)
	write(0, "t0b")
	end(0, kgo.TryCommit)
	write(1, "t1b")
	end(1, kgo.TryAbort)
	write(2, "t2b") // producer 2 stays open while the mirror starts
	// Back to back: a new transaction right after the last one's markers were requested.
	for i := range 4 {
		begin(0)
		write(0, fmt.Sprint("t0-", i))
		end(0, kgo.TransactionEndTry(i%2 == 0))
	}

	run := startMirror(t, src, dst, topic, 1, true)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)

	write(2, "t2c")
	end(2, kgo.TryCommit)
	kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, 0, 3, "plain3")...)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	run.stop(t)
}

// The real log cleaner compacts a topic of gzip batches: holes inside batches (leading,
// inner and trailing), whole batches gone, and the empty batches the cleaner keeps.
func TestKafkaMirrorCompactedByTheLogCleaner(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, 2, cleanedSoon)
		prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.GzipCompression()))
		txn := src.ManualProducer(t, kgo.TransactionalID(topic+".app"), kgo.ProducerBatchCompression(kgo.GzipCompression()))
		// A producer whose only batch is overwritten entirely: the cleaner keeps an empty
		// batch for its producer state (LogCleaner, MemoryRecords.filterTo).
		solo := src.ManualProducer(t)
		kafkatest.ProduceSync(t, solo, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k1"), Value: []byte("solo")},
			&kgo.Record{Topic: topic, Partition: 0, Key: []byte("k2"), Value: []byte("solo")})
		for round := range 6 {
			for p := range int32(2) {
				var recs []*kgo.Record
				for i := range 30 {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("k%d", (i*(round+1)+int(p))%11)), Value: []byte(fmt.Sprintf("r%d-%d", round, i))})
				}
				kafkatest.ProduceSync(t, prod, recs...)
			}
			// An aborted transaction: the cleaner removes its records and, later, its marker.
			if err := txn.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			kafkatest.ProduceSync(t, txn, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("txn"), Value: []byte(fmt.Sprint(round))})
			if err := txn.EndTransaction(context.Background(), kgo.TransactionEndTry(round%2 == 0)); err != nil {
				t.Fatal(err)
			}
		}
		waitCleaned(t, src, prod, topic, 2)
		stopCleaning(t, src, topic, 2)
		empty := 0
		for _, b := range rawBatches(t, src, topic, 0) {
			if b.RecordCount() == 0 {
				empty++
			}
		}
		if empty == 0 {
			t.Fatal("the log cleaner kept no empty batch; the scenario does not test what it should")
		}

		// The destination topic is compacted too, but its cleaner must not run during the
		// test: it would remove markers and records on its own schedule, and two logs
		// cleaned independently are not comparable offset by offset.
		dst.CreateTopic(t, topic, 2, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
		mirrorIdentical(t, src, dst, topic, 2, true)
	})
}

// cleanedSoon are the configs of a real source topic compacted within moments (waitCleaned).
var cleanedSoon = map[string]*string{
	"cleanup.policy":            kadm.StringPtr("compact"),
	"segment.ms":                kadm.StringPtr("100"),
	"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
	"delete.retention.ms":       kadm.StringPtr("100"),
}

// waitCleaned makes the cleaner run over what was written (a record each poll rolls the
// active segment, which is never cleaned) until every partition has a batch with a hole.
func waitCleaned(t *testing.T, c *kafkatest.Cluster, prod *kgo.Client, topic string, partitions int32) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		cleaned := 0
		for p := range partitions {
			batches, err := readBatches(t, c, topic, p)
			if err != nil { // a broker busy cleaning may drop a connection: look again
				t.Logf("reading %s[%d]: %v", topic, p, err)
			}
			for _, b := range batches {
				if !b.Contiguous() {
					cleaned++
					break
				}
			}
		}
		if cleaned == int(partitions) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log cleaner left %d of %d partitions of %s without holes", int(partitions)-cleaned, partitions, topic)
		}
		for p := range partitions {
			kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Partition: p, Key: []byte("roll"), Value: []byte(time.Now().String())})
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// stopCleaning keeps the log cleaner off the topic from now on and waits until a pass that
// may still run has ended: a source cleaned again under the mirror removes records the
// destination already holds.
func stopCleaning(t *testing.T, c *kafkatest.Cluster, topic string, partitions int32) {
	t.Helper()
	ctx := context.Background()
	res, err := c.Admin(t).AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: "segment.ms", Value: kadm.StringPtr("604800000")},
		{Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("0.99")},
	}, topic)
	if err == nil {
		_, err = res.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	layout := func() string {
		var b strings.Builder
		for p := range partitions {
			batches, err := readBatches(t, c, topic, p)
			if err != nil {
				return err.Error()
			}
			for _, rb := range batches {
				fmt.Fprintf(&b, "%d-%d:%d ", rb.BaseOffset(), rb.LastOffset(), rb.RecordCount())
			}
		}
		return b.String()
	}
	// A pass that began before the change ends within moments; the log must then stay as
	// it is for a while.
	last, since := layout(), time.Now()
	kafkatest.WaitUntil(t, 30*time.Second, "the log cleaner of "+topic+" to stop", func() bool {
		if now := layout(); now != last {
			last, since = now, time.Now()
		}
		return time.Since(since) > 3*time.Second
	})
}

// DeleteRecords moves the source log start before and while mirroring, also into the
// middle of a batch; the destination follows.
func TestKafkaMirrorLogStartMoves(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		createBoth(t, src, dst, topic, 1, nil)
		prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 300, "x")...)
		src.DeleteRecords(t, topic, 0, 123) // inside a batch
		run := startMirror(t, src, dst, topic, 1, true)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 50, "y")...)
		src.DeleteRecords(t, topic, 0, 310)
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 10, "z")...)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		run.stop(t)
	})
}

func TestKafkaMirrorStopsOnARepeatedMarker(t *testing.T) {
	onKafkaTopic(t, repeatedMarker)
}

func TestKafkaMirrorLogStartAtTheSourceEnd(t *testing.T) {
	onKafkaTopic(t, logStartAtTheSourceEnd)
}

func TestKafkaMirrorLogStartPastAnEndedTransaction(t *testing.T) {
	onKafkaTopic(t, logStartPastEndedTransaction)
}

// Timestamps an hour old, a year old and 30 minutes ahead arrive unchanged.
func TestKafkaMirrorOldAndFutureTimestamps(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		createBoth(t, src, dst, topic, 1, nil)
		prod := src.ManualProducer(t)
		now := time.Now()
		for _, ts := range []time.Time{now.Add(-365 * 24 * time.Hour), now.Add(-time.Hour), now.Add(30 * time.Minute)} {
			kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Value: []byte(ts.String()), Timestamp: ts})
		}
		mirrorIdentical(t, src, dst, topic, 1, true)
	})
}

// A destination topic whose compression.type differs from the source codec: the broker
// recompresses, the records and offsets are still the source's.
func TestKafkaMirrorDestinationRecompresses(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, 1, nil)
		dst.CreateTopic(t, topic, 1, map[string]*string{"compression.type": kadm.StringPtr("gzip")})
		prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
		for i := range 5 {
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 100, fmt.Sprint("r", i))...)
		}
		mirrorIdentical(t, src, dst, topic, 1, true)
		for _, b := range rawBatches(t, dst, topic, 0) {
			if b.Codec() != 1 {
				t.Fatalf("destination batch at %d has codec %d, want gzip (1): the broker did not recompress", b.BaseOffset(), b.Codec())
			}
		}
	})
}

// A source batch larger than the destination topic's max.message.bytes cannot be copied:
// the partition fails with a message naming the offset and both sizes.
func TestKafkaMirrorBatchLargerThanDestinationAllows(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, 1, nil)
		dst.CreateTopic(t, topic, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("2000")})
		// Uncompressed: kgo's default snappy would shrink the 10 kB batch below the limit.
		prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.NoCompression()))
		kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Value: []byte("small")})
		kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte("x"), 10_000)})
		run := startMirror(t, src, dst, topic, 1, true)
		err := run.waitErr(t, 0)
		if err == nil || !strings.Contains(err.Error(), "offset 1") || !strings.Contains(err.Error(), "max.message.bytes") {
			t.Fatalf("mirror error %v, want a failure naming offset 1 and max.message.bytes", err)
		}
	})
}

// A 3-broker source whose partition leaders move while the mirror copies.
func TestKafkaMirrorFollowsSourceLeaderChange(t *testing.T) {
	onKafkaFrom(t, "source-3-brokers", []kafkatest.Option{kafkatest.Brokers(3)}, func(t *testing.T, src, dst *kafkatest.Cluster) {
		topic := kafkatest.TopicFor(t, "")
		if _, err := src.Admin(t).CreateTopic(context.Background(), 3, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
		src.WaitTopic(t, topic, 3)
		dst.CreateTopic(t, topic, 3, nil)
		prod := src.ManualProducer(t)
		for p := range int32(3) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 200, "before")...)
		}
		run := startMirror(t, src, dst, topic, 3, true)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)

		// Stop the leader of partition 0: its partitions move; produce; bring it back.
		leader := partitionLeader(t, src, topic, 0)
		src.StopBroker(t, leader)
		for p := range int32(3) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 100, "moved")...)
		}
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		src.RestartBroker(t, leader)
		for p := range int32(3) {
			kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, p, 100, "back")...)
		}
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		run.stop(t)
	})
}

// A destination broker crashes (SIGKILL) while the mirror writes to it: its writes in flight
// get no answer and may or may not have landed, its partitions move to the other brokers,
// where the mirror goes on with plain and transactional batches, and it comes back later.
// Nothing is lost or doubled, and no partition's mirror fails. No replayed transaction ends
// while a leader or coordinator moves: see moveCoordinatorsOff.
func TestKafkaMirrorDestinationBrokerKilled(t *testing.T) {
	threeBrokers := []kafkatest.Option{kafkatest.Brokers(3)}
	clusters := kafkaClusters{source: "source", destination: "destination-3-brokers", destinationOpts: threeBrokers}
	onKafkaClusters(t, clusters, func(t *testing.T, src, dst *kafkatest.Cluster) {
		ctx := context.Background()
		topic := kafkatest.TopicFor(t, "")
		src.CreateTopic(t, topic, 2, nil)
		if _, err := dst.Admin(t).CreateTopic(ctx, 2, 3, nil, topic); err != nil {
			t.Fatal(err)
		}
		dst.WaitTopic(t, topic, 2)
		plain := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
		app := src.ManualProducer(t, kgo.TransactionalID(topic+".app"))
		writePlain := func(round int) {
			t.Helper()
			for p := range int32(2) {
				kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, p, 2000, fmt.Sprintf("p%d", round))...)
			}
		}
		writeTxns := func(round int) {
			t.Helper()
			if err := app.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			for p := range int32(2) {
				kafkatest.ProduceSync(t, app, kafkatest.Records(topic, p, 20, fmt.Sprintf("t%d", round))...)
				kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, p, 200, fmt.Sprintf("p%d", round))...)
			}
			if err := app.EndTransaction(ctx, kgo.TransactionEndTry(round%3 != 0)); err != nil {
				t.Fatal(err)
			}
			waitStable(t, src, topic)
		}
		killed := partitionLeader(t, dst, topic, 0)
		moveCoordinatorsOff(t, dst, killed)
		run := startMirror(t, src, dst, topic, 2, true)
		writeTxns(0)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		writePlain(1)
		// While the mirror may still copy that round.
		t.Cleanup(func() { dst.RestartBroker(t, killed) })
		dst.KillBroker(t, killed)
		for round := 2; round < 5; round++ {
			writeTxns(round)
		}
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		// Back, it leads again what it led (a preferred leader election, any time).
		dst.RestartBroker(t, killed)
		writePlain(5)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		run.stop(t)
	})
}

// moveCoordinatorsOff moves every transaction coordinator of c (the leaders of
// __transaction_state) off broker id. A coordinator that moves while a transaction completes
// (its markers written, its completion not yet in the transaction log), or a partition leader
// that moves while a marker is written to it (its answer lost), has the coordinator write the
// marker again, and Kafka appends such a repeated marker (ProducerAppendInfo, "allowing
// duplicate marker write"): an offset the source does not have, on which the worker stops the
// partition. The worker cannot prevent it; tests that move leaders keep clear of it.
func moveCoordinatorsOff(t *testing.T, c *kafkatest.Cluster, id int32) {
	t.Helper()
	const coordinators = "__transaction_state"
	// The topic is created with the first transactional id.
	if _, _, err := c.ManualProducer(t, kgo.TransactionalID(kafkatest.TopicFor(t, "coordinators"))).ProducerID(context.Background()); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) { // kafkatest's clusters have 3 partitions of it
		for partitionLeader(t, c, coordinators, p) == id {
			c.MoveLeader(t, coordinators, p)
		}
	}
}

func partitionLeader(t *testing.T, c *kafkatest.Cluster, topic string, p int32) int32 {
	t.Helper()
	meta, err := kafkareq.NewCluster("test", c.Client(t)).Metadata(context.Background(), topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return meta.Leader
}

// The mirror is cancelled at random moments while plain and transactional data flow, and
// restarted from the destination's end; nothing is lost or doubled.
func TestKafkaMirrorKilledAtRandomPoints(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		createBoth(t, src, dst, topic, 2, nil)
		plain := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
		txn := src.ManualProducer(t, kgo.TransactionalID(topic+".app"))
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		ctx := context.Background()
		open := false
		for i := range 8 {
			for p := range int32(2) {
				kafkatest.ProduceSync(t, plain, kafkatest.Records(topic, p, 50+rng.IntN(200), fmt.Sprintf("p%d", i))...)
			}
			if !open {
				if err := txn.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				open = true
			}
			kafkatest.ProduceSync(t, txn, kafkatest.Records(topic, int32(i%2), 5, fmt.Sprintf("t%d", i))...)
			if rng.IntN(3) > 0 {
				if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(rng.IntN(2) == 0)); err != nil {
					t.Fatal(err)
				}
				open = false
			}
			killCtx, kill := context.WithTimeout(ctx, time.Duration(rng.IntN(400))*time.Millisecond)
			run := startMirrorCtx(killCtx, t, src, dst, topic, 2, i == 0)
			run.wg.Wait()
			kill()
			for p, err := range run.errs {
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Fatalf("round %d: partition %d: %v", i, p, err)
				}
			}
			run = startMirror(t, src, dst, topic, 2, false)
			kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
			run.stop(t)
		}
		if open {
			if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A record written by anyone but the mirror ends the partition's mirror with the offsets.
func TestKafkaMirrorStopsOnForeignWrite(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		createBoth(t, src, dst, topic, 1, nil)
		prod := src.ManualProducer(t)
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 20, "a")...)
		run := startMirror(t, src, dst, topic, 1, true)
		kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
		kafkatest.ProduceSync(t, dst.ManualProducer(t), &kgo.Record{Topic: topic, Value: []byte("foreign")})
		kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 5, "b")...)
		err := run.waitErr(t, 0)
		if err == nil || !strings.Contains(err.Error(), "20") {
			t.Fatalf("mirror error %v, want a failure naming offset 20", err)
		}
	})
}

// A source that throttles the mirror's fetches (a client quota of 100 KiB/s for ~640 KiB):
// the throttled answers are waited out and the copy completes identical.
func TestKafkaMirrorUnderFetchQuota(t *testing.T) {
	onKafkaFrom(t, "source-with-quota", nil, func(t *testing.T, src, dst *kafkatest.Cluster) {
		topic := kafkatest.TopicFor(t, "")
		createBoth(t, src, dst, topic, 2, nil)
		prod := src.ManualProducer(t)
		for p := range int32(2) {
			for i := range 4 {
				recs := kafkatest.Records(topic, p, 400, fmt.Sprint("q", i))
				for _, r := range recs {
					r.Value = bytes.Repeat(r.Value[:10], 20)
				}
				kafkatest.ProduceSync(t, prod, recs...)
			}
		}
		quota := kadm.AlterClientQuotaEntry{
			Entity: []kadm.ClientQuotaEntityComponent{{Type: "client-id"}}, // the default for every client id
			Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 100 << 10}},
		}
		res, err := src.Admin(t).AlterClientQuotas(context.Background(), []kadm.AlterClientQuotaEntry{quota})
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		run := startMirror(t, src, dst, topic, 2, true)
		kafkatest.WaitIdentical(t, src, dst, topic, 2*kafkatest.IdenticalWithin)
		run.stop(t)
	})
}
