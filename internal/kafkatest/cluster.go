// Package kafkatest starts Kafka clusters for tests — in-process kfake clusters
// (internal/embedded's, in strict mode) and real Apache Kafka clusters (KRaft,
// one JVM per node; see Kafka) behind one Cluster type — and offers a comparator
// that proves two partitions identical offset for offset.
//
// kfake clusters are strict by default: kfake is made to behave like a real
// broker where the mirror's correctness depends on it (asynchronous transaction
// markers, LogValidator rejections). See strict.go.
//
// The package must not depend on the engine (internal/mirrorengine, internal/datapath,
// internal/recordbatch): the comparator is the independent judge of the engine's output.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/embedded"
)

// TB is the part of testing.TB the test-support packages (this one and workertest) need.
// testing.TB has it, and so has the benchmark command (tools/bench), which runs clusters and
// workers outside a test; it keeps the "testing" package out of non-test builds.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
	Logf(format string, args ...any)
	Failed() bool
}

// DefaultMarkerDelay is how long strict mode keeps a transaction's markers
// out of the log after EndTxn succeeded.
const DefaultMarkerDelay = 20 * time.Millisecond

// Option configures a test cluster.
type Option func(*config)

type config struct {
	id          string
	brokers     int
	ports       []int
	dataDir     string
	lenient     bool
	aclUser     string
	aclPassword string
	users       map[string]string // ordinary SCRAM users: no permissions until ACLs grant them
	markerDelay time.Duration

	maxVersions *kversion.Versions // kfake answers as this Kafka release would; nil: all it has

	kafkaVersion  string                          // a real Apache Kafka cluster of this version; "" for kfake
	brokerConfigs map[string]string               // real brokers' server.properties overrides
	jvmOptions    []string                        // real brokers' JVM options; nil: testJVMOptions
	leasePorts    func(n int) (*portLease, error) // real brokers' ports; nil: leasePorts

	// markerGate, when set, holds every deferred marker until it is
	// closed (tests use it to observe the window deterministically).
	markerGate <-chan struct{}
}

// ClusterID sets the cluster id (default: a random "kafkatest-…" id). A
// cluster restarted from a DataDir keeps the id it was first created with.
func ClusterID(id string) Option { return func(c *config) { c.id = id } }

// Brokers sets the number of brokers (default 1).
func Brokers(n int) Option { return func(c *config) { c.brokers = n } }

// Ports pins the brokers' ports on 127.0.0.1; the broker count becomes
// len(ports).
func Ports(ports ...int) Option {
	return func(c *config) { c.ports = append([]int(nil), ports...) }
}

// DataDir persists the cluster in dir with synchronous writes, so its data
// survives Close and a later Start with the same dir.
func DataDir(dir string) Option { return func(c *config) { c.dataDir = dir } }

// Lenient turns strict mode off: kfake's own (synchronous, permissive)
// behaviour. Meant for benchmarks and for tests about kfake itself.
func Lenient() Option { return func(c *config) { c.lenient = true } }

// WithACLs enables SASL (SCRAM-SHA-256 and PLAIN) and ACL enforcement with
// superUser as the only super user. ClientOpts authenticates as superUser.
func WithACLs(superUser, password string) Option {
	return func(c *config) { c.aclUser, c.aclPassword = superUser, password }
}

// User adds an ordinary SCRAM-SHA-256 user to a WithACLs cluster. It holds no permissions
// until ACLs grant them, so tests can show what a mirror does without the rights it needs.
// Connect as it with ClientOptsAs.
func User(name, password string) Option {
	return func(c *config) {
		if c.users == nil {
			c.users = map[string]string{}
		}
		c.users[name] = password
	}
}

// MarkerDelay sets how long strict mode keeps transaction markers out of
// the log after EndTxn succeeded (default DefaultMarkerDelay).
func MarkerDelay(d time.Duration) Option { return func(c *config) { c.markerDelay = d } }

// MaxVersions makes a kfake cluster advertise only the requests and versions of v (for
// example kversion.V2_8_0()), as that Kafka release would.
func MaxVersions(v *kversion.Versions) Option { return func(c *config) { c.maxVersions = v } }

// Kafka makes the cluster a real Apache Kafka cluster of version (KafkaNewest,
// KafkaOldest, …) fetched from Maven Central by FetchKafka, instead of kfake. The cluster
// id is a Kafka Uuid chosen at format time (ClusterID is ignored: read ID); Lenient and
// MarkerDelay do not apply; a real broker is strict by nature.
func Kafka(version string) Option { return func(c *config) { c.kafkaVersion = version } }

// BrokerConfig sets a real broker's server.properties entry (transaction timeouts, quotas,
// log cleaner settings, …). kfake clusters ignore it.
func BrokerConfig(key, value string) Option {
	return func(c *config) {
		if c.brokerConfigs == nil {
			c.brokerConfigs = map[string]string{}
		}
		c.brokerConfigs[key] = value
	}
}

