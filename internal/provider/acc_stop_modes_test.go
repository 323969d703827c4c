package provider

// Acceptance tests of stop_mode: a promote and a failover by `terraform apply` move a
// consumer group to the destination at exactly the next record; a promote the worker
// cannot finish stops nothing and leaves the state as it was; the plan names the mode.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// consumed is a record a test consumer read: where it was and what it held.
type consumed struct {
	partition int32
	offset    int64
	value     string
}

// consumeAndCommit reads n records of topic as group on c and commits after them.
func consumeAndCommit(t *testing.T, c *kafkatest.Cluster, group, topic string, n int) []consumed {
	t.Helper()
	var got []consumed
	for _, r := range c.ConsumeAndCommit(t, group, topic, n) {
		got = append(got, consumed{r.Partition, r.Offset, string(r.Value)})
	}
	return got
}

// checkContinues checks, record by record, that the consumer on the destination (after)
// continued exactly where the consumer on the source (before) committed: on every
// partition the offsets run on without a gap or a repeat, and together the two read every
// record of the source once.
func checkContinues(t *testing.T, before, after []consumed, total int, how string) {
	t.Helper()
	next := map[int32]int64{}
	for _, r := range before {
		if want, ok := next[r.partition]; ok && r.offset != want {
			t.Fatalf("on the source, partition %d read offset %d after %d", r.partition, r.offset, want-1)
		}
		next[r.partition] = r.offset + 1
	}
	seen := map[string]bool{}
	for _, r := range before {
		seen[r.value] = true
	}
	for i, r := range after {
		want := next[r.partition] // 0 for a partition the group never read on the source
		if r.offset != want {
			t.Fatalf("after the %s, destination record %d (%q) is partition %d offset %d; the group's next record there is offset %d "+
				"(%s)", how, i, r.value, r.partition, r.offset, want, map[bool]string{true: "skipped", false: "repeated"}[r.offset > want])
		}
		next[r.partition] = r.offset + 1
		if seen[r.value] {
			t.Fatalf("%q read twice across the %s", r.value, how)
		}
		seen[r.value] = true
	}
	if len(seen) != total {
		t.Fatalf("%d distinct records read across the %s, want %d", len(seen), how, total)
	}
}

