package mirrorengine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// At failover an application's transaction is still open on the old primary A. The
// failback to A waits (PREPARING fails, retryably, naming the transaction) until A's
// coordinator ends it, then continues: A's abort marker lands where B's stop wrote its own,
// so A is a prefix of B and only B's new records are copied back.
func TestEngineFailbackWaitsForTheOldPrimarysOpenTransaction(t *testing.T) {
	a, b := kafkatest.Pair(t)
	failbackOverOpenTransaction(t, a, b, fastRetry, func(app *kgo.Client) {
		if err := app.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	})
}

// The same on Apache Kafka, where nobody ends the transaction: A's coordinator aborts it
// after its timeout. The timeout leaves the failover and the failback's start time to
// happen before it (an abort before the failback starts leaves nothing to wait for), and
// the failback's retries outlast it.
func TestKafkaFailbackWaitsForTheCoordinatorsAbort(t *testing.T) {
	kafkatest.RequireKafka(t)
	v := kafkatest.KafkaNewest
	a := kafkatest.New(t, kafkatest.Kafka(v))
	b := kafkatest.New(t, kafkatest.Kafka(v))
	kafkatest.Tally(t, a.Broker()+" ⇄ "+b.Broker()+" (failback)")
	retry := partitionstate.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, MaxAttempts: 100}
	failbackOverOpenTransaction(t, a, b, retry, func(*kgo.Client) {}, kgo.TransactionTimeout(20*time.Second))
}

func failbackOverOpenTransaction(t *testing.T, a, b *kafkatest.Cluster, retry partitionstate.RetryPolicy, endAppTxn func(*kgo.Client), appOpts ...kgo.Opt) {
	t.Helper()
	const topic = "payments"
	a.CreateTopic(t, topic, 1, nil)
	kafkatest.ProduceSync(t, a.ManualProducer(t), kafkatest.Records(topic, 0, 40, "plain")...)
	app := a.ManualProducer(t, append([]kgo.Opt{kgo.TransactionalID("payments-app")}, appOpts...)...)
	if err := app.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	kafkatest.ProduceSync(t, app, kafkatest.Records(topic, 0, 5, "in-flight")...)

	onB := openEngine(t, b)
	createMirror(t, onB, "a-to-b", a)
	start(t, onB, "a-to-b", topic, "")
	waitState(t, onB, "a-to-b", topic, 1, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, a, b, topic, kafkatest.IdenticalWithin)
	topicCmd(t, onB.StopMirrorTopics, "a-to-b", topic) // failover with the app's transaction open on A
	waitState(t, onB, "a-to-b", topic, 1, partitionstate.StateStopped)
	kafkatest.ProduceSync(t, b.ManualProducer(t), kafkatest.Records(topic, 0, 25, "on-b")...)

	onA := openEngineRetrying(t, a, retry)
	createMirror(t, onA, "b-to-a", b)
	start(t, onA, "b-to-a", topic, "")
	waiting := waitState(t, onA, "b-to-a", topic, 1, partitionstate.StateFailed).Partitions[0]
	if !strings.Contains(waiting.Error, "left open from offset 40") || waiting.RetryAttempt < 1 {
		t.Fatalf("failback over an open transaction: %+v, want a retryable wait naming it", waiting)
	}
	endAppTxn(app)
	waitState(t, onA, "b-to-a", topic, 1, partitionstate.StateMirroring)
	kafkatest.WaitIdentical(t, b, a, topic, kafkatest.IdenticalWithin)
}
