package mirrorstate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

const (
	storeTestPassword  = "s3cret-sasl-password-7f3a"
	storeTestClientKey = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw-test-client-key\n-----END PRIVATE KEY-----\n"
)

func storeTestCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openTestStore(t *testing.T, c *kafkatest.Cluster, cfg StoreConfig) *Store {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(storeTestLogWriter{t}, nil))
	}
	s, err := OpenStore(storeTestCtx(t), c.Client(t), cfg)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	return s
}

// storeTestLogWriter sends the store's log lines to the test log.
type storeTestLogWriter struct{ t *testing.T }

func (w storeTestLogWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// storeLogBuffer is a concurrency-safe log sink (the loader logs from goroutines).
type storeLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *storeLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *storeLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func storeTestLogger() (*slog.Logger, *storeLogBuffer) {
	b := &storeLogBuffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// storeSnapshot is the whole view, read under the store's lock.
func storeSnapshot(s *Store) storeView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.v
}

func requireSameStoreView(t *testing.T, got, want *Store) {
	t.Helper()
	g, w := storeSnapshot(got), storeSnapshot(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("views differ\n got: %+v\nwant: %+v", g, w)
	}
}

// storeTestCreatedAt is a local time with a monotonic reading: the store must
// hand back the same instant in UTC, as a reload does.
var storeTestCreatedAt = time.Now()

func secretMirror(name string) MirrorRecord {
	return MirrorRecord{
		Name: name,
		Source: SourceConnection{
			BootstrapServers: []string{"src-1:9093", "src-2:9093"},
			TLS:              &TLSSettings{CACertPEM: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n", ClientCertPEM: "CERT", ClientKeyPEM: storeTestClientKey, ServerName: "src"},
			SASL:             &SASLSettings{Mechanism: "SCRAM-SHA-512", Username: "mirror-user", Password: storeTestPassword},
		},
		SourceClusterID: "source-cluster",
		Sync: SyncSettings{
			Interval: 30 * time.Second, TopicConfigs: true, TopicConfigExcludes: []string{"retention.ms"},
			ConsumerGroups: true, GroupIncludes: []string{"app-.*"}, GroupExcludes: []string{},
		},
		CreatedAt: storeTestCreatedAt,
	}
}

// normalizedMirror is m as the store returns it: times in UTC without a
// monotonic reading.
func normalizedMirror(m MirrorRecord) MirrorRecord {
	m.CreatedAt = m.CreatedAt.UTC()
	return m
}

// fillStore writes one of every kind, overwrites and deletes, and returns
// the expected surviving records.
func fillStore(t *testing.T, ctx context.Context, s *Store) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	must(s.PutMirror(ctx, secretMirror("alpha")))
	must(s.PutMirror(ctx, MirrorRecord{Name: "beta", Source: SourceConnection{BootstrapServers: []string{"b:9092"}}, CreatedAt: now}))
	must(s.PutMirror(ctx, MirrorRecord{Name: "gone", Source: SourceConnection{BootstrapServers: []string{"g:9092"}}}))
	must(s.DeleteMirror(ctx, "gone"))

	must(s.PutTopicConfig(ctx, "orders", TopicConfigRecord{MirrorName: "alpha", Divergence: "fail", SourceTopicID: "0011"}))
	must(s.PutTopicConfig(ctx, "payments", TopicConfigRecord{MirrorName: "beta.paused", Divergence: "recreate"}))
	must(s.PutTopicConfig(ctx, "old", TopicConfigRecord{MirrorName: "alpha.removed"}))
	must(s.DeleteTopicConfig(ctx, "old"))

	for p := int32(0); p < 3; p++ {
		must(s.PutPartition(ctx, "alpha", "orders", p, PartitionRecord{Status: partitionstate.Status{State: partitionstate.StatePreparing, StateEpoch: 1}, UpdatedAt: now}))
	}
	must(s.PutPartition(ctx, "alpha", "orders", 0, PartitionRecord{Status: partitionstate.Status{State: partitionstate.StateMirroring, Previous: partitionstate.StatePreparing, StateEpoch: 2}, UpdatedAt: now}))
	must(s.PutPartition(ctx, "beta", "payments", 0, PartitionRecord{
		Status:    partitionstate.Status{State: partitionstate.StateFailed, Previous: partitionstate.StateMirroring, StateEpoch: 5, Error: "boom", RetryAttempt: 2, RetryAt: now.Add(time.Minute)},
		UpdatedAt: now,
	}))
	must(s.PutPartition(ctx, "beta", "payments", 1, PartitionRecord{Status: partitionstate.Status{State: partitionstate.StateFailed, Previous: partitionstate.StateStopping, StateEpoch: 9, Error: "x", RetryAttempt: -1}, UpdatedAt: now}))
	for p := int32(0); p < 4; p++ {
		must(s.PutPartition(ctx, "alpha", "dropped", p, PartitionRecord{Status: partitionstate.Status{State: partitionstate.StatePaused, Previous: partitionstate.StatePausing, StateEpoch: 3}, UpdatedAt: now}))
	}
	must(s.DeletePartitions(ctx, "alpha", "dropped"))

	must(s.PutLastMirror(ctx, "alpha", "orders", 0, LastMirrorRecord{LastMirroredOffset: 100, LastMirroredEpoch: 3, SourceClusterID: "source-cluster", SourceTopicID: "0011", DestinationClusterID: "destination-cluster"}))
	must(s.PutLastMirror(ctx, "alpha", "orders", 1, LastMirrorRecord{LastMirroredOffset: 7, LastMirroredEpoch: -1}))
	must(s.PutLastMirror(ctx, "beta", "orders", 0, LastMirrorRecord{LastMirroredOffset: 5, LastMirroredEpoch: 1}))
}

func TestStoreReopenReproducesView(t *testing.T) {
	c := kafkatest.New(t)
	sealer := mustTestSealer(t, fixtureSecretKey)
	cfg := StoreConfig{Sealer: sealer}
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, cfg)
	if len(s.Mirrors()) != 0 || len(s.TopicConfigs()) != 0 {
		t.Fatalf("a new store is not empty")
	}
	fillStore(t, ctx, s)

	// The view says what was written (and acknowledged).
	alpha := secretMirror("alpha")
	if got, ok := s.Mirror("alpha"); !ok || !reflect.DeepEqual(got, normalizedMirror(alpha)) {
		t.Fatalf("Mirror(alpha) = %+v, %v", got, ok)
	}
	if _, ok := s.Mirror("gone"); ok {
		t.Fatal("deleted mirror still in the view")
	}
	if ms := s.Mirrors(); len(ms) != 2 || ms[0].Name != "alpha" || ms[1].Name != "beta" {
		t.Fatalf("Mirrors() = %v", ms)
	}
	if _, ok := s.TopicConfig("old"); ok {
		t.Fatal("deleted topic config still in the view")
	}
	if tc, _ := s.TopicConfig("payments"); tc.MirrorName != "beta.paused" || tc.Divergence != "recreate" {
		t.Fatalf("TopicConfig(payments) = %+v", tc)
	}
	if ps := s.Partitions("alpha", "orders"); len(ps) != 3 || ps[0].Status.State != partitionstate.StateMirroring || ps[1].Status.State != partitionstate.StatePreparing {
		t.Fatalf("Partitions(alpha, orders) = %+v", ps)
	}
	if ps := s.Partitions("alpha", "dropped"); ps == nil || len(ps) != 0 {
		t.Fatalf("Partitions after DeletePartitions = %#v, want an empty map", ps)
	}
	if p, ok := s.Partition("beta", "payments", 0); !ok || p.Status.Error != "boom" || p.Status.RetryAttempt != 2 || p.Status.RetryAt.IsZero() {
		t.Fatalf("Partition(beta, payments, 0) = %+v, %v", p, ok)
	}
	if lm, ok := s.LastMirror("alpha", "orders", 0); !ok || lm.LastMirroredOffset != 100 || lm.DestinationClusterID != "destination-cluster" {
		t.Fatalf("LastMirror = %+v, %v", lm, ok)
	}
	if lms := s.LastMirrorsForTopic("orders"); len(lms) != 2 || len(lms["alpha"]) != 2 || lms["beta"][0].LastMirroredOffset != 5 {
		t.Fatalf("LastMirrorsForTopic(orders) = %+v", lms)
	}

	// A fresh process (new client, new store) rebuilds exactly that view.
	reopened := openTestStore(t, c, cfg)
	requireSameStoreView(t, reopened, s)
	if got, _ := reopened.Mirror("alpha"); got.Source.SASL.Password != storeTestPassword || got.Source.TLS.ClientKeyPEM != storeTestClientKey {
		t.Fatalf("reopened secrets = %q, %q", got.Source.SASL.Password, got.Source.TLS.ClientKeyPEM)
	}

	// So does it after the broker compacts the topic (old values and
	// superseded records gone, tombstones kept within delete.retention.ms).
	c.Fake().Compact()
	requireSameStoreView(t, openTestStore(t, c, cfg), s)

	// Getters hand out copies: changing one does not change the view.
	m, _ := s.Mirror("alpha")
	m.Source.BootstrapServers[0] = "changed"
	m.Source.SASL.Password = "changed"
	m.Sync.GroupIncludes[0] = "changed"
	ps := s.Partitions("alpha", "orders")
	delete(ps, 0)
	lms := s.LastMirrorsForTopic("orders")
	delete(lms["alpha"], 0)
	requireSameStoreView(t, reopened, s)
}

