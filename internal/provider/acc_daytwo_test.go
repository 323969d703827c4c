package provider

// Acceptance tests of the patterns users rely on after day one: the README's for_each
// pattern across later changes of the mirror, a renamed for_each key, imports, quiet plans
// and a wrong source password.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// expectNoWarnings is a plan check: the provider returned no warning since the recorder's
// last reset.
type expectNoWarnings struct{ rec *planRecorder }

func (c expectNoWarnings) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	if ws := c.rec.all(); len(ws) > 0 {
		resp.Error = fmt.Errorf("the plan warned:\n%s", strings.Join(ws, "\n---\n"))
	}
}

// ordersMirror starts a pair of clusters with the source topic "orders" and a worker, and
// returns the configuration of the provider and a cluster mirror "m" of them.
func ordersMirror(t *testing.T, partitions int32) (src, dst *kafkatest.Cluster, w *testWorker, mirror string) {
	t.Helper()
	src, dst = kafkatest.Pair(t)
	src.CreateTopic(t, "orders", partitions, nil)
	w = startWorker(t, dst)
	return src, dst, w, w.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "m" {
  name   = "m"
  source = { bootstrap_servers = %s }
}
`, hclList(src.Addrs()))
}

// saslSource starts a source cluster that requires SCRAM (user admin) and a plain
// destination with a worker on it.
func saslSource(t *testing.T, password string) (src, dst *kafkatest.Cluster, w *testWorker) {
	t.Helper()
	src = kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.WithACLs("admin", password))
	dst = kafkatest.New(t, kafkatest.ClusterID("destination-cluster"))
	return src, dst, startWorker(t, dst)
}

// saslBlock is the sasl attribute of a source: write-only password where the CLI has
// write-only attributes, the sensitive one otherwise.
func saslBlock(password string, version int) string {
	secret := fmt.Sprintf("password_wo = %q\n      password_wo_version = %d", password, version)
	if !writeOnlySupported {
		secret = fmt.Sprintf("password = %q", password)
	}
	return fmt.Sprintf("{\n      mechanism = \"SCRAM-SHA-256\"\n      username  = \"admin\"\n      %s\n    }", secret)
}

// saslMirrorConfig is the provider block and the cluster mirror res, named name, of the
// source at bootstrap with the sasl attribute sasl and the further attributes rest.
func (w *testWorker) saslMirrorConfig(res, name string, bootstrap []string, sasl, rest string) string {
	return w.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" %q {
  name   = %q
  source = {
    bootstrap_servers = %s
    sasl = %s
  }
  %s
}
`, res, name, hclList(bootstrap), sasl, rest)
}

