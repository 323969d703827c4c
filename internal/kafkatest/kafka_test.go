package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMain(m *testing.M) { Main(m) }

// Every Kafka version of the real tier starts, serves a produce and a fetch, and reports a
// Kafka cluster id.
func TestKafkaClusterServes(t *testing.T) {
	for _, v := range KafkaVersions() {
		t.Run(v, func(t *testing.T) {
			c := Shared(t, "kafka-"+v, Kafka(v))
			Tally(t, c.Broker())
			if c.Broker() != "kafka-"+v || len(c.ID()) != 22 {
				t.Fatalf("broker %q id %q, want kafka-%s and a 22-character Kafka Uuid", c.Broker(), c.ID(), v)
			}
			c.CreateTopic(t, "serves", 1, nil)
			cl := c.Client(t)
			if off := mustProduce(t, cl, "serves", 0, kv("k", "v", time.Now().UnixMilli())); off != 0 {
				t.Fatalf("first record at offset %d", off)
			}
			if got := partitionOffsets(t, cl, "serves", 0); got.hw != 1 {
				t.Fatalf("offsets %+v, want high watermark 1", got)
			}
		})
	}
}

// A broker killed with SIGKILL leaves the other two serving; restarted, it rejoins and
// leads again after a preferred election.
func TestKafkaKillAndRestartBroker(t *testing.T) {
	c := New(t, Kafka(KafkaNewest), Brokers(3))
	Tally(t, c.Broker()+" (3 brokers)")
	if ids := c.BrokerIDs(); len(ids) != 3 {
		t.Fatalf("brokers %v", ids)
	}
	ctx := testCtx(t)
	adm := c.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, "replicated"); err != nil {
		t.Fatal(err)
	}
	c.WaitTopic(t, "replicated", 1)
	cl := c.Client(t)
	mustProduce(t, cl, "replicated", 0, kv("k", "before", 1))
	leader := leaderOf(t, cl, "replicated", 0)
	c.KillBroker(t, leader)
	// The record written with acks=all survives, and the partition moves to another leader.
	WaitUntil(t, 60*time.Second, "a new leader", func() bool {
		l, err := tryLeaderOf(cl, "replicated", 0)
		return err == nil && l != leader
	})
	if off := mustProduce(t, cl, "replicated", 0, kv("k", "during", 2)); off != 1 {
		t.Fatalf("record after the kill at offset %d, want 1", off)
	}
	c.RestartBroker(t, leader)
	WaitUntil(t, 60*time.Second, "the restarted broker back in sync", func() bool {
		// A context of its own: the test's may have run out by now on a loaded machine.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := adm.Metadata(ctx, "replicated")
		if err != nil {
			return false
		}
		return len(m.Topics["replicated"].Partitions[0].ISR) == 3
	})
}

// An ordinary user holds no rights until ACLs grant them; the super user can do anything.
func TestKafkaWithACLs(t *testing.T) {
	c := New(t, Kafka(KafkaNewest), WithACLs("admin", "admin-secret"), User("alice", "alice-secret"))
	Tally(t, c.Broker()+" (SASL, ACLs)")
	c.CreateTopic(t, "guarded", 1, nil)
	mustProduce(t, c.Client(t), "guarded", 0, kv("k", "by admin", 1))

	alice, err := kgo.NewClient(append(c.ClientOptsAs("alice", "alice-secret"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	ctx := testCtx(t)
	err = alice.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("by alice")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice's produce without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("guarded").Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if _, err := c.Admin(t).CreateACLs(ctx, acl); err != nil {
		t.Fatal(err)
	}
	WaitUntil(t, 30*time.Second, "alice allowed to write", func() bool {
		cl, err := kgo.NewClient(append(c.ClientOptsAs("alice", "alice-secret"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			return false
		}
		defer cl.Close()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("by alice")}).FirstErr() == nil
	})
}

func leaderOf(t *testing.T, cl *kgo.Client, topic string, p int32) int32 {
	t.Helper()
	l, err := tryLeaderOf(cl, topic, p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func tryLeaderOf(cl *kgo.Client, topic string, p int32) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := describeTopic(ctx, cl, topic)
	if err != nil {
		return 0, err
	}
	return m.leaders[p], nil
}