func TestStoreTopicCreatedCompacted(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{Partitions: 3})
	adm := c.Admin(t)

	rcs, err := adm.DescribeTopicConfigs(ctx, DefaultStoreTopic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(DefaultStoreTopic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc.Err)
	}
	policy := ""
	for _, cfg := range rc.Configs {
		if cfg.Key == "cleanup.policy" && cfg.Value != nil {
			policy = *cfg.Value
		}
	}
	if policy != "compact" {
		t.Fatalf("cleanup.policy = %q, want compact", policy)
	}
	td, err := adm.ListTopics(ctx, DefaultStoreTopic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td[DefaultStoreTopic].Partitions); n != 3 {
		t.Fatalf("%s has %d partitions, want 3", DefaultStoreTopic, n)
	}

	// With several partitions, keys spread over them and a reload still
	// rebuilds the same view; an existing compacted topic is reused.
	for i := range 40 {
		topic := fmt.Sprintf("topic-%d", i)
		if err := s.PutTopicConfig(ctx, topic, TopicConfigRecord{MirrorName: "m"}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutPartition(ctx, "m", topic, 0, PartitionRecord{Status: partitionstate.Status{State: partitionstate.StateMirroring, Previous: partitionstate.StatePreparing, StateEpoch: int32(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, DefaultStoreTopic)
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			used++
		}
	})
	if used < 2 {
		t.Fatalf("80 keys landed in %d of 3 partitions; the test does not exercise several partitions", used)
	}
	requireSameStoreView(t, openTestStore(t, c, StoreConfig{Partitions: 3}), s)
}

// rawStoreRecords reads every record of topic with a plain consumer, as anyone
// with READ on the destination could.
func rawStoreRecords(t *testing.T, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx := storeTestCtx(t)
	ends, err := c.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: still waiting for %v", topic, want)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return out
}

func TestStoreSecretsNeverInClear(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{Sealer: mustTestSealer(t, fixtureSecretKey)})
	if err := s.PutMirror(ctx, secretMirror("m")); err != nil {
		t.Fatal(err)
	}
	// An update (PATCH of credentials) is sealed too.
	m := secretMirror("m")
	m.Source.SASL.Password = storeTestPassword + "-rotated"
	if err := s.PutMirror(ctx, m); err != nil {
		t.Fatal(err)
	}
	recs := rawStoreRecords(t, c, DefaultStoreTopic)
	if len(recs) != 2 {
		t.Fatalf("read %d records, want 2", len(recs))
	}
	for _, r := range recs {
		for _, secret := range []string{storeTestPassword, "test-client-key", "PRIVATE KEY"} {
			if bytes.Contains(r.Key, []byte(secret)) || bytes.Contains(r.Value, []byte(secret)) {
				t.Fatalf("record %s at offset %d holds a secret in clear: %s", r.Key, r.Offset, r.Value)
			}
		}
		if string(r.Key) != "mirror/m" || bytes.Count(r.Value, []byte(`"enc:v1:`)) != 2 {
			t.Fatalf("record %s = %s; want mirror/m with two sealed fields", r.Key, r.Value)
		}
		if !bytes.Contains(r.Value, []byte(`"username":"mirror-user"`)) {
			t.Fatalf("non-secret fields should stay readable: %s", r.Value)
		}
	}
	if got, _ := s.Mirror("m"); got.Source.SASL.Password != storeTestPassword+"-rotated" {
		t.Fatalf("the view should keep the plain password, got %q", got.Source.SASL.Password)
	}
}