// TestAccReadmePattern_plansInOneStep: the README's pattern, for_each over the cluster
// mirror's source_topics, plans and applies in one step on day one (no -target), and again
// after in-place changes of the mirror (sync interval, password rotation, bootstrap
// servers), after a new source topic, and after a source topic is deleted (its mirror
// topic is destroyed, a failover, with a warning naming it). Every apply is followed by an
// empty plan, so `plan -detailed-exitcode` stays quiet.
func TestAccReadmePattern_plansInOneStep(t *testing.T) {
	accTest(t)
	const password = "readme-Pa55-3e1d"
	src, dst, w := saslSource(t, password)
	for _, topic := range []string{"app.orders", "app.payments", "billing"} {
		src.CreateTopic(t, topic, 2, nil)
	}
	kafkatest.ProduceKeyed(t, src.Client(t), "app.orders", 0, 40)
	// The same broker under another name: an in-place change of bootstrap_servers.
	otherName := []string{strings.Replace(src.Addrs()[0], "127.0.0.1", "localhost", 1)}

	mirror := func(version int, interval string, bootstrap []string) string {
		return w.saslMirrorConfig("primary", "primary-to-dr", bootstrap, saslBlock(password, version), fmt.Sprintf(`sync                  = { interval = %q }
  source_topics_pattern = "^app\\."`, interval))
	}
	config := func(version int, interval string, bootstrap []string) string {
		return mirror(version, interval, bootstrap) + `
resource "kafkamirror_mirror_topic" "app" {
  for_each    = toset(kafkamirror_cluster_mirror.primary.source_topics)
  mirror_name = kafkamirror_cluster_mirror.primary.name
  topic       = each.value
}
`
	}
	addr := func(topic string) string { return fmt.Sprintf("kafkamirror_mirror_topic.app[%q]", topic) }
	listed := func(topics ...string) statecheck.StateCheck {
		checks := make([]knownvalue.Check, len(topics))
		for i, topic := range topics {
			checks[i] = knownvalue.StringExact(topic)
		}
		return statecheck.ExpectKnownValue("kafkamirror_cluster_mirror.primary", tfjsonpath.New("source_topics"), knownvalue.ListExact(checks))
	}
	unchanged := func(topics ...string) []plancheck.PlanCheck {
		checks := []plancheck.PlanCheck{plancheck.ExpectResourceAction("kafkamirror_cluster_mirror.primary", plancheck.ResourceActionUpdate)}
		for _, topic := range topics {
			checks = append(checks, plancheck.ExpectResourceAction(addr(topic), plancheck.ResourceActionNoop))
		}
		return checks
	}
	rec := &planRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		Steps: []resource.TestStep{
			{ // Day one: the mirror and its topics in one plan.
				Config: config(1, "30s", src.Addrs()),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("kafkamirror_cluster_mirror.primary", plancheck.ResourceActionCreate),
					plancheck.ExpectKnownValue("kafkamirror_cluster_mirror.primary", tfjsonpath.New("source_topics"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("app.orders"), knownvalue.StringExact("app.payments")})),
					plancheck.ExpectResourceAction(addr("app.orders"), plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction(addr("app.payments"), plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					listed("app.orders", "app.payments"),
					statecheck.ExpectKnownValue(addr("app.orders"), tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)),
					noSecretInState{marker: "primary-to-dr", secret: password, skip: !writeOnlySupported},
				},
			},
			{ // Day two: the sync interval and a password rotation, in place. The running
				// partitions move to the new connection: records written after it arrive.
				Config:           config(2, "45s", src.Addrs()),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: unchanged("app.orders", "app.payments")},
				ConfigStateChecks: []statecheck.StateCheck{stateCheckFunc(func() {
					kafkatest.ProduceKeyed(t, src.Client(t), "app.orders", 40, 25)
					kafkatest.WaitIdentical(t, src, dst, "app.orders", time.Minute)
				})},
			},
			{ // The bootstrap servers, in place.
				Config:           config(2, "45s", otherName),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: unchanged("app.orders", "app.payments")},
				ConfigStateChecks: []statecheck.StateCheck{stateCheckFunc(func() {
					kafkatest.WaitIdentical(t, src, dst, "app.orders", time.Minute)
				})},
			},
			{ // A new source topic: one more mirror topic.
				PreConfig: func() { src.CreateTopic(t, "app.users", 1, nil) },
				Config:    config(2, "45s", otherName),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr("app.users"), plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction(addr("app.orders"), plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{listed("app.orders", "app.payments", "app.users")},
			},
			{ // A source topic deleted: it leaves the listing, and its mirror topic is failed over
				// with a warning that names it.
				PreConfig: func() {
					if res, err := kadm.NewClient(src.Client(t)).DeleteTopics(ctxT(t), "app.payments"); err != nil || res.Error() != nil {
						t.Fatalf("deleting app.payments: %v %v", err, res.Error())
					}
					rec.reset()
				},
				Config: config(2, "45s", otherName),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(addr("app.payments"), plancheck.ResourceActionDestroy),
					plancheck.ExpectResourceAction(addr("app.orders"), plancheck.ResourceActionNoop),
					expectWarning{rec: rec, want: []string{`Failover: topic "app.payments"`, `Topic "app.payments" no longer exists on the source cluster`}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					listed("app.orders", "app.users"),
					stateCheckFunc(func() { w.waitTopicState(t, "primary-to-dr", "app.payments", api.StateStopped) }),
				},
			},
			// The legacy state shim of the post-test destroy cannot hold for_each instances.
			{Config: mirror(2, "45s", otherName)},
		},
	})
}

