package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestWorkerLifecycle drives a mirror through create, start, pause, resume, stop and
// delete over the API and checks describe, lag, the CLI tables and the state gauges.
func TestWorkerLifecycle(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"orders", 3, 300})

	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)

	m, err := c.CreateMirror(ctx, api.CreateMirrorRequest{
		Name: "m1", Source: api.SourceConnection{BootstrapServers: src.Addrs()}, SourceClusterID: src.ID(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "m1" || m.SourceClusterID != src.ID() || m.TopicCount != 0 || strings.Join(m.Source.BootstrapServers, ",") != strings.Join(src.Addrs(), ",") {
		t.Fatalf("created %+v", m)
	}
	// A repeat (a retried create whose answer was lost) is done; other settings under the
	// name are refused.
	if again, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m1", Source: api.SourceConnection{BootstrapServers: src.Addrs()}}); err != nil || !again.CreatedAt.Equal(m.CreatedAt) {
		t.Fatalf("repeated create: %+v, %v; want the mirror created before", again, err)
	}
	_, err = c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m1", Source: api.SourceConnection{BootstrapServers: src.Addrs()}, Sync: &api.SyncSettings{Interval: "5m"}})
	wantAPIError(t, "create with other settings", err, 409, api.CodeClusterMirrorAlreadyExists)

	topics, err := c.SourceTopics(ctx, "m1", "^ord")
	if err != nil || strings.Join(topics, ",") != "orders" {
		t.Fatalf("source topics %v, %v", topics, err)
	}

	res, err := c.StartTopics(ctx, "m1", []string{"orders"}, api.DivergenceFail)
	if err != nil || len(res) != 1 || res[0].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	d := waitTopic(t, c, "m1", "orders", "MIRRORING with lag 0", caughtUp(api.StateMirroring))
	if d.DesiredState != api.DesiredMirroring || d.MirrorName != "m1" || len(d.Partitions) != 3 {
		t.Fatalf("described %+v", d)
	}
	var total int64
	for _, p := range d.Partitions {
		total += p.DestinationOffset
	}
	if total != 300 {
		t.Fatalf("destination offsets sum to %d, want 300", total)
	}

	// Lag reaches 0 again after more records.
	kafkatest.ProduceKeyed(t, prod, "orders", 300, 90)
	waitTopic(t, c, "m1", "orders", "lag 0 after more records", caughtUp(api.StateMirroring))

	// The state gauges and lag per partition.
	s := scrape(t, w.URL)
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"kafkamirror_partitions", []string{"state", "MIRRORING"}, 3},
		{"kafkamirror_partitions", []string{"state", "PAUSED"}, 0},
		{"kafkamirror_partitions", []string{"state", "FAILED"}, 0},
		{"kafkamirror_mirroring_partition_state", nil, 3},
		{"kafkamirror_paused_partition_state", nil, 0},
		{"kafkamirror_stopped_partition_state", nil, 0},
		{"kafkamirror_failed_partition_state", nil, 0},
		{"kafkamirror_partition_lag", []string{"mirror", "m1", "topic", "orders", "partition", "2"}, 0},
		{"kafkamirror_max_lag", []string{"mirror", "m1"}, 0},
		{"kafkamirror_topic_config_sync_error", []string{"mirror", "m1"}, 0},
		{"kafkamirror_topic_metadata_refresh_error", []string{"mirror", "m1"}, 0},
	} {
		if v, ok := metric(s, want.name, want.labels...); !ok || v != want.value {
			t.Errorf("metric %s%v = %v (present %v), want %v", want.name, want.labels, v, ok, want.value)
		}
	}
	if v, _ := metric(s, "kafkamirror_mirrored_records_total", "mirror", "m1", "topic", "orders"); v < 390 {
		t.Errorf("kafkamirror_mirrored_records_total = %v, want at least 390", v)
	}
	if v, _ := metric(s, "kafkamirror_produce_latency_seconds_count"); v == 0 {
		t.Error("no produce latency observed")
	}
	// One fetcher per source broker (kfake's only broker is 0) carries every partition.
	fetches, _ := metric(s, "kafkamirror_source_fetches_total", "broker", "0")
	partitions, _ := metric(s, "kafkamirror_source_fetch_partitions_total", "broker", "0")
	if bytes, _ := metric(s, "kafkamirror_source_fetch_bytes_total", "broker", "0"); fetches == 0 || partitions < fetches || bytes == 0 {
		t.Errorf("source fetch metrics of broker 0: %v fetches, %v partitions, %v bytes", fetches, partitions, bytes)
	}
	// The fetch memory: what the partitions hold and the fetches in flight may ask for, within
	// fetch_memory_bytes (the default here).
	if v, ok := metric(s, "kafkamirror_fetch_memory_bytes"); !ok || v < 0 || v > 256<<20 {
		t.Errorf("kafkamirror_fetch_memory_bytes = %v (present %v), want 0 to 256 MiB", v, ok)
	}
	// One produce pipeline per destination broker: every batch counted as a partition of a request.
	produces, _ := metric(s, "kafkamirror_destination_produces_total", "broker", "0")
	produced, _ := metric(s, "kafkamirror_destination_produce_partitions_total", "broker", "0")
	if bytes, _ := metric(s, "kafkamirror_destination_produce_bytes_total", "broker", "0"); produces == 0 || produced < produces || bytes == 0 {
		t.Errorf("destination produce metrics of broker 0: %v requests, %v partitions, %v bytes", produces, produced, bytes)
	}

	// The CLI's tables, through the API.
	out, code := w.cli(t, "describe")
	if code != 0 {
		t.Fatalf("describe exit code %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "MIRROR TOPIC PARTITION SOURCE-OFFSET DESTINATION-OFFSET LAG STATE NOTE" {
		t.Fatalf("describe output:\n%s", out)
	}
	row := regexp.MustCompile(`^m1 orders [0-2] (\d+) (\d+) 0 MIRRORING$`)
	for _, l := range lines[1:] {
		f := row.FindStringSubmatch(strings.Join(strings.Fields(l), " "))
		if f == nil || f[1] != f[2] {
			t.Fatalf("describe row %q", l)
		}
	}
	out, code = w.cli(t, "list")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "MIRROR TOPICS SOURCE-CLUSTER-ID SOURCE-BOOTSTRAP" ||
		strings.Join(strings.Fields(lines[1]), " ") != "m1 1 source-cluster "+strings.Join(src.Addrs(), ",") {
		t.Fatalf("list (exit %d):\n%s", code, out)
	}
	out, code = w.cli(t, "describe", "--mirror", "m1", "--json")
	var described []api.Topic
	if err := json.Unmarshal([]byte(out), &described); code != 0 || err != nil || len(described) != 1 || len(described[0].Partitions) != 3 {
		t.Fatalf("describe --json (exit %d, %v):\n%s", code, err, out)
	}
	out, code = w.cli(t, "describe", "--failed")
	if code != 0 || strings.Join(strings.Fields(out), " ") != "MIRROR TOPIC PARTITION RETRY ERROR" {
		t.Fatalf("describe --failed (exit %d):\n%s", code, out)
	}
	if _, code = w.cli(t, "describe", "--mirror", "nope"); code != 1 {
		t.Fatalf("describe of an unknown mirror: exit code %d, want 1", code)
	}

	// A mirror with a mirrored topic cannot be deleted.
	wantAPIError(t, "delete while mirroring", c.DeleteMirror(ctx, "m1"), 409, api.CodeClusterMirrorNotEmpty)

	// Pause: no fetching, the lag grows by what is produced meanwhile.
	if res, err = c.PauseTopics(ctx, "m1", []string{"orders"}); err != nil || res[0].Err() != nil {
		t.Fatalf("pause: %+v, %v", res, err)
	}
	d = waitTopic(t, c, "m1", "orders", "PAUSED", inState(api.StatePaused))
	if d.DesiredState != api.DesiredPaused || d.MirrorName != "m1.paused" {
		t.Fatalf("paused topic described %+v", d)
	}
	kafkatest.ProduceKeyed(t, prod, "orders", 390, 60)
	d = waitTopic(t, c, "m1", "orders", "lag while paused", func(p api.Partition) bool {
		return p.State == api.StatePaused && p.Lag == p.SourceOffset-p.DestinationOffset
	})
	var lag int64
	for _, p := range d.Partitions {
		lag += p.Lag
	}
	if lag != 60 {
		t.Fatalf("total lag while paused %d, want the 60 records produced meanwhile", lag)
	}
	s = scrape(t, w.URL)
	if v, _ := metric(s, "kafkamirror_paused_partition_state"); v != 3 {
		t.Errorf("kafkamirror_paused_partition_state = %v, want 3", v)
	}
	if v, _ := metric(s, "kafkamirror_mirroring_partition_state"); v != 0 {
		t.Errorf("kafkamirror_mirroring_partition_state = %v while paused", v)
	}
	if v, _ := metric(s, "kafkamirror_max_lag", "mirror", "m1"); v <= 0 {
		t.Errorf("kafkamirror_max_lag = %v while paused with records waiting", v)
	}

	// Resume: mirroring catches up.
	if res, err = c.ResumeTopics(ctx, "m1", []string{"orders"}); err != nil || res[0].Err() != nil {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	waitTopic(t, c, "m1", "orders", "MIRRORING after resume", caughtUp(api.StateMirroring))

	// Stop (failover): STOPPED, last mirrored offsets recorded, logs identical.
	if res, err = c.StopTopics(ctx, "m1", []string{"orders"}); err != nil || res[0].Err() != nil {
		t.Fatalf("stop: %+v, %v", res, err)
	}
	d = waitTopic(t, c, "m1", "orders", "STOPPED", inState(api.StateStopped))
	if d.DesiredState != api.DesiredStopped || d.MirrorName != "m1.removed" {
		t.Fatalf("stopped topic described %+v", d)
	}
	for _, p := range d.Partitions {
		if p.LastMirroredOffset != p.DestinationOffset {
			t.Fatalf("partition %d: last mirrored offset %d, destination end %d", p.Partition, p.LastMirroredOffset, p.DestinationOffset)
		}
	}
	kafkatest.WaitIdentical(t, src, dst, "orders", 30*time.Second)
	res, err = c.StopTopics(ctx, "m1", []string{"orders"})
	if err != nil || res[0].ErrorCode != api.CodeMirrorTopicAlreadyStopped {
		t.Fatalf("second stop: %+v, %v", res, err)
	}
	if v, _ := metric(scrape(t, w.URL), "kafkamirror_stopped_partition_state"); v != 3 {
		t.Errorf("kafkamirror_stopped_partition_state = %v, want 3", v)
	}

	// One log line per state transition, with the KIP's state names.
	transitions := map[string]bool{}
	for _, l := range strings.Split(w.Stderr.String(), "\n") {
		var e struct {
			Msg, Mirror, Topic, From, To, Reason string
			Partition                            *int32
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == "partition state changed" && e.Mirror == "m1" && e.Topic == "orders" && e.Partition != nil && e.Reason != "" {
			transitions[fmt.Sprintf("%d:%s>%s", *e.Partition, e.From, e.To)] = true
		}
	}
	for _, want := range []string{"0:UNKNOWN>PREPARING", "0:PREPARING>MIRRORING", "1:MIRRORING>PAUSING", "1:PAUSING>PAUSED", "2:PAUSED>MIRRORING", "2:STOPPING>STOPPED"} {
		if !transitions[want] {
			t.Errorf("no log line for the transition %s; logged: %v", want, transitions)
		}
	}

	// Delete.
	if err := c.DeleteMirror(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetMirror(ctx, "m1")
	wantAPIError(t, "describe after delete", err, 404, api.CodeUnknownClusterMirror)
	if ms, err := c.ListMirrors(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("list after delete: %+v, %v", ms, err)
	}
}

// TestWorkerAPIErrors checks authentication and the documented error codes.
func TestWorkerAPIErrors(t *testing.T) {
	t.Parallel()
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "present", 1, nil)
	w := startWorker(t, workerEnv(dst))
	c, ctx := w.Client, ctxT(t)

	// Authentication: without a token, with a wrong one, and on unknown /v1 paths.
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/v1/mirrors", ""},
		{"GET", "/v1/mirrors", "wrong-token"},
		{"GET", "/v1/mirrors", testToken + "x"},
		{"POST", "/v1/mirrors", ""},
		{"DELETE", "/v1/mirrors/m", "wrong-token"},
		{"GET", "/v1/nothing-here", ""},
	} {
		status, body := w.raw(t, tc.method, tc.path, tc.token, "{}")
		if status != 401 || !strings.Contains(string(body), `"error_code":"AUTHENTICATION_FAILED"`) {
			t.Errorf("%s %s with token %q: %d %s", tc.method, tc.path, tc.token, status, body)
		}
	}
	bad, err := api.NewClient(api.ClientConfig{URL: w.URL, Token: "wrong-token"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.ListMirrors(ctx)
	wantAPIError(t, "client with a wrong token", err, 401, api.CodeAuthenticationFailed)
	// Health and metrics need no token.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, body := w.raw(t, "GET", p, "", ""); status != 200 {
			t.Errorf("GET %s: %d %s", p, status, body)
		}
	}

	src0 := fmt.Sprintf(`"source":{"bootstrap_servers":[%q]}`, src.Addrs()[0])
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, mention            string
	}{
		{"malformed JSON", "POST", "/v1/mirrors", `{"name":`, 400, api.CodeInvalidRequest, "malformed JSON"},
		{"not JSON", "POST", "/v1/mirrors", `name=m`, 400, api.CodeInvalidRequest, "malformed JSON"},
		{"empty body", "POST", "/v1/mirrors", ``, 400, api.CodeInvalidRequest, "empty"},
		{"two objects", "POST", "/v1/mirrors", `{"name":"a",` + src0 + `} {}`, 400, api.CodeInvalidRequest, "exactly one"},
		{"unknown field", "POST", "/v1/mirrors", `{"name":"a",` + src0 + `,"colour":"red"}`, 400, api.CodeInvalidRequest, `"colour"`},
		{"unknown nested field", "POST", "/v1/mirrors", `{"name":"a","source":{"bootstrap_servers":["h:1"],"sasl":{"mechanism":"PLAIN","username":"u","pasword":"x"}}}`, 400, api.CodeInvalidRequest, `"pasword"`},
		{"wrong type", "POST", "/v1/mirrors", `{"name":5}`, 400, api.CodeInvalidRequest, `"name"`},
		{"too large", "POST", "/v1/mirrors", `{"name":"` + strings.Repeat("x", 2<<20) + `"}`, 413, api.CodeInvalidRequest, "larger than"},
		{"invalid mirror name", "POST", "/v1/mirrors", `{"name":"bad name!",` + src0 + `}`, 400, api.CodeInvalidClusterMirrorName, "bad name!"},
		{"reserved suffix", "POST", "/v1/mirrors", `{"name":"m.paused",` + src0 + `}`, 400, api.CodeInvalidClusterMirrorName, ".paused"},
		{"invalid name in path", "GET", "/v1/mirrors/bad%20name", ``, 400, api.CodeInvalidClusterMirrorName, "bad name"},
		{"bad sync interval", "POST", "/v1/mirrors", `{"name":"a",` + src0 + `,"sync":{"interval":"often"}}`, 400, api.CodeInvalidClusterMirrorConfig, "sync.interval"},
		{"bad mechanism", "POST", "/v1/mirrors", `{"name":"a","source":{"bootstrap_servers":["h:1"],"sasl":{"mechanism":"NOPE","username":"u"}}}`, 400, api.CodeInvalidClusterMirrorConfig, "NOPE"},
		{"secret without a secret key", "POST", "/v1/mirrors", `{"name":"a","source":{"bootstrap_servers":["h:1"],"sasl":{"mechanism":"PLAIN","username":"u","password":"pw"}}}`, 400, api.CodeInvalidClusterMirrorConfig, "KAFKAMIRROR_SECRET_KEY"},
		{"unknown mirror", "GET", "/v1/mirrors/nope", ``, 404, api.CodeUnknownClusterMirror, "nope"},
		{"unknown mirror topics", "POST", "/v1/mirrors/nope/topics/start", `{"topics":["present"]}`, 404, api.CodeUnknownClusterMirror, "nope"},
		{"unknown mirror topic", "GET", "/v1/mirrors/nope/topics/present", ``, 404, api.CodeUnknownClusterMirror, "nope"},
		{"unknown mirror delete", "DELETE", "/v1/mirrors/nope", ``, 404, api.CodeUnknownClusterMirror, "nope"},
		{"method not allowed", "PUT", "/v1/mirrors", `{}`, 405, api.CodeInvalidRequest, "PUT"},
		{"no route", "GET", "/v1/mirrorz", ``, 404, api.CodeInvalidRequest, "/v1/mirrorz"},
	} {
		status, body := w.raw(t, tc.method, tc.path, testToken, tc.body)
		var eb api.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || status != tc.status || eb.ErrorCode != tc.code || !strings.Contains(eb.Message, tc.mention) {
			t.Errorf("%s: %d %s, want %d %s mentioning %q", tc.name, status, workertest.Tail(string(body), 300), tc.status, tc.code, tc.mention)
		}
	}

	// Against a real mirror: the source cluster id check, topic errors per topic.
	_, err = c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m", Source: api.SourceConnection{BootstrapServers: src.Addrs()}, SourceClusterID: "someone-else"})
	wantAPIError(t, "wrong source cluster id", err, 409, api.CodeSourceClusterIDMismatch)
	if _, err := c.CreateMirror(ctx, api.CreateMirrorRequest{Name: "m", Source: api.SourceConnection{BootstrapServers: src.Addrs()}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.StartTopics(ctx, "m", []string{"bad topic!", "absent", "present"}, "")
	if err != nil || len(res) != 3 {
		t.Fatalf("start: %+v, %v", res, err)
	}
	for i, want := range []string{api.CodeInvalidTopic, api.CodeUnknownTopicOrPartition, ""} {
		if res[i].ErrorCode != want {
			t.Errorf("start result %d: %+v, want %q", i, res[i], want)
		}
	}
	res, err = c.StartTopics(ctx, "m", []string{"present"}, "")
	if err != nil || res[0].ErrorCode != "" {
		t.Fatalf("repeated start: %+v, %v; want done", res, err)
	}
	res, err = c.StartTopics(ctx, "m", []string{"present"}, "recreate")
	if err != nil || res[0].ErrorCode != api.CodeTopicAlreadyInClusterMirror {
		t.Fatalf("start with another divergence: %+v, %v", res, err)
	}
	res, err = c.PauseTopics(ctx, "m", []string{"absent"})
	if err != nil || res[0].ErrorCode != api.CodeTopicNotInClusterMirror {
		t.Fatalf("pause of a topic not in the mirror: %+v, %v", res, err)
	}
	_, err = c.GetTopic(ctx, "m", "absent")
	wantAPIError(t, "describe a topic not in the mirror", err, 404, api.CodeTopicNotInClusterMirror)
	_, err = c.StartTopics(ctx, "m", nil, "")
	wantAPIError(t, "no topics", err, 400, api.CodeInvalidRequest)
	_, err = c.StartTopics(ctx, "m", []string{"present"}, "sometimes")
	wantAPIError(t, "bad divergence", err, 400, api.CodeInvalidRequest)
	if status, body := w.raw(t, "POST", "/v1/mirrors/m/topics/stop", testToken, `{"topics":["present"],"divergence":"recreate"}`); status != 400 {
		t.Errorf("divergence on stop: %d %s", status, body)
	}
	_, err = c.SourceTopics(ctx, "m", "([")
	wantAPIError(t, "bad pattern", err, 400, api.CodeInvalidRequest)
	if m, err := c.UpdateMirror(ctx, "m", api.UpdateMirrorRequest{Sync: &api.SyncSettings{Interval: "45s"}}); err != nil || m.Sync.Interval != "45s" || len(m.Source.BootstrapServers) == 0 {
		t.Fatalf("sync-only update keeps the source: %+v, %v", m, err)
	}
	m, err := c.UpdateMirror(ctx, "m", api.UpdateMirrorRequest{
		Source: &api.SourceConnection{BootstrapServers: src.Addrs()},
		Sync:   &api.SyncSettings{Interval: "30s", TopicConfigs: true},
	})
	if err != nil || m.Sync.Interval != "30s" || !m.Sync.TopicConfigs || m.Sync.ConsumerGroups || m.TopicCount != 1 {
		t.Fatalf("update: %+v, %v", m, err)
	}
	waitTopic(t, c, "m", "present", "MIRRORING", inState(api.StateMirroring))
}

// TestWorkerRefusesInsaneInput: every duration, address and content-type rule of the API,
// on create and on update, with the limits in the message; the limits themselves pass.
func TestWorkerRefusesInsaneInput(t *testing.T) {
	t.Parallel()
	src, dst := kafkatest.Pair(t)
	w := startWorker(t, workerEnv(dst))
	addr := src.Addrs()[0]
	create := func(source, sync string) string {
		return fmt.Sprintf(`{"name":"m","source":{"bootstrap_servers":%s},"sync":{"interval":%q}}`, source, sync)
	}
	good := fmt.Sprintf(`[%q]`, addr)
	type req struct {
		name, method, path, contentType, body string
		status                                int
		code, mention                         string
	}
	check := func(tc req) {
		t.Helper()
		status, body := w.rawTyped(t, tc.method, tc.path, testToken, tc.contentType, tc.body)
		var eb api.ErrorBody
		if tc.code == "" {
			if status != 200 && status != 201 {
				t.Errorf("%s: %d %s, want it accepted", tc.name, status, workertest.Tail(string(body), 300))
			}
			return
		}
		if err := json.Unmarshal(body, &eb); err != nil || status != tc.status || eb.ErrorCode != tc.code || !strings.Contains(eb.Message, tc.mention) {
			t.Errorf("%s: %d %s, want %d %s mentioning %q", tc.name, status, workertest.Tail(string(body), 300), tc.status, tc.code, tc.mention)
		}
	}
	const invalid = api.CodeInvalidClusterMirrorConfig
	for _, tc := range []req{
		{"interval 1ns", "POST", "/v1/mirrors", "", create(good, "1ns"), 400, invalid, `sync.interval: "1ns" is out of range: it must be from 1s to 24h`},
		{"interval under a second", "POST", "/v1/mirrors", "", create(good, "999ms"), 400, invalid, "from 1s to 24h"},
		{"interval over a day", "POST", "/v1/mirrors", "", create(good, "24h1s"), 400, invalid, `"24h1s" is out of range`},
		{"interval negative", "POST", "/v1/mirrors", "", create(good, "-1m"), 400, invalid, "from 1s to 24h"},
		{"port out of range", "POST", "/v1/mirrors", "", create(`["127.0.0.1:99999"]`, "1m"), 400, invalid, `source.bootstrap_servers[0]: "127.0.0.1:99999" has port "99999"; a port is a number from 1 to 65535`},
		{"port zero", "POST", "/v1/mirrors", "", create(fmt.Sprintf(`[%q,"127.0.0.1:0"]`, addr), "1m"), 400, invalid, `source.bootstrap_servers[1]: "127.0.0.1:0" has port "0"`},
		{"no port", "POST", "/v1/mirrors", "", create(`["kafka-1"]`, "1m"), 400, invalid, `"kafka-1" is not host:port`},
		{"no host", "POST", "/v1/mirrors", "", create(`[":9092"]`, "1m"), 400, invalid, `":9092" has no host`},
		{"no address", "POST", "/v1/mirrors", "", create(`[]`, "1m"), 400, invalid, "at least one host:port"},
		{"text body", "POST", "/v1/mirrors", "text/plain", create(good, "1m"), 415, api.CodeInvalidRequest, `Content-Type "text/plain" is not supported: send the body as application/json`},
		{"form body", "POST", "/v1/mirrors", "application/x-www-form-urlencoded", "name=m", 415, api.CodeInvalidRequest, "application/json"},
		{"unparsable content type", "POST", "/v1/mirrors", "json;;", create(good, "1m"), 415, api.CodeInvalidRequest, "application/json"},
		// The smallest interval, with a charset parameter: accepted.
		{"create at the floor", "POST", "/v1/mirrors", "application/json; charset=utf-8", create(good, "1s"), 0, "", ""},
		{"update over a day", "PATCH", "/v1/mirrors/m", "", `{"sync":{"interval":"25h"}}`, 400, invalid, `"25h" is out of range: it must be from 1s to 24h`},
		{"update to 1ns", "PATCH", "/v1/mirrors/m", "", `{"sync":{"interval":"1ns"}}`, 400, invalid, "from 1s to 24h"},
		{"update to a bad port", "PATCH", "/v1/mirrors/m", "", `{"source":{"bootstrap_servers":["127.0.0.1:99999"]}}`, 400, invalid, `"127.0.0.1:99999" has port "99999"`},
		{"update to no address", "PATCH", "/v1/mirrors/m", "", `{"source":{"bootstrap_servers":[]}}`, 400, invalid, "at least one host:port"},
		{"update as text", "PATCH", "/v1/mirrors/m", "text/plain", `{"sync":{"interval":"1m"}}`, 415, api.CodeInvalidRequest, "application/json"},
		{"topic command as text", "POST", "/v1/mirrors/m/topics/start", "text/plain", `{"topics":["t"]}`, 415, api.CodeInvalidRequest, "application/json"},
		{"update at the ceiling", "PATCH", "/v1/mirrors/m", "application/json", `{"sync":{"interval":"24h"}}`, 0, "", ""},
	} {
		check(tc)
	}
	m, err := w.Client.GetMirror(ctxT(t), "m")
	if err != nil || m.Sync.Interval != "24h0m0s" || !slices.Equal(m.Source.BootstrapServers, []string{addr}) {
		t.Fatalf("after the refused updates: %+v, %v", m, err)
	}
}

// TestWorkerRestartResumes stops the worker with SIGTERM while it mirrors a topic that is
// being written to, starts it again, and checks that the logs end up identical.
func TestWorkerRestartResumes(t *testing.T) {
	t.Parallel()
	src, dst, prod := filledPair(t, sourceTopic{"events", 2, 200})

	env := workerEnv(dst)
	w := startWorker(t, env)
	ctx := ctxT(t)
	mirrorTopics(ctx, t, w.Client, "r", src.Addrs(), "events")
	waitTopic(t, w.Client, "r", "events", "MIRRORING", inState(api.StateMirroring))

	// Produce continuously, in the background, while the worker mirrors and restarts.
	var produced atomic.Int64
	produced.Store(200)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := int(produced.Load())
			recs := make([]*kgo.Record, 20)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "events", Key: fmt.Appendf(nil, "k%d", (n+i)%7), Value: fmt.Appendf(nil, "v%d", n+i)}
			}
			pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := prod.ProduceSync(pctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("background produce: %v", err)
				return
			}
			produced.Add(20)
		}
	}()
	stopProducing := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopProducing)

	// SIGTERM once the worker has mirrored some of the new records.
	adm := kadm.NewClient(dst.Client(t))
	destEnd := func() int64 {
		ends, err := adm.ListEndOffsets(context.Background(), "events")
		if err != nil {
			return -1
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		return sum
	}
	kafkatest.WaitFor(t, 30*time.Second, "mirroring of the new records", func() (bool, string) {
		return destEnd() > 400, fmt.Sprintf("destination holds %d offsets", destEnd())
	})
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(w.Stderr.String(), "kafkamirror worker stopped") {
		t.Fatalf("no graceful stop in the log:\n%s", workertest.Tail(w.Stderr.String(), 3000))
	}
	// The source moves on while the worker is down.
	before := produced.Load()
	kafkatest.WaitFor(t, 30*time.Second, "records produced while the worker is down", func() (bool, string) {
		return produced.Load() >= before+100, fmt.Sprintf("%d produced", produced.Load())
	})

	w2 := startWorker(t, env)
	kafkatest.WaitFor(t, 30*time.Second, "mirroring after the restart", func() (bool, string) {
		return destEnd() > before, fmt.Sprintf("destination holds %d offsets", destEnd())
	})
	stopProducing()
	kafkatest.WaitIdentical(t, src, dst, "events", 60*time.Second)
	d := waitTopic(t, w2.Client, "r", "events", "MIRRORING with lag 0 after the restart", caughtUp(api.StateMirroring))
	var total int64
	for _, p := range d.Partitions {
		total += p.DestinationOffset
	}
	if total != produced.Load() {
		t.Fatalf("destination holds %d offsets, %d were produced", total, produced.Load())
	}
	if code := w2.Terminate(t); code != 0 {
		t.Fatalf("exit code %d after the second SIGTERM", code)
	}
}