func TestStoreNilSealer(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{})

	for name, m := range map[string]MirrorRecord{
		"password":   {Name: "p", Source: SourceConnection{SASL: &SASLSettings{Mechanism: "PLAIN", Username: "u", Password: storeTestPassword}}},
		"client key": {Name: "k", Source: SourceConnection{TLS: &TLSSettings{ClientKeyPEM: storeTestClientKey}}},
	} {
		err := s.PutMirror(ctx, m)
		if err == nil || !strings.Contains(err.Error(), "KAFKAMIRROR_SECRET_KEY") || !errors.Is(err, ErrNoSecretKey) {
			t.Fatalf("%s without a sealer: err = %v, want one naming KAFKAMIRROR_SECRET_KEY", name, err)
		}
		if _, ok := s.Mirror(m.Name); ok {
			t.Fatalf("%s: a refused mirror is in the view", name)
		}
	}
	// Nothing reached the topic.
	ends, err := c.Admin(t).ListEndOffsets(ctx, DefaultStoreTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Fatalf("partition %d has %d records after refused writes", o.Partition, o.Offset)
		}
	})
	// A mirror without secrets needs no key.
	plain := MirrorRecord{Name: "plain", Source: SourceConnection{BootstrapServers: []string{"a:9092"}, SASL: &SASLSettings{Mechanism: "PLAIN", Username: "u"}}}
	if err := s.PutMirror(ctx, plain); err != nil {
		t.Fatalf("mirror without secrets: %v", err)
	}
	if got, ok := openTestStore(t, c, StoreConfig{}).Mirror("plain"); !ok || !reflect.DeepEqual(got, plain) {
		t.Fatalf("reloaded %+v, %v", got, ok)
	}
}