// TestAccMirrorTopic_renameWithoutMoved: renaming a for_each key without a moved block
// fails at plan time, every time, pointing at moved blocks, and changes nothing; with the
// moved block the topic keeps its owner. A destroy of a resource whose topic another
// owner took over does not stop it, and returns at once.
func TestAccMirrorTopic_renameWithoutMoved(t *testing.T) {
	accTest(t)
	_, _, w, mirror := ordersMirror(t, 2)
	config := func(key string, moved bool) string {
		cfg := mirror + fmt.Sprintf(`
resource "kafkamirror_mirror_topic" "t" {
  for_each    = { %q = "orders" }
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = each.value
}
`, key)
		if moved {
			cfg += `
moved {
  from = kafkamirror_mirror_topic.t["a"]
  to   = kafkamirror_mirror_topic.t["b"]
}
`
		}
		return cfg
	}
	var owner string
	ownerNow := func() (string, string) {
		d, err := w.client.GetTopic(ctxT(t), "m", "orders")
		if err != nil {
			t.Fatal(err)
		}
		done, _ := reached(d.Partitions, api.StateMirroring)
		if !done {
			return d.Owner, "not MIRRORING: " + describePartitions(d.Partitions)
		}
		return d.Owner, ""
	}
	unchanged := func() {
		if got, why := ownerNow(); got != owner || why != "" {
			t.Fatalf("the topic changed: owner %q (was %q) %s", got, owner, why)
		}
	}
	renamed := resource.TestStep{
		PreConfig:   unchanged,
		Config:      config("b", false),
		ExpectError: wrapped(`Mirror topic managed by another resource`, `moved {`, `from = <old address>`),
	}
	var destroyStart time.Time
	rec := &planRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config: config("a", false),
				ConfigStateChecks: []statecheck.StateCheck{stateCheckFunc(func() {
					var why string
					if owner, why = ownerNow(); owner == "" || why != "" {
						t.Fatalf("after the create: owner %q %s", owner, why)
					}
				})},
			},
			renamed,
			renamed, // the same outcome again
			{ // With the moved block: nothing to do, and the owner stays.
				PreConfig: unchanged,
				Config:    config("b", true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(`kafkamirror_mirror_topic.t["b"]`, plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{stateCheckFunc(func() {
					unchanged()
				}), statecheck.ExpectKnownValue(`kafkamirror_mirror_topic.t["b"]`, tfjsonpath.New("owner_id"), knownvalue.NotNull())},
			},
			{ // Another owner took the topic over (released, started by someone else): the
				// destroy leaves it mirroring and does not wait.
				PreConfig: func() {
					for _, req := range []struct {
						action string
						body   api.TopicsRequest
					}{
						{api.ActionStop, api.TopicsRequest{Topics: []string{"orders"}, Owner: owner, Release: true}},
						{api.ActionStart, api.TopicsRequest{Topics: []string{"orders"}, Owner: "someone-else"}},
					} {
						if req.action == api.ActionStart {
							w.waitTopicState(t, "m", "orders", api.StateStopped)
						}
						res, err := w.client.TopicCommand(ctxT(t), "m", req.action, req.body)
						if err != nil || res[0].Err() != nil {
							t.Fatalf("%s: %v %+v", req.action, err, res)
						}
					}
					w.waitTopicState(t, "m", "orders", api.StateMirroring)
					owner = "someone-else"
					rec.reset()
					destroyStart = time.Now()
				},
				Config: mirror,
				ConfigStateChecks: []statecheck.StateCheck{stateCheckFunc(func() {
					if d := time.Since(destroyStart); d > time.Minute {
						t.Errorf("the destroy took %v", d)
					}
					unchanged()
					if !strings.Contains(strings.Join(rec.all(), "\n"), `Topic "orders" not stopped: another resource manages it`) {
						t.Errorf("no warning that the topic was left alone: %q", rec.all())
					}
				})},
			},
			{ // Hand it back, so the mirror can go at the end.
				PreConfig: func() {
					res, err := w.client.TopicCommand(ctxT(t), "m", api.ActionStop, api.TopicsRequest{Topics: []string{"orders"}, Owner: owner, Release: true})
					if err != nil || res[0].Err() != nil {
						t.Fatalf("stop: %v %+v", err, res)
					}
					w.waitTopicState(t, "m", "orders", api.StateStopped)
				},
				Config: mirror,
			},
		},
	})
}