// JVMOptions replaces the JVM options real brokers run with (by default a small heap and a
// quick-starting JIT, for tests that run several JVMs on two cores). kfake clusters ignore it.
func JVMOptions(opts ...string) Option { return func(c *config) { c.jvmOptions = opts } }

// Cluster is a running Kafka cluster: kfake, or real Apache Kafka brokers.
type Cluster struct {
	fake     *kfake.Cluster // nil for real Kafka
	kafka    *kafkaCluster  // nil for kfake
	cfg      config
	id       string
	addrs    []string
	internal *kgo.Client // admin requests and strict mode's DescribeTransactions
	strict   *strict     // nil when lenient

	fetchOnce sync.Once    // installs fetches' control (kfake)
	fetches   fetchControl // injected fetch faults and the Cleaner

	closeOnce sync.Once
}

// Start starts a cluster. Use New in tests.
func Start(opts ...Option) (*Cluster, error) {
	cfg := config{brokers: 1, markerDelay: DefaultMarkerDelay}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.id == "" {
		cfg.id = randomID()
	}
	if cfg.brokers < 1 {
		return nil, fmt.Errorf("kafkatest: %d brokers", cfg.brokers)
	}
	if cfg.kafkaVersion != "" {
		return startKafkaCluster(cfg)
	}
	ecfg := embedded.Config{ID: cfg.id, Brokers: cfg.brokers, Ports: cfg.ports, DataDir: cfg.dataDir,
		SuperUser: cfg.aclUser, SuperPassword: cfg.aclPassword, Users: cfg.users}
	if cfg.maxVersions != nil {
		ecfg.Kfake = append(ecfg.Kfake, kfake.MaxVersions(cfg.maxVersions))
	}
	ec, err := embedded.Start(ecfg)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	c := &Cluster{fake: ec.Fake(), cfg: cfg, id: ec.ID(), addrs: ec.Addrs()}
	if c.internal, err = kgo.NewClient(c.ClientOpts()...); err != nil {
		ec.Close()
		return nil, fmt.Errorf("kafkatest: internal client: %w", err)
	}
	if !cfg.lenient {
		c.strict, err = newStrict(c)
		if err != nil {
			c.internal.Close()
			ec.Close()
			return nil, err
		}
	}
	return c, nil
}

// connect makes the internal client and waits until every broker is in the cluster's
// metadata, reading the cluster id.
func (c *Cluster) connect(timeout time.Duration) error {
	var err error
	c.internal, err = kgo.NewClient(c.ClientOpts()...)
	if err != nil {
		return fmt.Errorf("kafkatest: internal client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if c.id, err = embedded.WaitBrokers(ctx, c.internal, len(c.addrs)); err != nil {
		c.internal.Close()
		return fmt.Errorf("kafkatest: %w", err)
	}
	if c.id == "" {
		c.id = c.cfg.id
	}
	return nil
}

func startKafkaCluster(cfg config) (*Cluster, error) {
	k, err := startKafka(cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{kafka: k, cfg: cfg, addrs: k.addrs()}
	if err := c.connect(startupTimeout); err != nil {
		err = fmt.Errorf("%w\n%s", err, k.logTail(40))
		k.close()
		return nil, err
	}
	if c.id != k.id {
		// Some other cluster answers on this one's ports.
		c.internal.Close()
		k.close()
		return nil, fmt.Errorf("kafkatest: Kafka %s at %v answers with cluster id %s, not %s, the id it was formatted with", k.version, c.addrs, c.id, k.id)
	}
	return c, nil
}

// New starts a cluster that is closed when the test ends; it fails the test
// if the cluster cannot start, or if strict mode could not deliver a
// transaction marker it had promised. It skips the test when the cluster's tier
// (TierFake or TierKafka) is not selected. When the test failed, a real cluster's
// warnings and errors are printed with the broker's log folder.
func New(t TB, opts ...Option) *Cluster {
	t.Helper()
	requireTier(t, opts)
	c, err := Start(opts...)
	if err != nil {
		t.Fatalf("kafkatest.New: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if c.kafka != nil && t.Failed() {
			c.kafka.keep.Store(true)
			t.Logf("%s", c.kafka.problems(40))
		}
		c.Close()
		if err := c.strictErr(); err != nil {
			t.Fatalf("kafkatest: cluster %s: %v", c.id, err)
		}
	})
	return c
}

// Pair starts a source and a destination cluster with the ids
// "source-cluster" and "destination-cluster". A DataDir option is split into
// the subdirectories "source" and "destination". Ports must not be given.
func Pair(t TB, opts ...Option) (src, dst *Cluster) {
	t.Helper()
	var probe config
	for _, o := range opts {
		o(&probe)
	}
	if len(probe.ports) > 0 {
		t.Fatalf("kafkatest.Pair: Ports would give both clusters the same ports; start them with New")
		return nil, nil
	}
	side := func(id, sub string) []Option {
		o := append(append([]Option(nil), opts...), ClusterID(id))
		if probe.dataDir != "" {
			o = append(o, DataDir(filepath.Join(probe.dataDir, sub)))
		}
		return o
	}
	src = New(t, side("source-cluster", "source")...)
	dst = New(t, side("destination-cluster", "destination")...)
	return src, dst
}

// Close delivers the transaction markers strict mode still holds (so a
// DataDir cluster restarts with them written), then stops the cluster.
// Close is idempotent.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.strict != nil {
			c.strict.close()
		}
		c.internal.Close()
		if c.kafka != nil {
			c.kafka.close()
			c.kafka.remove()
			return
		}
		c.fake.Close()
	})
}