func TestStoreWrongKeyOnReopen(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{Sealer: mustTestSealer(t, fixtureSecretKey)})
	if err := s.PutMirror(ctx, secretMirror("m")); err != nil {
		t.Fatal(err)
	}

	_, err := OpenStore(ctx, c.Client(t), StoreConfig{Sealer: mustTestSealer(t, otherSecretKey)})
	if !errors.Is(err, ErrSecretKeyMismatch) {
		t.Fatalf("reopen with another key: err = %v, want ErrSecretKeyMismatch", err)
	}
	for _, want := range []string{"secret key does not match the one the secret was stored with", `"mirror/m"`, "KAFKAMIRROR_SECRET_KEY"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}

	_, err = OpenStore(ctx, c.Client(t), StoreConfig{})
	if !errors.Is(err, ErrNoSecretKey) || !strings.Contains(err.Error(), "KAFKAMIRROR_SECRET_KEY") {
		t.Fatalf("reopen without a key: err = %v, want one naming KAFKAMIRROR_SECRET_KEY", err)
	}
}

func TestStoreReadStoreMissingTopic(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	r, err := ReadStore(ctx, c.Client(t), StoreConfig{})
	if err != nil {
		t.Fatalf("ReadStore: %v", err)
	}
	if len(r.Mirrors()) != 0 || len(r.TopicConfigs()) != 0 || len(r.LastMirrorsForTopic("t")) != 0 {
		t.Fatal("ReadStore of a cluster without the topic is not empty")
	}
	if c.Fake().TopicInfo(DefaultStoreTopic) != nil {
		t.Fatalf("ReadStore created %s", DefaultStoreTopic)
	}
	td, err := c.Admin(t).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td.Has(DefaultStoreTopic) {
		t.Fatalf("ReadStore created %s", DefaultStoreTopic)
	}
	if err := r.PutTopicConfig(ctx, "t", TopicConfigRecord{MirrorName: "m"}); !errors.Is(err, ErrReadOnlyStore) {
		t.Fatalf("write to a ReadStore: %v", err)
	}
	if c.Fake().TopicInfo(DefaultStoreTopic) != nil {
		t.Fatalf("a refused write created %s", DefaultStoreTopic)
	}
}

// TestStoreReadStoreOfOtherCluster: the failback read of the other cluster's
// store sees everything but secrets, needs no key, and cannot write.
func TestStoreReadStoreOfOtherCluster(t *testing.T) {
	src := kafkatest.New(t)
	ctx := storeTestCtx(t)
	// The "other" cluster's engine (source side here) wrote its store with its own key.
	theirs := openTestStore(t, src, StoreConfig{Sealer: mustTestSealer(t, otherSecretKey)})
	fillStore(t, ctx, theirs)

	r, err := ReadStore(ctx, src.Client(t), StoreConfig{Sealer: mustTestSealer(t, fixtureSecretKey)})
	if err != nil {
		t.Fatalf("ReadStore: %v", err)
	}
	m, ok := r.Mirror("alpha")
	if !ok || m.Source.SASL.Password != "" || m.Source.TLS.ClientKeyPEM != "" {
		t.Fatalf("ReadStore mirror = %+v, %v; want it without secrets", m, ok)
	}
	want := normalizedMirror(secretMirror("alpha"))
	want.Source.SASL.Password, want.Source.TLS.ClientKeyPEM = "", ""
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("ReadStore mirror\n%+v\nwant\n%+v", m, want)
	}
	if !reflect.DeepEqual(r.LastMirrorsForTopic("orders"), theirs.LastMirrorsForTopic("orders")) ||
		!reflect.DeepEqual(r.TopicConfigs(), theirs.TopicConfigs()) ||
		!reflect.DeepEqual(r.Partitions("beta", "payments"), theirs.Partitions("beta", "payments")) {
		t.Fatal("ReadStore differs from the writer's view")
	}
	for name, err := range map[string]error{
		"PutMirror":         r.PutMirror(ctx, MirrorRecord{Name: "x"}),
		"DeleteMirror":      r.DeleteMirror(ctx, "alpha"),
		"PutPartition":      r.PutPartition(ctx, "m", "t", 0, PartitionRecord{}),
		"DeletePartitions":  r.DeletePartitions(ctx, "alpha", "orders"),
		"PutLastMirror":     r.PutLastMirror(ctx, "m", "t", 0, LastMirrorRecord{}),
		"DeleteTopicConfig": r.DeleteTopicConfig(ctx, "orders"),
	} {
		if !errors.Is(err, ErrReadOnlyStore) {
			t.Fatalf("%s on a ReadStore: %v", name, err)
		}
	}
}