// TestAccMirrorTopic_importPlansClean: an import (terraform import, and an import block)
// plans no change with the timeouts of the configuration; a stopped topic plans
// without warnings.
func TestAccMirrorTopic_importPlansClean(t *testing.T) {
	accTest(t)
	src, dst, _, mirror := ordersMirror(t, 2)
	kafkatest.ProduceKeyed(t, src.Client(t), "orders", 0, 20)
	config := func(state string) string {
		return mirror + fmt.Sprintf(`
resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = "orders"
  state       = %q
  timeouts    = { delete = "10m" }
}
`, state)
	}
	rec := &planRecorder{}
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_5_0)}, // import blocks
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config: config("mirroring"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("timeouts"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"create": knownvalue.StringExact("10m"), "update": knownvalue.StringExact("10m"), "delete": knownvalue.StringExact("10m"),
					})),
					stateCheckFunc(func() { kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute) }),
				},
			},
			{RefreshState: true},
			{ // terraform import: the same state, owner and timeouts included.
				Config:                  config("mirroring"),
				ResourceName:            topicAddr,
				ImportState:             true,
				ImportStateId:           "m/orders",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: offsetAtAttrs(2),
			},
			{ // An import block: the plan is a no-op import.
				Config:          config("mirroring"),
				ResourceName:    topicAddr,
				ImportState:     true,
				ImportStateId:   "m/orders",
				ImportStateKind: resource.ImportBlockWithID,
			},
			{Config: config("stopped")},
			{ // Nothing changes: no failover warning, nor any other.
				PreConfig: rec.reset,
				Config:    config("stopped"),
				PlanOnly:  true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					expectNoWarnings{rec: rec},
				}},
			},
		},
	})
}

// TestAccMirrorTopic_importCommandPlansClean: after `terraform import` into the state the
// configuration's next plan is empty.
func TestAccMirrorTopic_importCommandPlansClean(t *testing.T) {
	accTest(t)
	_, _, w, mirror := ordersMirror(t, 1)
	topic := mirror + `
resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = "orders"
  timeouts    = { delete = "10m" }
}
`
	resource.Test(t, resource.TestCase{
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_7_0)}, // removed blocks
		ProtoV6ProviderFactories: (&planRecorder{}).factories("kafkamirror"),
		Steps: []resource.TestStep{
			{Config: topic},
			{ // Forget the topic without stopping it, as `terraform state rm` would.
				Config: mirror + `
removed {
  from = kafkamirror_mirror_topic.orders
  lifecycle {
    destroy = false
  }
}
`,
				ConfigStateChecks: []statecheck.StateCheck{stateCheckFunc(func() {
					w.waitTopicState(t, "m", "orders", api.StateMirroring)
				})},
			},
			{
				Config:             topic,
				ResourceName:       topicAddr,
				ImportState:        true,
				ImportStateId:      "m/orders",
				ImportStatePersist: true,
			},
			{Config: topic, PlanOnly: true},
			// The post-test destroy would not see the imported instance.
			{Config: mirror},
		},
	})
}

// TestAccClusterMirror_wrongPassword: a password the source refuses fails the plan's
// listing and the create at once, saying "authentication failed" with the mechanism and
// the user, not "context deadline exceeded" after minutes of retries.
func TestAccClusterMirror_wrongPassword(t *testing.T) {
	accTest(t)
	src, _, w := saslSource(t, "right-Pa55-7c2a")
	config := func(pattern string) string {
		return w.saslMirrorConfig("m", "m", src.Addrs(), saslBlock("wrong-Pa55-7c2a", 1), pattern)
	}
	start := time.Now()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: (&planRecorder{}).factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config: config(""),
				ExpectError: wrapped(`Cannot create cluster mirror`, `SASL_AUTHENTICATION_FAILED`, `authentication failed`,
					`refused SASL mechanism SCRAM-SHA-256 for user "admin"`, `password_wo_version`),
			},
			{
				Config: config(`source_topics_pattern = ".*"`),
				ExpectError: wrapped(`Cannot list the source topics`, `authentication failed`,
					`SCRAM-SHA-256 for user "admin"`),
			},
		},
	})
	if d := time.Since(start); d > 40*time.Second {
		t.Fatalf("the refusals took %v", d)
	}
}
