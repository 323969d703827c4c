package provider

// Acceptance test of kafkamirror_cluster_mirror's destination_topics.

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// TestAccClusterMirror_destinationTopics: destination_topics sets the replication factor
// and min.insync.replicas of the destination topics the worker creates (3-broker clusters;
// the source topic has replication factor 1); the data source shows them; the mirror
// imports clean; min_insync_replicas above replication_factor fails at plan time.
func TestAccClusterMirror_destinationTopics(t *testing.T) {
	accTest(t)
	src, dst := kafkatest.Pair(t, kafkatest.Brokers(3))
	src.CreateTopic(t, "orders", 2, nil)
	w := startWorker(t, dst)
	config := func(settings string) string {
		return w.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "m" {
  name               = "m"
  source             = { bootstrap_servers = %s }
  destination_topics = %s
}

resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = "orders"
}

data "kafkamirror_cluster_mirror" "m" {
  name = kafkamirror_cluster_mirror.m.name
}
`, hclList(src.Addrs()), settings)
	}
	const mirrorAddr = "kafkamirror_cluster_mirror.m"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: (&planRecorder{}).factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config:      config(`{ replication_factor = 2, min_insync_replicas = 3 }`),
				PlanOnly:    true,
				ExpectError: wrapped(`min_insync_replicas above replication_factor`, `min_insync_replicas is 3 but replication_factor is 2`),
			},
			{
				Config: config(`{ replication_factor = 3, min_insync_replicas = 2 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(mirrorAddr, tfjsonpath.New("destination_topics").AtMapKey("replication_factor"), knownvalue.Int64Exact(3)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.kafkamirror_cluster_mirror.m", tfjsonpath.New("destination_topics"),
						knownvalue.ObjectExact(map[string]knownvalue.Check{
							"replication_factor": knownvalue.Int64Exact(3), "min_insync_replicas": knownvalue.Int64Exact(2),
						})),
					stateCheckFunc(func() {
						rf, minInsync := dst.TopicReplication(t, "orders")
						if rf != 3 || minInsync != "2" {
							t.Errorf("destination topic: replication factor %d, min.insync.replicas %q; want 3, \"2\"", rf, minInsync)
						}
					}),
				},
			},
			{
				Config:            config(`{ replication_factor = 3, min_insync_replicas = 2 }`),
				ResourceName:      mirrorAddr,
				ImportState:       true,
				ImportStateId:     "m",
				ImportStateVerify: true,
				// The worker lists the topics of the mirror; not a setting.
				ImportStateVerifyIgnore: []string{"topic_count"},
			},
			{ // Back to the defaults: in place, for topics created from then on.
				Config: config(`null`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(mirrorAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(mirrorAddr, tfjsonpath.New("destination_topics"), knownvalue.Null()),
					stateCheckFunc(func() {
						m, err := w.client.GetMirror(ctxT(t), "m")
						if err != nil || m.DestinationTopics != (api.DestinationTopics{}) {
							t.Errorf("the worker has destination_topics %+v (%v), want the defaults", m, err)
						}
					}),
				},
			},
		},
	})
}