// produceStoreRaw writes records to the store topic directly, as another tool or
// a newer kafkamirror would.
func produceStoreRaw(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(storeTestCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestStoreBadRecords: values that do not decode (garbage, a newer version, a secret the
// key that opens the others does not open) stay out of the view, are kept as bad records
// with where they are, and leave the rest loaded; a later write of the key clears them.
func TestStoreBadRecords(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	sealer := mustTestSealer(t, fixtureSecretKey)
	s := openTestStore(t, c, StoreConfig{Sealer: sealer})
	fillStore(t, ctx, s)
	if err := s.PutMirror(ctx, secretMirror("tampered")); err != nil {
		t.Fatal(err)
	}
	tampered, _ := s.Record("mirror/tampered")
	// One sealed byte changed: the key still opens alpha's secrets, so this is the record's fault.
	value := bytes.Replace(tampered.Value, []byte(`"password":"enc:v1:`), []byte(`"password":"enc:v1:A`), 1)
	produceStoreRaw(t, c.Client(t),
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("partition/alpha/orders/1"), Value: []byte("garbage{")},
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("partition/m/t/1"), Value: []byte(`{"v":2,"state":{"code":2}}`)},
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("mirror/beta"), Value: []byte(`{"v":1,"source":7}`)},
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("mirror/tampered"), Value: value},
	)

	log, logs := storeTestLogger()
	r, err := OpenStore(ctx, c.Client(t), StoreConfig{Sealer: sealer, Logger: log})
	if err != nil {
		t.Fatalf("bad records failed the load: %v", err)
	}
	bad := r.BadRecords()
	var keys []string
	for _, b := range bad {
		keys = append(keys, b.Key)
		if !strings.Contains(b.Problem, `"`+b.Key+`"`) || b.Offset <= 0 || b.StatePartition != 0 || len(b.Value) == 0 {
			t.Fatalf("bad record %+v: want its problem naming the key, and where it is", b)
		}
		if !strings.Contains(logs.String(), "key="+b.Key) {
			t.Fatalf("bad record %s was not logged:\n%s", b.Key, logs)
		}
	}
	if strings.Join(keys, " ") != "mirror/beta mirror/tampered partition/alpha/orders/1 partition/m/t/1" {
		t.Fatalf("bad records %v", keys)
	}
	if b := bad[2]; b.Kind != "partition" || b.Mirror != "alpha" || b.Topic != "orders" || b.Partition != 1 || string(b.Value) != "garbage{" {
		t.Fatalf("bad partition record %+v", b)
	}
	if b := bad[0]; b.Kind != "mirror" || b.Mirror != "beta" || b.Topic != "" || b.Partition != -1 {
		t.Fatalf("bad mirror record %+v", b)
	}
	var ve *RecordVersionError
	if _, err := decodeEntry(RecordKey{Kind: KindPartition}, "partition/m/t/1", bad[3].Value, nil, openSecrets); !errors.As(err, &ve) || !strings.Contains(bad[3].Problem, "upgrade the worker") {
		t.Fatalf("newer version: %v, problem %q", err, bad[3].Problem)
	}
	// Everything else loaded.
	if _, ok := r.Mirror("beta"); ok {
		t.Fatal("a bad mirror record is in the view")
	}
	if _, ok := r.Partition("alpha", "orders", 1); ok {
		t.Fatal("a bad partition record is in the view")
	}
	if m, ok := r.Mirror("alpha"); !ok || m.Source.SASL.Password != storeTestPassword {
		t.Fatalf("alpha = %+v, %v", m, ok)
	}
	if got := len(r.Partitions("alpha", "orders")); got != 2 {
		t.Fatalf("alpha/orders has %d partition records, want the 2 good ones", got)
	}

	// The other cluster's reader takes all or nothing.
	if _, err := ReadStore(ctx, c.Client(t), StoreConfig{}); !errors.As(err, &ve) || !strings.Contains(err.Error(), "mirror/beta") {
		t.Fatalf("ReadStore with bad records: err = %v", err)
	}

	// A good write and a tombstone each clear their key, for this store and the next.
	if err := r.PutPartition(ctx, "alpha", "orders", 1, PartitionRecord{Status: partitionstate.Status{State: partitionstate.StatePreparing}}); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteKey(ctx, "mirror/beta"); err != nil {
		t.Fatal(err)
	}
	if err := r.DeletePartitions(ctx, "m", "t"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Store{r, openTestStore(t, c, StoreConfig{Sealer: sealer})} {
		if got := s.BadRecords(); len(got) != 1 || got[0].Key != "mirror/tampered" {
			t.Fatalf("bad records after the repairs: %+v", got)
		}
		if rec, ok := s.Record("partition/alpha/orders/1"); !ok || rec.Problem != "" || rec.Offset <= bad[2].Offset {
			t.Fatalf("rewritten record: %+v, %v", rec, ok)
		}
		if _, ok := s.Record("mirror/beta"); ok {
			t.Fatal("a deleted bad record is still there")
		}
	}
}

