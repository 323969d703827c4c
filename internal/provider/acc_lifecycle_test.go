package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

const (
	mirrorAddr = "kafkamirror_cluster_mirror.m"
	topicAddr  = "kafkamirror_mirror_topic.orders"
)

// partitionsIn expects n partitions, all in the KIP state.
func partitionsIn(state string, n int) knownvalue.Check {
	parts := make([]knownvalue.Check, n)
	for i := range parts {
		parts[i] = knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"partition": knownvalue.Int64Exact(int64(i)),
			"state":     knownvalue.StringExact(state),
		})
	}
	return knownvalue.ListExact(parts)
}

// wrapped matches s in terraform's CLI output, which may wrap long diagnostics: every space
// of s matches any run of white space.
func wrapped(parts ...string) *regexp.Regexp {
	quoted := make([]string, len(parts))
	for i, p := range parts {
		quoted[i] = strings.ReplaceAll(regexp.QuoteMeta(p), " ", `\s+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(quoted, ".*"))
}

// check turns a test step assertion into a resource.TestCheckFunc; the assertion fails the
// test itself (t.Fatal), which is safe because steps run on the test's goroutine.
func check(fn func()) resource.TestCheckFunc {
	return func(*terraform.State) error {
		fn()
		return nil
	}
}

// TestAccMirrorTopic_lifecycle drives one topic through its life on clusters with SASL and
// ACLs: create (records identical, partitions MIRRORING, no credential in the state file),
// import of both resources, pause in place (nothing copied), the failover warning of a
// plan, resume, drift (stopped outside Terraform) and restart, failover (the destination
// becomes writable), the plan-time refusal of stopped → paused, a restart with divergence
// "recreate", a mirror destroy refused while a topic mirrors, and a destroy that keeps the
// destination topic and its data.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// offsetAtAttrs are the partitions' read times of a topic with n partitions: an import
// reads them anew, so they never equal the state's.
func offsetAtAttrs(n int) []string {
	var out []string
	for p := range n {
		out = append(out, fmt.Sprintf("partitions.%d.source_offset_at", p), fmt.Sprintf("partitions.%d.destination_offset_at", p))
	}
	return out
}

func TestAccMirrorTopic_lifecycle(t *testing.T) {
	t.Parallel()
	mirrorTopicLifecycle(t)
}

// The same lifecycle on real Apache Kafka brokers (each version of the tier on both sides):
// SCRAM, the StandardAuthorizer's DENY ACLs, asynchronous metadata and transaction markers.
func TestAccMirrorTopic_lifecycleOnKafka(t *testing.T) {
	kafkatest.RequireKafka(t)
	for _, v := range kafkatest.KafkaVersions() {
		t.Run("kafka-"+v, func(t *testing.T) {
			kafkatest.Tally(t, "kafka-"+v+" → kafka-"+v+" (terraform)")
			mirrorTopicLifecycle(t, kafkatest.Kafka(v))
		})
	}
}

func mirrorTopicLifecycle(t *testing.T, clusterOpts ...kafkatest.Option) {
	requireAcc(t)
	const (
		admin    = "admin"
		password = "s3cr3t-Pa55-7f0c91"
		mirror   = "orders-mirror"
	)
	src, dst := kafkatest.Pair(t, append([]kafkatest.Option{kafkatest.WithACLs(admin, password), kafkatest.User("app", "app-secret")}, clusterOpts...)...)
	src.CreateTopic(t, "orders", 3, nil)
	src.CreateTopic(t, "audit", 1, nil)
	srcProducer := src.Client(t)
	kafkatest.ProduceKeyed(t, srcProducer, "orders", 0, 300)
	kafkatest.ProduceKeyed(t, srcProducer, "audit", 0, 10)
	w := startWorker(t, dst,
		"KAFKAMIRROR_DESTINATION_SASL_MECHANISM=SCRAM-SHA-256",
		"KAFKAMIRROR_DESTINATION_SASL_USERNAME="+admin,
		"KAFKAMIRROR_DESTINATION_SASL_PASSWORD="+password)

	// The application may write "orders" on the destination by its own ACLs; the worker's
	// read-only ACL denies it while the topic is mirrored or paused.
	acl := kadm.NewACLs().Allow("User:app").AllowHosts("*").Topics("orders").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite, kadm.OpDescribe)
	dst.CreateACLs(t, acl)
	appWrite := func() error {
		return dst.ProduceAs(t, "app", "app-secret", "orders", []byte("written by the app on the destination"))
	}

	// The password is write-only where the CLI supports it (1.11+); older CLIs get the
	// sensitive alternative, which Terraform keeps in the state.
	config := func(state, divergence string, passwordVersion int, interval string) string {
		secret := fmt.Sprintf("password_wo         = %q\n      password_wo_version = %d", password, passwordVersion)
		if !writeOnlySupported {
			secret = fmt.Sprintf("password = %q", password)
		}
		return w.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "m" {
  name = %[1]q
  source = {
    bootstrap_servers = %[2]s
    sasl = {
      mechanism           = "SCRAM-SHA-256"
      username            = %[3]q
      %[4]s
    }
  }
  source_cluster_id = %[5]q
  sync = {
    interval = %[6]q
  }
}

resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = "orders"
  state       = %[7]q
  divergence  = %[8]q
  timeouts = {
    create = "2m"
    update = "2m"
    delete = "2m"
  }
}
`, mirror, hclList(src.Addrs()), admin, secret, src.ID(), interval, state, divergence)
	}
	rec := &planRecorder{}
	var pausedEnds map[int32]int64

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		CheckDestroy: func(*terraform.State) error {
			if _, err := w.client.GetMirror(ctxT(t), mirror); !api.IsCode(err, api.CodeUnknownClusterMirror) {
				return fmt.Errorf("after destroy, the mirror is still described: %v", err)
			}
			var total int64
			for _, o := range dst.EndOffsets(t, "orders") {
				total += o
			}
			if total == 0 {
				return fmt.Errorf("destroy left an empty destination topic")
			}
			return nil
		},
		Steps: []resource.TestStep{
			{ // Create: records identical, every partition MIRRORING, no credential in the state.
				Config: config("mirroring", "fail", 1, "30s"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(mirrorAddr, plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("mirror_name_config"), knownvalue.StringExact(mirror)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 3)),
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("id"), knownvalue.StringExact(mirror+"/orders")),
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("mirror_name_config"), knownvalue.StringExact(mirror)),
					statecheck.ExpectKnownValue(mirrorAddr, tfjsonpath.New("source_cluster_id"), knownvalue.StringExact(src.ID())),
					statecheck.ExpectKnownValue(mirrorAddr, tfjsonpath.New("source").AtMapKey("sasl").AtMapKey("password_wo"), knownvalue.Null()),
					noSecretInState{marker: mirror, secret: password, skip: !writeOnlySupported},
				},
				Check: check(func() {
					kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute)
					if err := appWrite(); err == nil {
						t.Fatal("the application wrote to the destination topic while it is mirrored")
					}
				}),
			},
			{ // Bring the partitions' offsets in the state up to date for the imports.
				RefreshState: true,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(mirrorAddr, "topic_count", "1"),
					resource.TestCheckResourceAttr(topicAddr, "partitions.0.lag", "0"),
					resource.TestCheckResourceAttr(topicAddr, "partitions.1.lag", "0"),
					resource.TestCheckResourceAttr(topicAddr, "partitions.2.lag", "0"),
					// Both clusters answered: no cluster unreachable, offsets read just now.
					resource.TestCheckResourceAttr(topicAddr, "partitions.0.unreachable.#", "0"),
					resource.TestMatchResourceAttr(topicAddr, "partitions.0.source_offset_at", rfc3339),
					resource.TestMatchResourceAttr(topicAddr, "partitions.0.destination_offset_at", rfc3339),
				),
			},
			{ // Import the mirror: the worker never returns the password (nor its version).
				Config:                  config("mirroring", "fail", 1, "30s"),
				ResourceName:            mirrorAddr,
				ImportState:             true,
				ImportStateId:           mirror,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"source.sasl.password_wo_version", "source.sasl.password"},
			},
			{ // Import the topic by <mirror>/<topic>.
				Config:                  config("mirroring", "fail", 1, "30s"),
				ResourceName:            topicAddr,
				ImportState:             true,
				ImportStateId:           mirror + "/orders",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: append(offsetAtAttrs(3), "timeouts"),
			},
			{ // Pause in place, rotating the password and changing sync in place too. Records
				// produced while paused are not copied.
				Config: config("paused", "fail", 2, "45s"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(mirrorAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("mirror_name_config"), knownvalue.StringExact(mirror+".paused")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StatePaused, 3)),
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("state"), knownvalue.StringExact("paused")),
					statecheck.ExpectKnownValue(mirrorAddr, tfjsonpath.New("sync").AtMapKey("interval"), knownvalue.StringExact("45s")),
					noSecretInState{marker: mirror, secret: password, skip: !writeOnlySupported},
				},
				Check: check(func() {
					pausedEnds = dst.EndOffsets(t, "orders")
					kafkatest.ProduceKeyed(t, srcProducer, "orders", 300, 60)
					// The worker sees the new records (lag 60) and copies none of them.
					kafkatest.WaitFor(t, 30*time.Second, "the worker to report 60 records of lag", func() (bool, string) {
						d, err := w.client.GetTopic(ctxT(t), mirror, "orders")
						if err != nil {
							return false, err.Error()
						}
						var lag int64
						for _, p := range d.Partitions {
							lag += p.Lag
						}
						return lag == 60, describePartitions(d.Partitions)
					})
					if now := dst.EndOffsets(t, "orders"); fmt.Sprint(now) != fmt.Sprint(pausedEnds) {
						t.Fatalf("records were copied while paused: destination ends %v, then %v", pausedEnds, now)
					}
				}),
			},
			{ // The plan of a failover warns with the partitions and the lag that will not be copied.
				PreConfig:          rec.reset,
				Config:             config("stopped", "fail", 2, "45s"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					expectWarning{rec: rec, want: []string{
						`Failover: topic "orders" stops mirroring from cluster mirror "orders-mirror"`,
						"60 records of current lag (as of this plan) will not be copied",
						"Partitions: 0 (PAUSED), 1 (PAUSED), 2 (PAUSED)",
						"destination topic becomes writable",
					}},
				}},
			},
			{ // Resume: the records produced while paused arrive. The sync change alone updates
				// the mirror in place without resending the source connection.
				Config: config("mirroring", "fail", 2, "1m"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(mirrorAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 3)),
					statecheck.ExpectKnownValue(mirrorAddr, tfjsonpath.New("sync").AtMapKey("interval"), knownvalue.StringExact("1m")),
				},
				Check: check(func() { kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute) }),
			},
			{ // Drift: stopped outside Terraform. Refresh sees it; the plan restarts the topic.
				PreConfig: func() {
					res, err := w.client.StopTopics(ctxT(t), mirror, []string{"orders"})
					if err != nil || res[0].Err() != nil {
						t.Fatalf("stopping outside Terraform: %v %+v", err, res)
					}
					w.waitTopicState(t, mirror, "orders", api.StateStopped)
				},
				Config: config("mirroring", "fail", 2, "1m"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("mirror_name_config"), knownvalue.StringExact(mirror)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 3)),
				},
				Check: check(func() {
					kafkatest.ProduceKeyed(t, srcProducer, "orders", 360, 20)
					kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute)
				}),
			},
			{ // Failover: the plan warns; afterwards the destination takes the application's writes.
				PreConfig: rec.reset,
				Config:    config("stopped", "fail", 2, "1m"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("mirror_name_config"), knownvalue.StringExact(mirror+".removed")),
					expectWarning{rec: rec, want: []string{`Failover: topic "orders"`, "Partitions: 0 (MIRRORING), 1 (MIRRORING), 2 (MIRRORING)"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateStopped, 3)),
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("state"), knownvalue.StringExact("stopped")),
				},
				Check: check(func() {
					if err := appWrite(); err != nil {
						t.Fatalf("the destination is not writable after the failover: %v", err)
					}
				}),
			},
			{ // stopped → paused is illegal (KIP-1279): refused at plan time, with the legal changes.
				Config: config("paused", "fail", 2, "1m"),
				ExpectError: wrapped(`Illegal mirror topic state change`, `cannot change state from "stopped" to "paused"`,
					`a stopped topic cannot be paused`, `Legal changes from "stopped": "mirroring"`),
			},
			{ // Restart with divergence "recreate": the destination took a write since the
				// failover, so the plan warns and the worker recreates the destination topic.
				PreConfig: rec.reset,
				Config:    config("mirroring", "recreate", 2, "1m"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					expectWarning{rec: rec, want: []string{`Restart may recreate destination topic "orders"`,
						"The destination now holds 1 record past the last mirrored offsets", "will be recreated"}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 3)),
				},
				Check: check(func() { kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute) }),
			},
			{ // An import takes the divergence policy of the last start from the worker. The
				// partitions' offsets are live (the recreated topic is still being copied).
				Config:                  config("mirroring", "recreate", 2, "1m"),
				ResourceName:            topicAddr,
				ImportState:             true,
				ImportStateId:           mirror + "/orders",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts", "partitions"},
			},
			{ // A topic mirrored outside Terraform keeps the mirror alive: its destroy is refused
				// with the worker's message naming the topic. The orders topic is stopped meanwhile.
				PreConfig: func() {
					res, err := w.client.StartTopics(ctxT(t), mirror, []string{"audit"}, api.DivergenceFail)
					if err != nil || res[0].Err() != nil {
						t.Fatalf("starting audit outside Terraform: %v %+v", err, res)
					}
					w.waitTopicState(t, mirror, "audit", api.StateMirroring)
					rec.reset()
				},
				Config:      w.providerBlock(""),
				ExpectError: wrapped(`Cannot delete cluster mirror while it mirrors topics`, `still mirrors topics audit`),
			},
			{ // With audit stopped too, the mirror goes. Destroy kept the destination topic and data.
				PreConfig: func() {
					res, err := w.client.StopTopics(ctxT(t), mirror, []string{"audit"})
					if err != nil || res[0].Err() != nil {
						t.Fatalf("stopping audit: %v %+v", err, res)
					}
					w.waitTopicState(t, mirror, "audit", api.StateStopped)
				},
				Config: w.providerBlock(""),
				Check: check(func() {
					if !strings.Contains(strings.Join(rec.all(), "\n"), "Destroying this kafkamirror_mirror_topic fails topic \"orders\" over") {
						t.Fatalf("the destroy plan had no failover warning: %q", rec.all())
					}
					kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute)
				}),
			},
		},
	})
}

// hclList renders strings as an HCL list.
func hclList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
