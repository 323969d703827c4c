package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// command sends a topic command for one topic and returns its result.
func command(t *testing.T, c *api.Client, action string, req api.TopicsRequest) api.TopicResult {
	t.Helper()
	res, err := c.TopicCommand(ctxT(t), "m", action, req)
	if err != nil || len(res) != len(req.Topics) {
		t.Fatalf("%s %+v: %+v, %v", action, req, res, err)
	}
	return res[0]
}

// TestWorkerTopicOwnership: a topic records the owner of its start; commands naming another
// owner, or releasing without being the owner, are refused at once and change nothing; a
// release clears the owner (also of a topic stopped already), after which another owner may
// start it, and a topic without an owner is claimed by the first command naming one.
// Commands without an owner (the CLI's) neither check nor change it.
func TestWorkerTopicOwnership(t *testing.T) {
	t.Parallel()
	src, dst, _ := filledPair(t, sourceTopic{"orders", 2, 50})
	w := startWorker(t, workerEnv(dst))
	c := w.Client
	if _, err := c.CreateMirror(ctxT(t), api.CreateMirrorRequest{Name: "m", Source: api.SourceConnection{BootstrapServers: src.Addrs()}}); err != nil {
		t.Fatal(err)
	}
	owner := func() string {
		t.Helper()
		d, err := c.GetTopic(ctxT(t), "m", "orders")
		if err != nil {
			t.Fatal(err)
		}
		return d.Owner
	}
	orders := []string{"orders"}
	if r := command(t, c, api.ActionStart, api.TopicsRequest{Topics: orders, Owner: "owner-a"}); r.Err() != nil {
		t.Fatalf("start by owner-a: %v", r.Err())
	}
	waitTopic(t, c, "m", "orders", "MIRRORING", inState(api.StateMirroring))
	if got := owner(); got != "owner-a" {
		t.Fatalf("owner %q after the start, want owner-a", got)
	}

	start := time.Now()
	for _, tc := range []struct {
		action string
		req    api.TopicsRequest
	}{
		{api.ActionStart, api.TopicsRequest{Topics: orders, Owner: "owner-b"}},
		{api.ActionPause, api.TopicsRequest{Topics: orders, Owner: "owner-b"}},
		{api.ActionStop, api.TopicsRequest{Topics: orders, Owner: "owner-b", Release: true}},
		{api.ActionStop, api.TopicsRequest{Topics: orders, Release: true}},
	} {
		r := command(t, c, tc.action, tc.req)
		if !api.IsCode(r.Err(), api.CodeMirrorTopicOwnerMismatch) || !strings.Contains(r.Message, "managed by owner owner-a") || !strings.Contains(r.Message, "moved") {
			t.Fatalf("%s %+v: %+v, want MIRROR_TOPIC_OWNER_MISMATCH naming owner-a", tc.action, tc.req, r)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refusals took %v", d)
	}
	if d := waitTopic(t, c, "m", "orders", "still MIRRORING", inState(api.StateMirroring)); d.Owner != "owner-a" {
		t.Fatalf("owner %q after refused commands", d.Owner)
	}

	// The operator's commands carry no owner: allowed, and the owner stays.
	if r := command(t, c, api.ActionPause, api.TopicsRequest{Topics: orders}); r.Err() != nil {
		t.Fatalf("pause without an owner: %v", r.Err())
	}
	if r := command(t, c, api.ActionResume, api.TopicsRequest{Topics: orders, Owner: "owner-a"}); r.Err() != nil {
		t.Fatalf("resume by owner-a: %v", r.Err())
	}
	waitTopic(t, c, "m", "orders", "MIRRORING again", inState(api.StateMirroring))
	if got := owner(); got != "owner-a" {
		t.Fatalf("owner %q after the operator's pause", got)
	}

	// The owner releases it (a destroy); a repeat finds it stopped and released.
	if r := command(t, c, api.ActionStop, api.TopicsRequest{Topics: orders, Owner: "owner-a", Release: true}); r.Err() != nil {
		t.Fatalf("release by owner-a: %v", r.Err())
	}
	waitTopic(t, c, "m", "orders", "STOPPED", inState(api.StateStopped))
	if got := owner(); got != "" {
		t.Fatalf("owner %q after the release", got)
	}
	if r := command(t, c, api.ActionStop, api.TopicsRequest{Topics: orders, Owner: "owner-a", Release: true}); !api.IsCode(r.Err(), api.CodeMirrorTopicAlreadyStopped) {
		t.Fatalf("second release: %+v", r)
	}

	// A released topic can be started by another owner.
	if r := command(t, c, api.ActionStart, api.TopicsRequest{Topics: orders, Owner: "owner-b"}); r.Err() != nil {
		t.Fatalf("start by owner-b after the release: %v", r.Err())
	}
	waitTopic(t, c, "m", "orders", "MIRRORING for owner-b", inState(api.StateMirroring))
	if got := owner(); got != "owner-b" {
		t.Fatalf("owner %q, want owner-b", got)
	}

	// A topic without an owner (started by an operator) is claimed by the first command
	// that names one.
	if r := command(t, c, api.ActionStop, api.TopicsRequest{Topics: orders, Owner: "owner-b", Release: true}); r.Err() != nil {
		t.Fatalf("release by owner-b: %v", r.Err())
	}
	waitTopic(t, c, "m", "orders", "STOPPED", inState(api.StateStopped))
	if r := command(t, c, api.ActionStart, api.TopicsRequest{Topics: orders}); r.Err() != nil {
		t.Fatalf("the operator's start: %v", r.Err())
	}
	waitTopic(t, c, "m", "orders", "MIRRORING for nobody", inState(api.StateMirroring))
	if got := owner(); got != "" {
		t.Fatalf("owner %q after an operator's start", got)
	}
	if r := command(t, c, api.ActionPause, api.TopicsRequest{Topics: orders, Owner: "owner-c"}); r.Err() != nil {
		t.Fatalf("pause by owner-c: %v", r.Err())
	}
	if got := owner(); got != "owner-c" {
		t.Fatalf("owner %q, want owner-c to have claimed the topic", got)
	}

	// release belongs to stop.
	_, err := c.TopicCommand(ctxT(t), "m", api.ActionPause, api.TopicsRequest{Topics: orders, Release: true})
	wantAPIError(t, "pause with release", err, 400, api.CodeInvalidRequest)
}

// TestWorkerSourceTopicsAfterDeletion: once a listing no longer shows a deleted source
// topic, no later listing shows it again, with the mirror's connection or with one given
// in the request; while a mirror topic of it still runs.
func TestWorkerSourceTopicsAfterDeletion(t *testing.T) {
	t.Parallel()
	src, dst := kafkatest.Pair(t, kafkatest.Brokers(3))
	src.CreateTopic(t, "app.kept", 3, nil)
	src.CreateTopic(t, "app.gone", 3, nil)
	kafkatest.ProduceKeyed(t, src.Client(t), "app.gone", 0, 30)
	w := startWorker(t, workerEnv(dst))
	c := w.Client
	conn := api.SourceConnection{BootstrapServers: src.Addrs()}
	if _, err := c.CreateMirror(ctxT(t), api.CreateMirrorRequest{Name: "m", Source: conn}); err != nil {
		t.Fatal(err)
	}
	if r := command(t, c, api.ActionStart, api.TopicsRequest{Topics: []string{"app.gone"}}); r.Err() != nil {
		t.Fatal(r.Err())
	}
	waitTopic(t, c, "m", "app.gone", "MIRRORING", inState(api.StateMirroring))
	list := func() string {
		t.Helper()
		a, err := c.SourceTopics(ctxT(t), "m", "^app\\.")
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.ListSourceTopics(ctxT(t), api.SourceTopicsRequest{Source: conn, Pattern: "^app\\."})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(a, ",") != strings.Join(b, ",") {
			t.Fatalf("the mirror's listing %v and the connection's %v differ", a, b)
		}
		return strings.Join(a, ",")
	}
	if got := list(); got != "app.gone,app.kept" {
		t.Fatalf("listed %s", got)
	}

	if res, err := kadm.NewClient(src.Client(t)).DeleteTopics(ctxT(t), "app.gone"); err != nil || res.Error() != nil {
		t.Fatalf("deleting app.gone: %v %v", err, res.Error())
	}
	kafkatest.WaitFor(t, 30*time.Second, "app.gone to leave the listing", func() (bool, string) {
		got := list()
		return got == "app.kept", got
	})
	for i := range 20 {
		if got := list(); got != "app.kept" {
			t.Fatalf("listing %d after the deletion: %s", i, got)
		}
	}

	_, err := c.ListSourceTopics(ctxT(t), api.SourceTopicsRequest{Source: conn, Pattern: "(["})
	wantAPIError(t, "bad pattern", err, 400, api.CodeInvalidRequest)
	_, err = c.ListSourceTopics(ctxT(t), api.SourceTopicsRequest{Source: api.SourceConnection{BootstrapServers: []string{"no-port"}}})
	wantAPIError(t, "bad address", err, 400, api.CodeInvalidClusterMirrorConfig)
}

// TestWorkerSourceAuthenticationFailure: a password the source refuses fails a create, an
// update and a listing at once with SASL_AUTHENTICATION_FAILED, a 400 the client does not
// retry, naming the mechanism and the user and never the password.
func TestWorkerSourceAuthenticationFailure(t *testing.T) {
	t.Parallel()
	const (
		user     = "mirror-user"
		password = "right-Pa55-for-the-source"
		wrong    = "wrong-Pa55-for-the-source"
	)
	src := kafkatest.New(t, kafkatest.ClusterID("source-cluster"), kafkatest.WithACLs(user, password))
	dst := kafkatest.New(t, kafkatest.ClusterID("destination-cluster"))
	w := startWorker(t, workerEnv(dst, "KAFKAMIRROR_SECRET_KEY=worker-test-secret-key-0123456789"))
	c := w.Client
	conn := func(mechanism, pass string) api.SourceConnection {
		return api.SourceConnection{BootstrapServers: src.Addrs(), SASL: &api.SASL{Mechanism: mechanism, Username: user, Password: pass}}
	}
	want := func(what string, err error, mechanism string, took time.Duration) {
		t.Helper()
		wantAPIError(t, what, err, 400, api.CodeSaslAuthenticationFailed)
		msg := err.Error()
		for _, s := range []string{"authentication failed", mechanism, `"` + user + `"`} {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: %q lacks %q", what, msg, s)
			}
		}
		if strings.Contains(msg, wrong) || strings.Contains(msg, password) {
			t.Errorf("%s: the message shows a password: %s", what, msg)
		}
		if took > 5*time.Second {
			t.Errorf("%s took %v", what, took)
		}
	}
	// A new group's first commands wait out the handover delay of the commands unit
	// (internal/membership): not what is timed here.
	if status, body := w.raw(t, "DELETE", "/v1/mirrors/none", testToken, ""); status != 404 {
		t.Fatalf("a first command: %d %s", status, body)
	}
	for _, mechanism := range []string{"SCRAM-SHA-256", "PLAIN"} {
		start := time.Now()
		_, err := c.CreateMirror(ctxT(t), api.CreateMirrorRequest{Name: "m", Source: conn(mechanism, wrong)})
		want("create with "+mechanism, err, mechanism, time.Since(start))
	}
	start := time.Now()
	_, err := c.ListSourceTopics(ctxT(t), api.SourceTopicsRequest{Source: conn("SCRAM-SHA-256", wrong)})
	want("listing", err, "SCRAM-SHA-256", time.Since(start))

	if _, err := c.CreateMirror(ctxT(t), api.CreateMirrorRequest{Name: "m", Source: conn("SCRAM-SHA-256", password)}); err != nil {
		t.Fatalf("create with the right password: %v", err)
	}
	wrongConn := conn("SCRAM-SHA-256", wrong)
	start = time.Now()
	_, err = c.UpdateMirror(ctxT(t), "m", api.UpdateMirrorRequest{Source: &wrongConn})
	want("update", err, "SCRAM-SHA-256", time.Since(start))
	if topics, err := c.SourceTopics(ctxT(t), "m", ""); err != nil {
		t.Fatalf("the mirror kept its working credentials, yet its listing failed: %v (%v)", err, topics)
	}
}