func TestStoreUnknownKeysSkipped(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{})
	if err := s.PutTopicConfig(ctx, "t", TopicConfigRecord{MirrorName: "m"}); err != nil {
		t.Fatal(err)
	}
	produceStoreRaw(t, c.Client(t),
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("groupsync/m/g"), Value: []byte(`{"v":7}`)},
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("partition/m/t/007"), Value: []byte(`garbage`)},
		&kgo.Record{Topic: DefaultStoreTopic, Key: []byte("mirror/a/b"), Value: []byte(`{}`)},
	)
	log, logs := storeTestLogger()
	reopened, err := OpenStore(ctx, c.Client(t), StoreConfig{Logger: log})
	if err != nil {
		t.Fatalf("unknown keys failed the load: %v", err)
	}
	requireSameStoreView(t, reopened, s)
	for _, key := range []string{"groupsync/m/g", "partition/m/t/007", "mirror/a/b"} {
		if !strings.Contains(logs.String(), key) {
			t.Fatalf("the skipped key %s was not logged:\n%s", key, logs)
		}
	}
}

func TestStoreRejectsNonCompactedTopic(t *testing.T) {
	c := kafkatest.New(t)
	c.CreateTopic(t, DefaultStoreTopic, 1, nil)
	_, err := OpenStore(storeTestCtx(t), c.Client(t), StoreConfig{})
	if err == nil || !strings.Contains(err.Error(), "cleanup.policy") || !strings.Contains(err.Error(), `"delete"`) {
		t.Fatalf("OpenStore on a delete-policy topic: err = %v", err)
	}

	c.CreateTopic(t, "compact-delete", 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact,delete")})
	_, err = OpenStore(storeTestCtx(t), c.Client(t), StoreConfig{Topic: "compact-delete"})
	if err == nil || !strings.Contains(err.Error(), "cleanup.policy") {
		t.Fatalf("OpenStore on a compact,delete topic: err = %v", err)
	}
}

func TestStoreRejectsUnsafeClient(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	for name, opts := range map[string][]kgo.Opt{
		"leader acks":                 {kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()},
		"no idempotence, 5 in flight": {kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5)},
		"transactional":               {kgo.TransactionalID("x")},
		"default topic always":        {kgo.DefaultProduceTopic("elsewhere"), kgo.DefaultProduceTopicAlways()},
	} {
		if _, err := OpenStore(ctx, c.Client(t, opts...), StoreConfig{}); err == nil {
			t.Fatalf("%s: OpenStore accepted the client", name)
		}
	}
	if c.Fake().TopicInfo(DefaultStoreTopic) != nil {
		t.Fatal("a refused client created the topic")
	}
	if _, err := OpenStore(ctx, c.Client(t, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(1)), StoreConfig{}); err != nil {
		t.Fatalf("non-idempotent with one request in flight: %v", err)
	}
}

