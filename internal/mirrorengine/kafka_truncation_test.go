package mirrorengine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// An unclean leader election on a real source cluster rewrites offsets the mirror already
// copied (the KIP's ULE_RECOVERY case): a follower that missed the last records becomes
// leader, takes new records at the same offsets, and the old leader truncates when it
// returns. The next session of the running mirror finds the source epoch it copied last
// ending below the destination end (OffsetForLeaderEpoch) and a new mirror, which knows no
// epoch, finds the destination's last record differing from the source's: both fail with
// the offsets instead of copying on top of a destination that is no longer a prefix.
func TestKafkaMirrorFailsOnSourceTruncation(t *testing.T) {
	kafkatest.RequireKafka(t)
	versions := kafkatest.KafkaVersions()
	src := kafkatest.Shared(t, "source-3-brokers-"+versions[0], kafkatest.Kafka(versions[0]), kafkatest.Brokers(3))
	dst := kafkatest.Shared(t, "destination-"+versions[0], kafkatest.Kafka(versions[0]))
	kafkatest.Tally(t, src.Broker()+" (3 brokers, unclean leader election) → "+dst.Broker())
	ctx := context.Background()
	topic := kafkatest.TopicFor(t, "")
	adm := src.Admin(t)
	res, err := adm.CreateTopic(ctx, 1, 2, map[string]*string{
		"min.insync.replicas":            kadm.StringPtr("1"),
		"unclean.leader.election.enable": kadm.StringPtr("true"),
	}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	src.WaitTopic(t, topic, 1)
	dst.CreateTopic(t, topic, 1, nil)
	leader, follower := replicas(t, adm, topic)
	t.Cleanup(func() { src.RestartBroker(t, leader); src.RestartBroker(t, follower) })

	prod := src.ManualProducer(t, kgo.RequiredAcks(kgo.AllISRAcks()))
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 100, "both")...)
	m := datapath.NewPartitionMirror(src.Client(t), dst.Client(t), datapath.PartitionConfig{Mirror: "m1", Topic: topic, FirstStart: true})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)

	// Only the leader takes the next records; the mirror copies them.
	src.StopBroker(t, follower)
	waitISR(t, adm, topic, []int32{leader})
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 50, "leader-only")...)
	kafkatest.WaitIdentical(t, src, dst, topic, kafkatest.IdenticalWithin)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	copiedEpoch := m.LastMirroredEpoch()

	// The leader goes; the follower is elected uncleanly and takes other records at the
	// same offsets; the old leader comes back and truncates.
	src.StopBroker(t, leader)
	src.RestartBroker(t, follower)
	kafkatest.WaitUntil(t, 30*time.Second, "an unclean leader election", func() bool {
		res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return false
		}
		r := res[topic][0]
		return r.Err == nil || errors.Is(r.Err, kerr.ElectionNotNeeded)
	})
	kafkatest.ProduceSync(t, prod, kafkatest.Records(topic, 0, 80, "rewritten")...)
	src.RestartBroker(t, leader)

	// Both must fail by themselves; the bound only keeps a wrong outcome from hanging.
	bounded, cancelBounded := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelBounded()
	err = m.Run(bounded)
	var trunc *mirrorerr.SourceTruncatedError
	if !errors.As(err, &trunc) || trunc.Epoch != copiedEpoch || trunc.EpochEnd != 100 || trunc.DestinationEnd != 150 {
		t.Fatalf("restarted mirror: %v, want the source epoch %d ending at 100 below the destination end 150", err, copiedEpoch)
	}
	fresh := datapath.NewPartitionMirror(src.Client(t), dst.Client(t), datapath.PartitionConfig{Mirror: "m1", Topic: topic})
	err = fresh.Run(bounded)
	var last *mirrorerr.LastEntryMismatchError
	if !errors.As(err, &last) || last.Offset != 149 {
		t.Fatalf("new mirror: %v, want the destination's last record at 149 differing from the source's", err)
	}
}

// replicas returns the leader and the other replica of partition 0 of a two-replica topic.
func replicas(t *testing.T, adm *kadm.Client, topic string) (leader, follower int32) {
	t.Helper()
	td := describePartition0(t, adm, topic)
	for _, r := range td.Replicas {
		if r != td.Leader {
			return td.Leader, r
		}
	}
	t.Fatalf("%s has replicas %v, want two", topic, td.Replicas)
	return 0, 0
}

func describePartition0(t *testing.T, adm *kadm.Client, topic string) kadm.PartitionDetail {
	t.Helper()
	tds, err := adm.ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return tds[topic].Partitions[0]
}

func waitISR(t *testing.T, adm *kadm.Client, topic string, want []int32) {
	t.Helper()
	var got []int32
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		got = describePartition0(t, adm, topic).ISR
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s ISR %v, want %v", topic, got, want)
}