// operator runs a CLI command against w and returns its stdout (table rows with single
// spaces), its stderr and its exit code.
func operator(t *testing.T, w *workerProc, args ...string) (rows []string, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binPath, append(args, "--worker-url", w.URL)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KAFKAMIRROR_API_TOKEN=" + w.Token}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	for l := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	return rows, errb.String(), cmd.ProcessState.ExitCode()
}

// TestWorkerOperatorCommands: the runbooks' commands with the KIP tool's names and tables:
// create a mirror from Kafka client properties, start topics by regular expression, pause,
// resume, stop (noting that Terraform undoes it), restart, and delete.
func TestWorkerOperatorCommands(t *testing.T) {
	t.Parallel()
	src, dst := kafkatest.Pair(t)
	for _, topic := range []string{"app.orders", "app.users", "billing"} {
		src.CreateTopic(t, topic, 1, nil)
	}
	w := startWorker(t, workerEnv(dst))
	config := filepath.Join(t.TempDir(), "source.properties")
	if err := os.WriteFile(config, []byte("# the primary\nbootstrap.servers="+strings.Join(src.Addrs(), ",")+"\nsource.cluster.id=source-cluster\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := func(what string, rows []string, stderr string, code int, wantCode int, wantRows ...string) {
		t.Helper()
		if code != wantCode || strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
			t.Fatalf("%s: exit %d (want %d)\n%s\nstderr: %s\nwant:\n%s", what, code, wantCode, strings.Join(rows, "\n"), stderr, strings.Join(wantRows, "\n"))
		}
	}
	rows, stderr, code := operator(t, w, "create", "--mirror", "m", "--mirror-config", config)
	want("create", rows, stderr, code, 0, "MIRROR TOPICS SOURCE-CLUSTER-ID SOURCE-BOOTSTRAP", "m 0 source-cluster "+strings.Join(src.Addrs(), ","))

	rows, stderr, code = operator(t, w, "start", "--mirror", "m", "--topics", `app\..*`)
	want("start", rows, stderr, code, 0, "MIRROR TOPIC RESULT MESSAGE", "m app.orders OK", "m app.users OK")
	for _, topic := range []string{"app.orders", "app.users"} {
		waitTopic(t, w.Client, "m", topic, "MIRRORING", inState(api.StateMirroring))
	}
	rows, stderr, code = operator(t, w, "start", "--mirror", "m", "--topics", "app.orders,nope")
	want("start again", rows, stderr, code, 1, "MIRROR TOPIC RESULT MESSAGE",
		`m app.orders OK`,
		`m nope UNKNOWN_TOPIC_OR_PARTITION topic "nope" does not exist on the source cluster`)
	if !strings.Contains(stderr, "1 of 2 topics failed") {
		t.Fatalf("stderr: %s", stderr)
	}

	rows, stderr, code = operator(t, w, "pause", "--mirror", "m", "--topics", "app.users")
	want("pause", rows, stderr, code, 0, "MIRROR TOPIC RESULT MESSAGE", "m app.users OK")
	waitTopic(t, w.Client, "m", "app.users", "PAUSED", inState(api.StatePaused))
	rows, stderr, code = operator(t, w, "resume", "--mirror", "m", "--topics", "app.users")
	want("resume", rows, stderr, code, 0, "MIRROR TOPIC RESULT MESSAGE", "m app.users OK")
	waitTopic(t, w.Client, "m", "app.users", "MIRRORING again", inState(api.StateMirroring))

	rows, stderr, code = operator(t, w, "delete", "--mirror", "m")
	if code != 1 || !strings.Contains(stderr, "CLUSTER_MIRROR_NOT_EMPTY") {
		t.Fatalf("delete while mirroring: exit %d, %v, %s", code, rows, stderr)
	}

	// A topic Terraform manages (it has an owner): the stop says the next apply undoes it.
	if r := command(t, w.Client, api.ActionPause, api.TopicsRequest{Topics: []string{"app.orders"}, Owner: "terraform-resource"}); r.Err() != nil {
		t.Fatal(r.Err())
	}
	rows, stderr, code = operator(t, w, "stop", "--mirror", "m", "--topics", "app.orders,app.users")
	want("stop", rows, stderr, code, 0, "MIRROR TOPIC RESULT MESSAGE", "m app.orders OK final group offset sync: synced", "m app.users OK final group offset sync: synced")
	if !strings.Contains(stderr, `note: Terraform manages app.orders (kafkamirror_mirror_topic): the next terraform apply changes it back unless its configuration says state = "stopped"`) {
		t.Fatalf("stop's stderr: %s", stderr)
	}
	for _, topic := range []string{"app.orders", "app.users"} {
		waitTopic(t, w.Client, "m", topic, "STOPPED", inState(api.StateStopped))
	}
	rows, stderr, code = operator(t, w, "start", "--mirror", "m", "--topics", "app.users")
	want("restart", rows, stderr, code, 0, "MIRROR TOPIC RESULT MESSAGE", "m app.users OK")
	waitTopic(t, w.Client, "m", "app.users", "MIRRORING after the restart", inState(api.StateMirroring))
	rows, stderr, code = operator(t, w, "stop", "--mirror", "m", "--topics", "app.users")
	want("stop again", rows, stderr, code, 0, "MIRROR TOPIC RESULT MESSAGE", "m app.users OK final group offset sync: synced")
	waitTopic(t, w.Client, "m", "app.users", "STOPPED again", inState(api.StateStopped))

	rows, stderr, code = operator(t, w, "delete", "--mirror", "m")
	want("delete", rows, stderr, code, 0, "MIRROR RESULT", "m DELETED")
	rows, stderr, code = operator(t, w, "stop", "--mirror", "m", "--topics", "app.orders")
	if code != 1 || !strings.Contains(stderr, "UNKNOWN_CLUSTER_MIRROR") {
		t.Fatalf("stop on a deleted mirror: exit %d, %v, %s", code, rows, stderr)
	}
}
