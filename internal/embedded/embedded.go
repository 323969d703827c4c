// Package embedded runs Kafka clusters inside the worker's process — franz-go's kfake — for
// trying kafkamirror without a Kafka cluster (`kafkamirror-worker demo`, `run --embedded`).
// A cluster can keep its data in a directory across restarts and require SASL/SCRAM with
// ACLs. The test support (internal/kafkatest) builds its kfake clusters on this package and
// adds strict mode to them; the embedded clusters are plain kfake.
package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Config is what cluster to start.
type Config struct {
	// ID is the cluster id. A cluster restarted from DataDir keeps the id it was created
	// with (read Cluster.ID).
	ID string
	// Brokers is the broker count; 0 means 1, or len(Ports).
	Brokers int
	// Ports pins the brokers' ports on 127.0.0.1; none picks free ones.
	Ports []int
	// DataDir keeps the cluster's data across restarts (written synchronously); empty
	// keeps it in memory.
	DataDir string
	// SuperUser and SuperPassword, when set, make the cluster require SASL (SCRAM-SHA-256
	// and PLAIN) and enforce ACLs, with SuperUser as the only super user.
	SuperUser, SuperPassword string
	// Users are more SCRAM-SHA-256 users, with no rights until ACLs grant them. They need
	// SuperUser.
	Users map[string]string
	// Kfake are further kfake options (the test support's version profiles).
	Kfake []kfake.Opt
}

// Cluster is a running embedded cluster.
type Cluster struct {
	fake  *kfake.Cluster
	cfg   Config
	id    string
	addrs []string
}

// startTimeout bounds the wait for a new cluster's brokers to answer.
const startTimeout = 10 * time.Second

// Start starts a cluster and waits until every broker answers.
func Start(cfg Config) (*Cluster, error) {
	brokers := cfg.Brokers
	if brokers == 0 {
		brokers = max(1, len(cfg.Ports))
	}
	opts := []kfake.Opt{kfake.NumBrokers(brokers)}
	if cfg.ID != "" {
		opts = append(opts, kfake.ClusterID(cfg.ID))
	}
	if len(cfg.Ports) > 0 {
		opts = append(opts, kfake.Ports(cfg.Ports...))
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir), kfake.SyncWrites())
	}
	switch {
	case cfg.SuperUser != "":
		opts = append(opts,
			kfake.EnableSASL(),
			kfake.EnableACLs(),
			kfake.Superuser("SCRAM-SHA-256", cfg.SuperUser, cfg.SuperPassword),
			kfake.Superuser("PLAIN", cfg.SuperUser, cfg.SuperPassword),
		)
		for name, pass := range cfg.Users {
			opts = append(opts, kfake.User("SCRAM-SHA-256", name, pass))
		}
	case len(cfg.Users) > 0:
		return nil, fmt.Errorf("embedded cluster %s: users need a super user", cfg.ID)
	}
	fake, err := kfake.NewCluster(append(opts, cfg.Kfake...)...)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster %s: %w", cfg.ID, err)
	}
	c := &Cluster{fake: fake, cfg: cfg, addrs: fake.ListenAddrs()}
	cl, err := kgo.NewClient(c.ClientOpts()...)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		c.id, err = WaitBrokers(ctx, cl, len(c.addrs))
		cancel()
		cl.Close()
	}
	if err != nil {
		fake.Close()
		return nil, fmt.Errorf("embedded cluster %s: %w", cfg.ID, err)
	}
	if c.id == "" {
		c.id = cfg.ID
	}
	return c, nil
}

// WaitBrokers waits until the cluster's metadata lists n brokers and returns its cluster id.
func WaitBrokers(ctx context.Context, cl *kgo.Client, n int) (string, error) {
	for {
		meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err == nil && len(meta.Brokers) == n {
			if meta.ClusterID == nil {
				return "", nil
			}
			return *meta.ClusterID, nil
		}
		if err == nil {
			err = fmt.Errorf("%d of %d brokers registered", len(meta.Brokers), n)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the cluster does not answer: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Addrs returns "127.0.0.1:port" for every broker.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// ID returns the cluster id as the cluster reports it.
func (c *Cluster) ID() string { return c.id }

// Fake returns the kfake cluster.
func (c *Cluster) Fake() *kfake.Cluster { return c.fake }

// ClientOpts returns the seed brokers and, for a cluster with a super user, SASL as it.
func (c *Cluster) ClientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.addrs...)}
	if c.cfg.SuperUser != "" {
		opts = append(opts, kgo.SASL(scram.Auth{User: c.cfg.SuperUser, Pass: c.cfg.SuperPassword}.AsSha256Mechanism()))
	}
	return opts
}

// Close stops the cluster.
func (c *Cluster) Close() { c.fake.Close() }