// Addrs returns "127.0.0.1:port" for every broker.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// Processes returns the process ids of a real Kafka cluster's running JVMs (for benchmarks
// that measure their CPU); nil for kfake, which runs in this process.
func (c *Cluster) Processes() []int {
	if c.kafka == nil {
		return nil
	}
	var pids []int
	for _, n := range c.kafka.nodes() {
		n.mu.Lock()
		if n.cmd != nil && n.cmd.Process != nil {
			pids = append(pids, n.cmd.Process.Pid)
		}
		n.mu.Unlock()
	}
	return pids
}

// ID returns the cluster id as the cluster reports it.
func (c *Cluster) ID() string { return c.id }

// Fake returns the underlying kfake cluster (ShufflePartitionLeaders,
// Compact, DeleteRecords, …), or nil for real Kafka. Requests made through its
// admin helpers bypass strict mode.
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// Broker names what the cluster runs: "kfake" or "kafka-<version>".
func (c *Cluster) Broker() string {
	if c.kafka != nil {
		return "kafka-" + c.kafka.version
	}
	return "kfake"
}

// ClientOpts returns options for a client of this cluster: seed brokers,
// SASL when WithACLs was given, and timeouts that fail fast in tests.
func (c *Cluster) ClientOpts() []kgo.Opt {
	return c.ClientOptsAs(c.cfg.aclUser, c.cfg.aclPassword)
}

// ClientOptsAs is ClientOpts authenticating as another user (see User); an empty user
// connects without SASL.
func (c *Cluster) ClientOptsAs(user, password string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.addrs...),
		kgo.DialTimeout(5 * time.Second),
		kgo.RetryTimeout(20 * time.Second),
		// Everything is local: retry quickly instead of the default
		// 250ms-2.5s back-off, and refresh metadata soon after a leader
		// moves.
		kgo.RetryBackoffFn(func(tries int) time.Duration {
			d := 10 * time.Millisecond << min(tries, 4)
			return min(d, 150*time.Millisecond)
		}),
		kgo.MetadataMinAge(50 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
	if user != "" {
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()))
	}
	return opts
}

// Client returns a client of this cluster (ClientOpts, then opts), closed
// when the test ends.
func (c *Cluster) Client(t TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(c.ClientOpts(), opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: new client: %v", err)
		return nil
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client of this cluster, closed when the test ends.
func (c *Cluster) Admin(t TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(c.Client(t))
}

// CreateTopic creates topic with the given partitions and topic configs
// (nil for none) through the CreateTopics request, as a client would.
func (c *Cluster) CreateTopic(t TB, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(c.internal).CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("kafkatest: create topic %q on %s: %v", topic, c.id, err)
	}
	c.WaitTopic(t, topic, partitions)
}

// WaitTopic waits until every broker's metadata has topic with its partitions and their
// leaders. Real brokers learn of a new topic asynchronously, so a request right after
// CreateTopics can still get UNKNOWN_TOPIC_OR_PARTITION.
func (c *Cluster) WaitTopic(t TB, topic string, partitions int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.topicEverywhere(topic, partitions)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafkatest: topic %q on %s: %v", topic, c.id, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) topicEverywhere(topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leaders := map[int32]int32{}
	for _, id := range c.BrokerIDs() {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, c.internal.Broker(int(id)))
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || int32(len(resp.Topics[0].Partitions)) != partitions {
			return fmt.Errorf("broker %d does not list the topic with %d partitions yet", id, partitions)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("broker %d: partition %d has no leader yet", id, p.Partition)
			}
			leaders[p.Partition] = p.Leader
		}
	}
	// A KRaft broker publishes a new topic to its metadata cache before its replica manager
	// hosts the partitions: until then the leader answers requests for them with
	// UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER.
	for partition, leader := range leaders {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = partition, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, c.internal.Broker(int(leader)))
		if err != nil {
			return fmt.Errorf("broker %d: %w", leader, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("broker %d answered ListOffsets for %s[%d] without the partition", leader, topic, partition)
		}
		if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
			return fmt.Errorf("broker %d does not host %s[%d] yet: %w", leader, topic, partition, err)
		}
	}
	return nil
}

// strictErr returns the markers strict mode failed to deliver, if any.
func (c *Cluster) strictErr() error {
	if c.strict == nil {
		return nil
	}
	return errors.Join(c.strict.errors()...)
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "kafkatest-" + hex.EncodeToString(b[:])
}
