package provider

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// topicID returns the topic's id on c.
func topicID(t *testing.T, c *kafkatest.Cluster, topic string) kadm.TopicID {
	t.Helper()
	meta, err := c.Admin(t).Metadata(ctxT(t), topic)
	if err != nil || !meta.Topics.Has(topic) {
		t.Fatalf("metadata of %s on %s: %v", topic, c.ID(), err)
	}
	return meta.Topics[topic].ID
}

// TestAccMirrorTopic_failback mirrors A → B with the worker on B, fails over to B (which
// then takes writes), and fails back with a second worker on A and a mirror in the other
// direction: only B's new records are copied, A's topic is not recreated, and both logs
// end identical. The data sources describe the new direction.
func TestAccMirrorTopic_failback(t *testing.T) {
	accTest(t)
	a, b := kafkatest.Pair(t)
	a.CreateTopic(t, "ledger", 2, nil)
	kafkatest.ProduceKeyed(t, a.Client(t), "ledger", 0, 100)
	onB := startWorker(t, b)
	onA := startWorker(t, a)

	// Two workers need two provider instances. In real use each provider alias runs its
	// own plugin process; the test harness serves every alias of a provider name from one
	// in-process server, which keeps one configuration. So worker A's instance gets a
	// second provider name.
	config := func(state string, back bool) string {
		cfg := onB.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "a_to_b" {
  name     = "a-to-b"
  source   = { bootstrap_servers = %[1]s }
}

resource "kafkamirror_mirror_topic" "on_b" {
  mirror_name = kafkamirror_cluster_mirror.a_to_b.name
  topic       = "ledger"
  state       = %[2]q
}
`, hclList(a.Addrs()), state)
		if back {
			// With a destination connection, the plan checks A's topic before the start.
			cfg += onA.providerBlock("kafkamirrorback", fmt.Sprintf("  destination = { bootstrap_servers = %s }\n", hclList(a.Addrs()))) + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "b_to_a" {
  provider = kafkamirrorback
  name     = "b-to-a"
  source   = { bootstrap_servers = %[1]s }
}

resource "kafkamirror_mirror_topic" "on_a" {
  provider    = kafkamirrorback
  mirror_name = kafkamirror_cluster_mirror.b_to_a.name
  topic       = "ledger"
}

data "kafkamirror_cluster_mirror" "b_to_a" {
  provider   = kafkamirrorback
  name       = kafkamirror_cluster_mirror.b_to_a.name
  depends_on = [kafkamirror_mirror_topic.on_a]
}

data "kafkamirror_mirror_topic" "on_a" {
  provider    = kafkamirrorback
  mirror_name = kafkamirror_mirror_topic.on_a.mirror_name
  topic       = kafkamirror_mirror_topic.on_a.topic
}
`, hclList(b.Addrs()))
		}
		return cfg
	}
	rec := &planRecorder{}
	var idOnA kadm.TopicID
	var endsOnA map[int32]int64

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror", "kafkamirrorback"),
		Steps: []resource.TestStep{
			{
				Config: config("mirroring", false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kafkamirror_mirror_topic.on_b", tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)),
				},
				Check: check(func() {
					kafkatest.WaitIdentical(t, a, b, "ledger", time.Minute)
					idOnA = topicID(t, a, "ledger")
				}),
			},
			{ // Failover to B; applications write there.
				Config: config("stopped", false),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kafkamirror_mirror_topic.on_b", tfjsonpath.New("partitions"), partitionsIn(api.StateStopped, 2)),
				},
				Check: check(func() {
					endsOnA = a.EndOffsets(t, "ledger")
					kafkatest.ProduceKeyed(t, b.Client(t), "ledger", 100, 30)
				}),
			},
			{ // Failback: B → A with A's worker copies only B's 30 new records.
				Config:    config("stopped", true),
				PreConfig: rec.reset,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kafkamirror_mirror_topic.on_a", plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction("kafkamirror_mirror_topic.on_b", plancheck.ResourceActionNoop),
					expectWarning{rec: rec, want: []string{`Destination topic "ledger" is not empty`, `already has topic "ledger" with 100 records in 2 partitions`,
						"succeeds only as a restart or failback"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("kafkamirror_mirror_topic.on_a", tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)),
					statecheck.ExpectKnownValue("data.kafkamirror_cluster_mirror.b_to_a", tfjsonpath.New("source_cluster_id"), knownvalue.StringExact(b.ID())),
					statecheck.ExpectKnownValue("data.kafkamirror_cluster_mirror.b_to_a", tfjsonpath.New("topics"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("ledger")})),
					statecheck.ExpectKnownValue("data.kafkamirror_mirror_topic.on_a", tfjsonpath.New("state"), knownvalue.StringExact("mirroring")),
					statecheck.ExpectKnownValue("data.kafkamirror_mirror_topic.on_a", tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)),
				},
				Check: check(func() {
					kafkatest.WaitIdentical(t, b, a, "ledger", time.Minute)
					if topicID(t, a, "ledger") != idOnA {
						t.Fatal("failback recreated A's topic instead of copying only the records written since the failover")
					}
					var before, after int64
					for p, o := range a.EndOffsets(t, "ledger") {
						after += o
						before += endsOnA[p]
					}
					if after-before != 30 {
						t.Fatalf("failback added %d records to A, want the 30 written on B since the failover", after-before)
					}
				}),
			},
		},
	})
}