// stopModeConfig is the mirror "m" (its periodic group sync far too slow to help: only the
// stop's own sync can) and the topic "orders" with state and stop settings (HCL lines).
func stopModeConfig(w *testWorker, src *kafkatest.Cluster, state string, stop ...string) string {
	extra := ""
	for _, s := range stop {
		extra += "  " + s + "\n"
	}
	return w.providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "m" {
  name   = "m"
  source = { bootstrap_servers = %s }
  sync   = { interval = "24h" }
}

resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = "orders"
  state       = %q
%s}
`, hclList(src.Addrs()), state, extra)
}

// TestAccMirrorTopic_stopModesMoveConsumerGroups: a consumer group commits on the source
// mid-stream; `terraform apply` stops the topic with stop_mode "promote" (records still
// arriving before the apply: the promote waits for them) or, separately, "failover" (the
// default); a consumer of the group on the destination continues at exactly the next
// record of every partition. The plan names the mode; the failover's state imports clean.
func TestAccMirrorTopic_stopModesMoveConsumerGroups(t *testing.T) {
	accTest(t)
	for _, mode := range []string{api.StopPromote, api.StopFailover} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			stopModeMovesGroup(t, mode)
		})
	}
}

func stopModeMovesGroup(t *testing.T, mode string) {
	const group, total = "billing", 400
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "orders", 3, nil)
	w := startWorker(t, dst)
	prod := src.Client(t)
	kafkatest.ProduceKeyed(t, prod, "orders", 0, total/2)

	var stop []string
	warning := `Failover: topic "orders" stops mirroring from cluster mirror "m"`
	if mode == api.StopPromote {
		stop = []string{`stop_mode       = "promote"`, `promote_timeout = "2m"`}
		warning = `Promote: topic "orders" stops mirroring from cluster mirror "m" once caught up`
	} // failover: the default
	var read []consumed
	rec := &planRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config: stopModeConfig(w, src, "mirroring", stop...),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("stop_mode"), knownvalue.StringExact(mode)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("stop_mode"), knownvalue.StringExact(mode)),
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("promote_timeout"),
						knownvalue.StringExact(map[string]string{api.StopPromote: "2m", api.StopFailover: "1m"}[mode])),
				},
			},
			{ // The failover state imports clean: its stop settings are the defaults.
				SkipFunc:          func() (bool, error) { return mode != api.StopFailover, nil },
				Config:            stopModeConfig(w, src, "mirroring", stop...),
				ResourceName:      topicAddr,
				ImportState:       true,
				ImportStateId:     "m/orders",
				ImportStateVerify: true,
				// The partitions' offsets and lag move on between the refreshes.
				ImportStateVerifyIgnore: []string{"partitions"},
			},
			{
				PreConfig: func() {
					kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute)
					// The group reads part of what is there and commits, mid-stream; more
					// records arrive.
					read = consumeAndCommit(t, src, group, "orders", 123)
					kafkatest.ProduceKeyed(t, prod, "orders", total/2, total/2)
					if mode == api.StopFailover {
						kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute) // a failover takes what is there
					}
					rec.reset()
				},
				Config: stopModeConfig(w, src, "stopped", stop...),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(topicAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("stop_mode"), knownvalue.StringExact(mode)),
					expectWarning{rec: rec, want: []string{warning, `stop_mode = "` + mode + `"`}},
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("state"), knownvalue.StringExact(api.DesiredStopped)),
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateStopped, 3)),
					stateCheckFunc(func() {
						kafkatest.WaitIdentical(t, src, dst, "orders", time.Minute)
						after := consumeAndCommit(t, dst, group, "orders", total-len(read))
						checkContinues(t, read, after, total, mode)
						for _, w := range rec.all() {
							if strings.Contains(w, "consumer group offsets may be behind") {
								t.Errorf("the %s warned about the final group offset sync: %s", mode, w)
							}
						}
					}),
				},
			},
		},
	})
}

// TestAccMirrorTopic_promoteRefused: a promote the worker cannot finish (the topic is
// paused, so its partitions never become MIRRORING with lag 0) fails the apply with the
// worker's reason per partition, stops nothing, and leaves the state as it was: the next
// plan is empty. Out-of-range promote timeouts fail at plan time.
func TestAccMirrorTopic_promoteRefused(t *testing.T) {
	accTest(t)
	src, _, w, _ := ordersMirror(t, 2)
	kafkatest.ProduceKeyed(t, src.Client(t), "orders", 0, 20)
	promote := []string{`stop_mode       = "promote"`, `promote_timeout = "1s"`}
	rec := &planRecorder{}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: rec.factories("kafkamirror"),
		Steps: []resource.TestStep{
			{
				Config:      stopModeConfig(w, src, "paused", `stop_mode = "promote"`, `promote_timeout = "5m"`),
				PlanOnly:    true,
				ExpectError: wrapped(`Invalid duration`, `"5m" is out of range: it must be from 1s to 4m`),
			},
			{
				Config:      stopModeConfig(w, src, "paused", `stop_mode = "promoted"`),
				PlanOnly:    true,
				ExpectError: wrapped(`stop_mode`, `value must be one of`),
			},
			{
				Config: stopModeConfig(w, src, "paused", promote...),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StatePaused, 2)),
				},
			},
			{
				PreConfig: rec.reset,
				Config:    stopModeConfig(w, src, "stopped", promote...),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectKnownValue(topicAddr, tfjsonpath.New("stop_mode"), knownvalue.StringExact(api.StopPromote)),
					expectWarning{rec: rec, want: []string{`Promote: topic "orders"`, `A promote needs every partition MIRRORING`, `0 (PAUSED)`}},
				}},
				ExpectError: wrapped(`Cannot promote mirror topic "orders": nothing was stopped`, `promote_timeout = "1s"`,
					`partition 0 is PAUSED`, `stop_mode = "failover"`),
			},
			{ // Nothing stopped, and the state is as it was: the paused configuration plans no change.
				PreConfig: func() {
					t.Helper()
					d, err := w.client.GetTopic(ctxT(t), "m", "orders")
					if err != nil || d.DesiredState != api.DesiredPaused {
						t.Fatalf("after the refused promote the worker has %+v, %v; want the topic paused", d, err)
					}
				},
				Config:   stopModeConfig(w, src, "paused", promote...),
				PlanOnly: true,
			},
			{ // A failover stops it.
				Config: stopModeConfig(w, src, "stopped", `stop_mode = "failover"`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(topicAddr, tfjsonpath.New("partitions"), partitionsIn(api.StateStopped, 2)),
				},
			},
		},
	})
}
