package provider

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// answerLosingProxy stands between the provider and a worker like a load balancer whose
// connection dropped after the worker took a command: the first request of each given route
// reaches the worker, and its answer is replaced by a 502, so the client retries it.
type answerLosingProxy struct {
	*httptest.Server
	mu   sync.Mutex
	lose map[string]bool // route → its answer is still to be lost
	lost map[string]int  // route → the status of the worker's lost answer
}

func newAnswerLosingProxy(t *testing.T, workerURL string, routes ...string) *answerLosingProxy {
	t.Helper()
	target, err := url.Parse(workerURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &answerLosingProxy{lose: map[string]bool{}, lost: map[string]int{}}
	for _, r := range routes {
		p.lose[r] = true
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := r.Method + " " + r.URL.Path
		p.mu.Lock()
		lose := p.lose[route]
		p.lose[route] = false
		p.mu.Unlock()
		if !lose {
			rp.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		p.mu.Lock()
		p.lost[route] = rec.Code
		p.mu.Unlock()
		http.Error(w, "the answer was lost on the way", http.StatusBadGateway)
	}))
	t.Cleanup(p.Close)
	return p
}

// TestAccRetriedApplySucceeds: the worker takes the create of a mirror and the start of a
// topic, but their answers are lost on the way back; the provider's client retries them,
// the worker answers the repeats as done, and the apply succeeds with one mirror and a
// mirrored topic (create and start are idempotent).
func TestAccRetriedApplySucceeds(t *testing.T) {
	accTest(t)
	src, dst, w, _ := ordersMirror(t, 2)
	kafkatest.ProduceKeyed(t, src.Client(t), "orders", 0, 20)
	create, start := "POST /v1/mirrors", "POST /v1/mirrors/m/topics/start"
	lb := newAnswerLosingProxy(t, w.url, create, start)
	config := (&testWorker{url: lb.URL}).providerBlock("") + fmt.Sprintf(`
resource "kafkamirror_cluster_mirror" "m" {
  name   = "m"
  source = { bootstrap_servers = %s }
}

resource "kafkamirror_mirror_topic" "orders" {
  mirror_name = kafkamirror_cluster_mirror.m.name
  topic       = "orders"
}
`, hclList(src.Addrs()))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: (&planRecorder{}).factories("kafkamirror"),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("kafkamirror_mirror_topic.orders", tfjsonpath.New("partitions"), partitionsIn(api.StateMirroring, 2)),
				stateCheckFunc(func() {
					lb.mu.Lock()
					defer lb.mu.Unlock()
					for _, route := range []string{create, start} {
						if code := lb.lost[route]; code < 200 || code > 299 {
							t.Errorf("%s: the worker's first answer was %d, want a success the client never saw", route, code)
						}
					}
					mirrors, err := w.client.ListMirrors(ctxT(t))
					if err != nil || len(mirrors) != 1 || mirrors[0].TopicCount != 1 {
						t.Errorf("mirrors after the retried apply: %+v, %v; want m with one topic", mirrors, err)
					}
					kafkatest.WaitIdentical(t, src, dst, "orders", 60*time.Second)
				}),
			},
		}},
	})
}