// TestWorkerNeverRevealsSecrets gives a SASL password at create time and looks for it in
// every answer, the CLI's output, the worker's logs and __mirror_state.
func TestWorkerNeverRevealsSecrets(t *testing.T) {
	t.Parallel()
	const (
		user      = "mirror-admin"
		password  = "Pa55-very-secret-4e1d"
		wrongPass = "Wr0ng-secret-91bc"
		secretKey = "worker-secret-key-0123456789abcdef"
	)
	src := kafkatest.New(t, kafkatest.ClusterID("secure-source"), kafkatest.WithACLs(user, password))
	dst := kafkatest.New(t, kafkatest.ClusterID("plain-destination"))
	src.CreateTopic(t, "payments", 2, nil)
	kafkatest.ProduceKeyed(t, src.Client(t), "payments", 0, 50)

	env := workerEnv(dst, "KAFKAMIRROR_SECRET_KEY="+secretKey)
	w := startWorker(t, env)
	c, ctx := w.Client, ctxT(t)
	source := api.SourceConnection{BootstrapServers: src.Addrs(), SASL: &api.SASL{Mechanism: "SCRAM-SHA-256", Username: user, Password: password}}
	body, _ := json.Marshal(api.CreateMirrorRequest{Name: "sec", Source: source})
	status, created := w.raw(t, "POST", "/v1/mirrors", testToken, string(body))
	if status != 201 {
		t.Fatalf("create: %d %s", status, created)
	}
	var m api.Mirror
	if err := json.Unmarshal(created, &m); err != nil || m.Source.SASL == nil || m.Source.SASL.Username != user || m.Source.SASL.Mechanism != "SCRAM-SHA-256" {
		t.Fatalf("created %s (%v)", created, err)
	}
	if res, err := c.StartTopics(ctx, "sec", []string{"payments"}, ""); err != nil || res[0].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	// Mirroring works, so the sealed password was usable.
	waitTopic(t, c, "sec", "payments", "MIRRORING with lag 0", caughtUp(api.StateMirroring))
	updated, err := json.Marshal(api.UpdateMirrorRequest{Source: &source})
	if err != nil {
		t.Fatal(err)
	}
	// A wrong password is refused without being echoed.
	wrong := source
	wrong.SASL = &api.SASL{Mechanism: "PLAIN", Username: user, Password: wrongPass}
	wrongBody, _ := json.Marshal(api.CreateMirrorRequest{Name: "wrong", Source: wrong})

	answers := map[string][]byte{"create": created}
	for _, r := range []struct{ name, method, path, body string }{
		{"list", "GET", "/v1/mirrors", ""},
		{"describe", "GET", "/v1/mirrors/sec", ""},
		{"update", "PATCH", "/v1/mirrors/sec", string(updated)},
		{"topic", "GET", "/v1/mirrors/sec/topics/payments", ""},
		{"source topics", "GET", "/v1/mirrors/sec/source-topics", ""},
		{"state record", "GET", "/v1/state/records/mirror/sec", ""},
		{"create with a wrong password", "POST", "/v1/mirrors", string(wrongBody)},
		{"metrics", "GET", "/metrics", ""},
	} {
		var st int
		st, answers[r.name] = w.raw(t, r.method, r.path, testToken, r.body)
		t.Logf("%s: %d %s", r.name, st, workertest.Tail(string(answers[r.name]), 400))
	}
	for _, args := range [][]string{{"list", "--json"}, {"describe", "--json"}, {"describe"}, {"state", "show", "--key", "mirror/sec"}} {
		out, _ := w.cli(t, args...)
		answers[strings.Join(args, " ")] = []byte(out)
	}
	// The repair path shows the stored mirror record with its sealed password redacted too.
	for _, name := range []string{"state record", "state show --key mirror/sec"} {
		if a := string(answers[name]); !regexp.MustCompile(`"password":\s*"\[redacted\]"`).MatchString(a) || strings.Contains(a, "enc:v1:") {
			t.Errorf("%s shows the mirror record without redacting its password: %s", name, a)
		}
	}
	for name, a := range answers {
		for _, secret := range []string{password, wrongPass, secretKey} {
			if strings.Contains(string(a), secret) {
				t.Errorf("%s answer reveals a secret: %s", name, a)
			}
		}
		if redacted := name == "state record" || strings.HasPrefix(name, "state show"); !redacted && strings.Contains(string(a), `"password"`) {
			t.Errorf("%s answer has a password field: %s", name, a)
		}
	}

	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	logs := w.Output()
	if !strings.Contains(logs, "partition state changed") {
		t.Fatalf("the log has no state transitions; is it captured?\n%s", workertest.Tail(logs, 2000))
	}
	for _, secret := range []string{password, wrongPass, secretKey, testToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the worker's output reveals %q", secret)
		}
	}

	// __mirror_state holds the mirror with its password sealed, never in clear.
	cl := dst.Client(t, kgo.ConsumeTopics("__mirror_state"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "__mirror_state")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	var sawMirror bool
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading __mirror_state: %v (still waiting for %v)", err, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			raw := string(r.Key) + string(r.Value)
			for _, h := range r.Headers {
				raw += h.Key + string(h.Value)
			}
			for _, secret := range []string{password, wrongPass, secretKey} {
				if strings.Contains(raw, secret) {
					t.Errorf("__mirror_state record %q holds a secret in clear: %s", r.Key, r.Value)
				}
			}
			if string(r.Key) == "mirror/sec" && strings.Contains(string(r.Value), "enc:v1:") {
				sawMirror = true
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	if !sawMirror {
		t.Fatal("__mirror_state has no mirror/sec record with a sealed secret")
	}

	// A worker with another secret key cannot open the stored credentials: not ready, and
	// it says which setting to look at.
	w2 := startProc(t, workerEnv(dst, "KAFKAMIRROR_SECRET_KEY=another-secret-key-0123456789"))
	kafkatest.WaitFor(t, 30*time.Second, "a not-ready answer naming the secret key", func() (bool, string) {
		m := regexp.MustCompile(`"url":"(http://[^"]+)"`).FindStringSubmatch(w2.Stderr.String())
		if m == nil {
			return false, "no listening line yet"
		}
		w2.URL = m[1]
		status, body := w2.raw(t, "GET", "/readyz", "", "")
		return status == 503 && strings.Contains(string(body), "KAFKAMIRROR_SECRET_KEY"), fmt.Sprintf("%d %s", status, body)
	})
	if code := w2.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestWorkerNotReadyUntilTheEngineOpens points the worker at a destination where nothing
// listens: it must still answer /healthz, say 503 on /readyz and /v1, and stop cleanly.
func TestWorkerNotReadyUntilTheEngineOpens(t *testing.T) {
	t.Parallel()
	nowhere := fmt.Sprintf("127.0.0.1:%d", kafkatest.FreePort(t))
	w := startProc(t, workerEnv(nil, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="+nowhere))
	kafkatest.WaitFor(t, 30*time.Second, "the API to listen", func() (bool, string) {
		m := regexp.MustCompile(`"url":"(http://[^"]+)"`).FindStringSubmatch(w.Stderr.String())
		if m == nil {
			return false, w.Stderr.String()
		}
		w.URL = m[1]
		return true, ""
	})
	if status, body := w.raw(t, "GET", "/healthz", "", ""); status != 200 {
		t.Fatalf("/healthz: %d %s", status, body)
	}
	if status, body := w.raw(t, "GET", "/readyz", "", ""); status != 503 {
		t.Fatalf("/readyz: %d %s", status, body)
	}
	status, body := w.raw(t, "GET", "/v1/mirrors", testToken, "")
	if status != 503 || !strings.Contains(string(body), api.CodeCoordinatorLoadInProgress) {
		t.Fatalf("/v1/mirrors: %d %s", status, body)
	}
	if status, _ := w.raw(t, "GET", "/v1/mirrors", "", ""); status != 401 {
		t.Fatalf("/v1/mirrors without a token before ready: %d, want 401", status)
	}
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestWorkerInvalidConfiguration runs the binary with bad settings: exit code 2 and a
// message naming the setting.
func TestWorkerInvalidConfiguration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env     []string
		args    []string
		mention string
	}{
		{[]string{"KAFKAMIRROR_API_TOKEN="}, nil, "KAFKAMIRROR_API_TOKEN"},
		{nil, []string{"--api-listen", "nowhere"}, "--api-listen"},
		{[]string{"KAFKAMIRROR_SECRET_KEY=short"}, nil, "KAFKAMIRROR_SECRET_KEY"},
		{[]string{"KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS="}, nil, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS"},
		{[]string{"KAFKAMIRROR_API_TOKEN=x"}, nil, "api.token (KAFKAMIRROR_API_TOKEN, --api-token) must be at least 16 characters long; this one has 1"},
		{nil, []string{"--destination-bootstrap-servers", "127.0.0.1:99999"}, `"127.0.0.1:99999" has port "99999"; a port is a number from 1 to 65535`},
		{[]string{"KAFKAMIRROR_RETRY_INITIAL_BACKOFF=1ns"}, nil, `KAFKAMIRROR_RETRY_INITIAL_BACKOFF, --retry-initial-backoff) from the environment: "1ns" is out of range: it must be from 10ms to 1h`},
	} {
		env := append(workerEnv(nil, "KAFKAMIRROR_DESTINATION_BOOTSTRAP_SERVERS=127.0.0.1:1"), tc.env...)
		w := startProc(t, env, tc.args...)
		<-w.Done()
		if code := w.Cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(w.Stderr.String(), tc.mention) {
			t.Errorf("%v %v: exit code %d, stderr %q", tc.env, tc.args, code, w.Stderr.String())
		}
	}
}

// TestWorkerDemo runs the embedded mode twice on one data directory: the mirror created in
// the first run is still there in the second. The embedded destination enforces ACLs: its
// demo user may write a topic of its own but not a mirrored one.
func TestWorkerDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"demo", "--source-port", "0", "--destination-port", "0", "--data-dir", dir}
	env := []string{"PATH=" + "/usr/bin:/bin", "KAFKAMIRROR_API_LISTEN=127.0.0.1:0", "KAFKAMIRROR_LOG_FORMAT=text"}
	w := startProc(t, env, args...)
	w.WaitReady(t)
	out := w.Stdout.String()
	line := regexp.MustCompile(`kafkamirror-worker ready: api=http://127\.0\.0\.1:\d+ source=(127\.0\.0\.1:\d+) destination=(127\.0\.0\.1:\d+)`).FindStringSubmatch(out)
	tok := regexp.MustCompile(`api token:\s+([0-9a-f]{32}) \(generated`).FindStringSubmatch(out)
	if line == nil || tok == nil {
		t.Fatalf("demo output:\n%s", out)
	}
	c, err := api.NewClient(api.ClientConfig{URL: w.URL, Token: tok[1]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateMirror(ctxT(t), api.CreateMirrorRequest{Name: "demo", Source: api.SourceConnection{BootstrapServers: []string{line[1]}}, SourceClusterID: "source"}); err != nil {
		t.Fatal(err)
	}
	src, err := kgo.NewClient(kgo.SeedBrokers(line[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := kadm.NewClient(src).CreateTopic(ctxT(t), 1, -1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if res, err := c.StartTopics(ctxT(t), "demo", []string{"orders"}, ""); err != nil || res[0].Err() != nil {
		t.Fatalf("start: %v %+v", err, res)
	}
	waitTopic(t, c, "demo", "orders", "MIRRORING", caughtUp(api.StateMirroring))
	demo, err := kgo.NewClient(kgo.SeedBrokers(line[2]), kgo.SASL(scram.Auth{User: EmbeddedDemoUser, Pass: EmbeddedDemoPassword}.AsSha256Mechanism()),
		kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	if err := demo.ProduceSync(ctxT(t), &kgo.Record{Topic: "orders", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("the demo user writing to a mirrored topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if _, err := kadm.NewClient(demo).CreateTopic(ctxT(t), 1, -1, nil, "scratch"); err != nil {
		t.Fatalf("the demo user creating a topic: %v", err)
	}
	if err := demo.ProduceSync(ctxT(t), &kgo.Record{Topic: "scratch", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("the demo user writing to its own topic: %v", err)
	}
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	w = startProc(t, append(env, "KAFKAMIRROR_API_TOKEN=chosen-demo-token-0123"), args...)
	w.WaitReady(t)
	if strings.Contains(w.Stdout.String(), "generated") {
		t.Fatalf("a token was generated although one was set:\n%s", w.Stdout)
	}
	ms, err := w.Client.ListMirrors(ctxT(t))
	if err != nil || len(ms) != 1 || ms[0].Name != "demo" || ms[0].SourceClusterID != "source" {
		t.Fatalf("mirrors after the restart: %+v, %v", ms, err)
	}
	if code := w.Terminate(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// TestWorkerServesTLS serves the API over HTTPS (api.tls.cert_file / key_file) and reaches
// it with the client and the CLI given the CA.
func TestWorkerServesTLS(t *testing.T) {
	t.Parallel()
	dst := kafkatest.New(t)
	dir := t.TempDir()
	certFile, keyFile := selfSignedCert(t, dir)
	w := startProc(t, workerEnv(dst, "KAFKAMIRROR_API_TLS_CERT_FILE="+certFile, "KAFKAMIRROR_API_TLS_KEY_FILE="+keyFile))
	w.WaitReady(t)
	if !strings.HasPrefix(w.URL, "https://") {
		t.Fatalf("ready line URL %s", w.URL)
	}
	pemData, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemData)
	c, err := api.NewClient(api.ClientConfig{URL: w.URL, Token: testToken, TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := c.ListMirrors(ctxT(t)); err != nil || len(ms) != 0 {
		t.Fatalf("list over TLS: %v, %v", ms, err)
	}
	if _, err := w.Client.ListMirrors(ctxT(t)); err == nil {
		t.Fatal("a client without the CA was accepted")
	}
	if out, code := w.cli(t, "list", "--worker-ca-file", certFile); code != 0 || !strings.HasPrefix(out, "MIRROR") {
		t.Fatalf("list over TLS (exit %d): %s", code, out)
	}
}

// selfSignedCert writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafkamirror-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
