package datapath

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// A source transaction stays open longer than the destination allows
// (transaction.max.timeout.ms 5 s): the destination coordinator aborts the replayed
// transaction and writes its abort marker where the source has none. The source then
// commits: the copy cannot be exact, and the partition must fail for good, naming the
// offsets, instead of writing a lone commit marker that read_committed consumers would read
// as an empty transaction.
func TestKafkaMirrorDestinationAbortsAReplayedTransaction(t *testing.T) {
	kafkatest.RequireKafka(t)
	for _, v := range kafkatest.KafkaVersions() {
		t.Run("to-kafka-"+v, func(t *testing.T) {
			src := kafkatest.Shared(t, "source-"+kafkatest.KafkaNewest, kafkatest.Kafka(kafkatest.KafkaNewest))
			dst := kafkatest.New(t, kafkatest.Kafka(v), kafkatest.BrokerConfig("transaction.max.timeout.ms", "5000"))
			kafkatest.Tally(t, src.Broker()+" → "+dst.Broker()+" (transaction.max.timeout.ms 5 s)")
			topic := kafkatest.TopicFor(t, "")
			createBoth(t, src, dst, topic, 1, nil)
			kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records(topic, 0, 10, "before")...)
			app := src.ManualProducer(t, kgo.TransactionalID(topic+".app"), kgo.TransactionTimeout(time.Minute))
			if err := app.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			kafkatest.ProduceSync(t, app, kafkatest.Records(topic, 0, 3, "long-open")...)
			run := startMirror(t, src, dst, topic, 1, true)

			// The destination coordinator aborts the replayed transaction after 5 s.
			deadline := time.Now().Add(60 * time.Second)
			for {
				lso, end := committedAndEnd(t, dst, topic)
				if lso == end && end > 13 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the destination coordinator did not abort the replayed transaction: LSO %d, end %d", lso, end)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err := app.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
			err := run.waitErr(t, 0)
			if err == nil || !strings.Contains(err.Error(), "13") {
				t.Fatalf("mirror error %v, want a failure naming offset 13", err)
			}
			t.Logf("the partition failed as it must: %v", err)
		})
	}
}

// committedAndEnd returns a destination partition 0's last stable offset and end offset.
func committedAndEnd(t *testing.T, c *kafkatest.Cluster, topic string) (lso, end int64) {
	t.Helper()
	adm := c.Admin(t)
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ends.Lookup(topic, 0)
	l, _ := committed.Lookup(topic, 0)
	return l.Offset, e.Offset
}