func TestStoreRejectsBadKeys(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{})
	for name, err := range map[string]error{
		"mirror with /":      s.PutMirror(ctx, MirrorRecord{Name: "a/b"}),
		"empty mirror":       s.PutMirror(ctx, MirrorRecord{}),
		"topic with /":       s.PutTopicConfig(ctx, "a/b", TopicConfigRecord{MirrorName: "m"}),
		"empty mirror.name":  s.PutTopicConfig(ctx, "t", TopicConfigRecord{}),
		"negative partition": s.PutPartition(ctx, "m", "t", -1, PartitionRecord{}),
		"undefined state":    s.PutPartition(ctx, "m", "t", 0, PartitionRecord{Status: partitionstate.Status{State: partitionstate.State(42)}}),
		"last mirror topic":  s.PutLastMirror(ctx, "m", "", 0, LastMirrorRecord{}),
		"delete mirror /":    s.DeleteMirror(ctx, "x/y"),
	} {
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	ends, err := c.Admin(t).ListEndOffsets(ctx, DefaultStoreTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Fatalf("refused writes reached the topic (end offset %d)", o.Offset)
		}
	})
}

// TestStoreConcurrentWrites: many goroutines writing the same keys; the view
// must end equal to what the log says (what a reload builds), whatever order
// the acknowledgements came back in.
func TestStoreConcurrentWrites(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{Partitions: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 8*40)
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				p := int32(i % 4) // four keys shared by every goroutine
				r := PartitionRecord{Status: partitionstate.Status{State: partitionstate.StateMirroring, Previous: partitionstate.StatePreparing, StateEpoch: int32(g*1000 + i)}}
				if err := s.PutPartition(ctx, "m", "t", p, r); err != nil {
					errs <- err
				}
				if i%10 == 9 {
					if err := s.DeletePartitions(ctx, "m", "t"); err != nil {
						errs <- err
					}
				}
				_ = s.Partitions("m", "t") // reads race with writes (run with -race)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	requireSameStoreView(t, openTestStore(t, c, StoreConfig{Partitions: 2}), s)
}

// TestStoreLateAckDoesNotOverwrite: when an older write of a key reaches the
// view after a newer one (acknowledgements of concurrent writes race), the
// view keeps the newer value, which is also what the log ends with.
func TestStoreLateAckDoesNotOverwrite(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{})
	entered, release := make(chan struct{}), make(chan struct{})
	s.testHookAcked = func(seqs []uint64) {
		if seqs[0] == 1 { // the first write: hold it back
			close(entered)
			<-release
		}
	}
	rec := func(epoch int32) PartitionRecord {
		return PartitionRecord{Status: partitionstate.Status{State: partitionstate.StateMirroring, Previous: partitionstate.StatePreparing, StateEpoch: epoch}}
	}
	older := make(chan error, 1)
	go func() { older <- s.PutPartition(ctx, "m", "t", 0, rec(1)) }()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first write was never acknowledged")
	}
	if err := s.PutPartition(ctx, "m", "t", 0, rec(2)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-older; err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Partition("m", "t", 0); got.Status.StateEpoch != 2 {
		t.Fatalf("view has state epoch %d after the late acknowledgement, want 2", got.Status.StateEpoch)
	}
	requireSameStoreView(t, openTestStore(t, c, StoreConfig{}), s)
}

// TestStoreWriteUnacknowledgedInTime: a write whose context ends before its
// acknowledgement returns at once, saying so, and its acknowledgement, when it
// comes, still reaches the view: the view never differs from the log.
func TestStoreWriteUnacknowledgedInTime(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{})
	acked, release := make(chan struct{}), make(chan struct{})
	s.testHookAcked = func([]uint64) {
		close(acked)
		<-release
	}
	wctx, cancel := context.WithCancel(ctx)
	wrote := make(chan error, 1)
	go func() { wrote <- s.PutTopicConfig(wctx, "t", TopicConfigRecord{MirrorName: "m"}) }()
	select {
	case <-acked: // the destination appended it; the acknowledgement is held back
	case <-ctx.Done():
		t.Fatal("the write was never acknowledged")
	}
	cancel()
	if err := <-wrote; !errors.Is(err, ErrWriteUnacknowledged) {
		t.Fatalf("write whose context ended first: %v, want errWriteUnacknowledged", err)
	}
	close(release)
	kafkatest.WaitUntil(t, 30*time.Second, "the late acknowledgement in the view", func() bool {
		tc, ok := s.TopicConfig("t")
		return ok && tc.MirrorName == "m"
	})
	requireSameStoreView(t, openTestStore(t, c, StoreConfig{}), s)
}