// TestAccSourceTopics_forEach mirrors every source topic matching a pattern with for_each
// over kafkamirror_source_topics.
func TestAccSourceTopics_forEach(t *testing.T) {
	accTest(t)
	src, dst := kafkatest.Pair(t)
	prod := src.Client(t)
	for _, topic := range []string{"app.orders", "app.payments", "app.users", "billing"} {
		src.CreateTopic(t, topic, 2, nil)
		kafkatest.ProduceKeyed(t, prod, topic, 0, 40)
	}
	w := startWorker(t, dst)

	mirrorOnly := w.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "apps" {
  name   = "apps"
  source = { bootstrap_servers = %s }
}
`, hclList(src.Addrs()))
	// The data source reads the source at plan time, so the mirror exists first.
	withTopics := func(recreate string) string {
		return mirrorOnly + `
data "kafkamirror_source_topics" "apps" {
  mirror_name = kafkamirror_cluster_mirror.apps.name
  pattern     = "^app\\."
}

resource "kafkamirror_mirror_topic" "apps" {
  for_each    = toset(data.kafkamirror_source_topics.apps.topics)
  mirror_name = kafkamirror_cluster_mirror.apps.name
  topic       = each.value
  divergence  = each.value == "` + recreate + `" ? "recreate" : "fail"
  timeouts    = { update = "1m" }
}
`
	}
	apps := []string{"app.orders", "app.payments", "app.users"}
	users := `kafkamirror_mirror_topic.apps["app.users"]`
	stateChecks := []statecheck.StateCheck{
		statecheck.ExpectKnownValue("data.kafkamirror_source_topics.apps", tfjsonpath.New("topics"), knownvalue.ListExact([]knownvalue.Check{
			knownvalue.StringExact(apps[0]), knownvalue.StringExact(apps[1]), knownvalue.StringExact(apps[2]),
		})),
	}
	for _, topic := range apps {
		stateChecks = append(stateChecks, statecheck.ExpectKnownValue(fmt.Sprintf("kafkamirror_mirror_topic.apps[%q]", topic),
			tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)))
	}
	stateChecks = append(stateChecks, stateCheckFunc(func() {
		for _, topic := range apps {
			kafkatest.WaitIdentical(t, src, dst, topic, time.Minute)
		}
		if _, err := w.client.GetTopic(ctxT(t), "apps", "billing"); !api.IsCode(err, api.CodeTopicNotInClusterMirror) {
			t.Fatalf("billing, which the pattern does not match, is mirrored: %v", err)
		}
	}))
	rec := &planRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		Steps: []resource.TestStep{
			{Config: mirrorOnly},
			{Config: withTopics(""), ConfigStateChecks: stateChecks},
			{ // Drift: someone writes to a mirrored destination partition; the worker's next copy
				// lands on another offset and the partition FAILS for good (not retried). Refresh
				// warns, and the plan restarts the partition.
				PreConfig: func() {
					rec.reset()
					// Both partitions: with only one diverged, the worker's "recreate" restart
					// recreates the topic but leaves the healthy partition's runner behind
					// (an engine issue, reported), so the test would not end identical.
					for p := range int32(2) {
						produceTo(t, dst, "app.users", p, "a foreign write on the destination")
						produceTo(t, src, "app.users", p, "a new source record")
					}
					kafkatest.WaitFor(t, time.Minute, "app.users partitions FAILED for good", func() (bool, string) {
						d, err := w.client.GetTopic(ctxT(t), "apps", "app.users")
						if err != nil {
							return false, err.Error()
						}
						for _, p := range d.Partitions {
							if p.State != api.StateFailed || p.RetryAttempt >= 0 {
								return false, describePartitions(d.Partitions)
							}
						}
						return true, ""
					})
				},
				Config:             withTopics(""),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(users, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(users, tfjsonpath.New("partitions")),
					plancheck.ExpectResourceAction(`kafkamirror_mirror_topic.apps["app.orders"]`, plancheck.ResourceActionNoop),
					// The data path's offset check or the describe's look at the destination end,
					// whichever sees the foreign write first, names the partition.
					expectWarning{rec: rec, want: []string{`Partition 0 of mirror topic "app.users" FAILED`, "destination app.users[0]"}},
					expectWarning{rec: rec, want: []string{`Apply restarts failed partitions of topic "app.users"`, "partition 0: FAILED", "not retried: waits for the operator"}},
				}},
			},
			{ // The restart refuses the diverged destination (divergence "fail"): the apply
				// fails early with the partitions' errors.
				Config:      withTopics(""),
				ExpectError: wrapped(`Topic "app.users" of cluster mirror "apps" cannot reach MIRRORING`, `partition 0: FAILED`, `waits for the operator`),
			},
			{ // With divergence "recreate" the restart recreates the destination topic.
				PreConfig: rec.reset,
				Config:    withTopics("app.users"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(users, plancheck.ResourceActionUpdate),
					expectWarning{rec: rec, want: []string{`Restart may recreate destination topic "app.users"`, "with divergence = \"recreate\""}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(users, tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)),
					stateCheckFunc(func() { kafkatest.WaitIdentical(t, src, dst, "app.users", time.Minute) }),
				},
			},
			// terraform-plugin-testing's legacy state shim, which its post-test destroy uses,
			// cannot represent for_each instances: remove them in a step of their own.
			{Config: mirrorOnly},
		},
	})
}

// produceTo writes one record to a partition of topic on c.
func produceTo(t *testing.T, c *kafkatest.Cluster, topic string, partition int32, value string) {
	t.Helper()
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: topic, Partition: partition, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("producing to %s[%d]: %v", topic, partition, err)
	}
}