// TestStoreKeyInTwoPartitions: should a key's records ever land in two
// partitions (a changed partition count, a non-hashing partitioner), the
// record with the newest timestamp wins and a warning says so.
func TestStoreKeyInTwoPartitions(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	openTestStore(t, c, StoreConfig{Partitions: 2})
	manual := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now()
	value := func(mirror string) []byte { return []byte(`{"v":1,"mirror.name":"` + mirror + `"}`) }
	produceStoreRaw(t, manual,
		&kgo.Record{Topic: DefaultStoreTopic, Partition: 1, Key: []byte("topicconfig/t"), Value: value("old"), Timestamp: base},
		&kgo.Record{Topic: DefaultStoreTopic, Partition: 0, Key: []byte("topicconfig/t"), Value: value("new"), Timestamp: base.Add(time.Second)},
		&kgo.Record{Topic: DefaultStoreTopic, Partition: 0, Key: []byte("topicconfig/u"), Value: value("kept"), Timestamp: base.Add(time.Second)},
		&kgo.Record{Topic: DefaultStoreTopic, Partition: 1, Key: []byte("topicconfig/u"), Timestamp: base.Add(2 * time.Second)}, // newer tombstone
	)
	log, logs := storeTestLogger()
	s, err := OpenStore(ctx, c.Client(t), StoreConfig{Partitions: 2, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := s.TopicConfig("t"); !ok || tc.MirrorName != "new" {
		t.Fatalf("TopicConfig(t) = %+v, %v; want the newer record", tc, ok)
	}
	if _, ok := s.TopicConfig("u"); ok {
		t.Fatal("the newer tombstone in the other partition did not delete u")
	}
	if !strings.Contains(logs.String(), "topicconfig/t") || !strings.Contains(logs.String(), "more than one partition") {
		t.Fatalf("no warning about the split key:\n%s", logs)
	}
}

// TestStoreLoadSurvivesOddFetchAnswers drives the loader through answers a
// real broker gives: a moved leader, a new leader whose high watermark lags
// the listed end offset, and an empty answer below the end offset because
// compaction removed the partition's tail.
func TestStoreLoadSurvivesOddFetchAnswers(t *testing.T) {
	c := kafkatest.New(t)
	ctx := storeTestCtx(t)
	s := openTestStore(t, c, StoreConfig{})
	if err := s.PutTopicConfig(ctx, "a", TopicConfigRecord{MirrorName: "m"}); err != nil { // offset 0
		t.Fatal(err)
	}
	if err := s.PutTopicConfig(ctx, "b", TopicConfigRecord{MirrorName: "m"}); err != nil { // offset 1
		t.Fatal(err)
	}
	if err := s.DeleteTopicConfig(ctx, "never-existed"); err != nil { // offset 2: the "compacted" tail
		t.Fatal(err)
	}

	// The real answer at offset 0, cut to its first two batches, stands
	// for a response that ends before the end offset.
	cl := c.Client(t)
	id, leaders, _, err := describeStoreTopic(ctx, cl, DefaultStoreTopic, true)
	if err != nil {
		t.Fatal(err)
	}
	full, _, err := fetchStorePartition(ctx, cl, DefaultStoreTopic, id, 0, leaders[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	firstTwo := full.RecordBatches
	cut := 0
	for range 2 { // a batch is 8 bytes of base offset, 4 of length, then length bytes
		cut += 12 + int(binary.BigEndian.Uint32(firstTwo[cut+8:]))
	}
	firstTwo = firstTwo[:cut]

	var mu sync.Mutex
	var answered []string
	answer := func(req *kmsg.FetchRequest, code int16, hwm int64, batches []byte) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = req.Topics[0].Topic, req.Topics[0].TopicID
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = req.Topics[0].Partitions[0].Partition
		rp.ErrorCode = code
		rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hwm, hwm, 0
		rp.RecordBatches = batches
		rt.Partitions = append(rt.Partitions, rp)
		resp.Topics = append(resp.Topics, rt)
		return resp
	}
	// Each control answers one fetch (kfake drops a control once it has
	// answered), in the order added.
	script := []struct {
		offset  int64
		name    string
		code    int16
		hwm     int64
		batches []byte
	}{
		{0, "not leader", kerr.NotLeaderForPartition.Code, -1, nil},
		{0, "lagging high watermark", 0, 0, nil},
		{0, "offsets 0 and 1", 0, 3, firstTwo},
		{2, "compacted tail", 0, 3, nil},
	}
	for _, step := range script {
		c.Fake().ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			req := kreq.(*kmsg.FetchRequest)
			if len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].FetchOffset != step.offset {
				return nil, nil, false
			}
			mu.Lock()
			answered = append(answered, step.name)
			mu.Unlock()
			return answer(req, step.code, step.hwm, step.batches), nil, true
		})
	}
	reopened, err := OpenStore(ctx, c.Client(t), StoreConfig{})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	requireSameStoreView(t, reopened, s)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"not leader", "lagging high watermark", "offsets 0 and 1", "compacted tail"}; !reflect.DeepEqual(answered, want) {
		t.Fatalf("scripted answers used: %v, want %v", answered, want)
	}
}
