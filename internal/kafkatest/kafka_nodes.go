package kafkatest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// KillBroker ends broker id of a real cluster with SIGKILL, as a crash would.
func (c *Cluster) KillBroker(t TB, id int32) {
	t.Helper()
	c.stopBroker(t, id, true)
}

// StopBroker shuts broker id of a real cluster down cleanly.
func (c *Cluster) StopBroker(t TB, id int32) {
	t.Helper()
	c.stopBroker(t, id, false)
}

func (c *Cluster) stopBroker(t TB, id int32, kill bool) {
	t.Helper()
	b := c.realBroker(t, id)
	if b == nil {
		return
	}
	b.stop(kill)
}

// RestartBroker starts a stopped or killed broker of a real cluster again and waits until
// it listens; a broker that runs is left alone (so a test's cleanup can restore every
// broker it may have stopped).
func (c *Cluster) RestartBroker(t TB, id int32) {
	t.Helper()
	b := c.realBroker(t, id)
	if b == nil || b.running() {
		return
	}
	if err := c.kafka.startNode(b); err != nil {
		t.Fatalf("%v", err)
		return
	}
	if err := c.kafka.waitListening([]*kafkaNode{b}, startupTimeout); err != nil {
		t.Fatalf("%v\n%s", err, c.kafka.logTail(40))
	}
}

// BrokerIDs returns the node ids of a cluster's brokers.
func (c *Cluster) BrokerIDs() []int32 {
	if c.kafka == nil {
		ids := make([]int32, len(c.addrs))
		for i := range ids {
			ids[i] = int32(i)
		}
		return ids
	}
	ids := make([]int32, len(c.kafka.brokers))
	for i, b := range c.kafka.brokers {
		ids[i] = b.id
	}
	return ids
}

func (c *Cluster) realBroker(t TB, id int32) *kafkaNode {
	t.Helper()
	if c.kafka == nil {
		t.Fatalf("kafkatest: broker control needs a real Kafka cluster; %s is kfake", c.id)
		return nil
	}
	b, err := c.kafka.broker(id)
	if err != nil {
		t.Fatalf("%v", err)
		return nil
	}
	return b
}

// shared holds the clusters that tests of one package share (Shared), until Main closes
// them at the end of the test binary.
var shared struct {
	mu       sync.Mutex
	clusters map[string]*sharedCluster
}

type sharedCluster struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns the cluster named name, starting it with opts on first use; later calls
// with the same name get the same cluster whatever their opts. Tests that share a cluster
// must keep out of each other's way (topics of their own). Main closes shared clusters when
// the package's tests end: a package that uses Shared must call it from TestMain.
func Shared(t TB, name string, opts ...Option) *Cluster {
	t.Helper()
	requireTier(t, opts)
	shared.mu.Lock()
	if shared.clusters == nil {
		shared.clusters = map[string]*sharedCluster{}
	}
	sc := shared.clusters[name]
	if sc == nil {
		sc = &sharedCluster{}
		shared.clusters[name] = sc
	}
	shared.mu.Unlock()
	sc.once.Do(func() {
		start := time.Now()
		sc.c, sc.err = Start(opts...)
		if sc.err == nil {
			t.Logf("kafkatest: shared cluster %q (%s) started in %v", name, sc.c.Broker(), time.Since(start).Round(time.Millisecond))
		}
	})
	if sc.err != nil {
		t.Fatalf("kafkatest: shared cluster %q: %v", name, sc.err)
		return nil
	}
	t.Cleanup(func() {
		if sc.c.kafka != nil && t.Failed() {
			sc.c.kafka.keep.Store(true)
			t.Logf("%s", sc.c.kafka.problems(40))
		}
	})
	return sc.c
}

// M is the part of *testing.M that Main needs.
type M interface{ Run() int }

// Main runs a package's tests and then closes its shared clusters. Call it from TestMain:
//
//	func TestMain(m *testing.M) { kafkatest.Main(m) }
func Main(m M) { os.Exit(Finish(m.Run())) }

// Finish closes the shared clusters and writes the tier report (see Tally); it returns the
// exit code: code, or 1 when that failed. For a TestMain that has more to do than Main.
func Finish(code int) int {
	shared.mu.Lock()
	var wg sync.WaitGroup
	for _, sc := range shared.clusters {
		if sc.c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); sc.c.Close() }()
		}
	}
	shared.mu.Unlock()
	wg.Wait()
	if err := sharedStrictErrors(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := writeTally(testPackage()); err != nil {
		fmt.Fprintln(os.Stderr, "kafkatest: tier report:", err)
		code = 1
	}
	return code
}

// testPackage names the package under test by its test binary ("mirrorengine.test").
func testPackage() string {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}

func sharedStrictErrors() error {
	for name, sc := range shared.clusters {
		if sc.c == nil {
			continue
		}
		if err := sc.c.strictErr(); err != nil {
			return fmt.Errorf("kafkatest: shared cluster %q: %w", name, err)
		}
	}
	return nil
}

// MoveLeader makes the next in-sync replica of topic's partition p its leader, as a
// reassignment that reorders the replicas and a preferred leader election do on a real
// cluster, and returns the new leader. Its new epoch fences fetches and produces still
// naming the old one.
func (c *Cluster) MoveLeader(t TB, topic string, p int32) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := c.Admin(t)
	leader := int32(-1)
	WaitFor(t, time.Minute, fmt.Sprintf("a new leader of %s[%d]", topic, p), func() (bool, string) {
		meta, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		part, ok := meta.Topics[topic].Partitions[p]
		switch {
		case !ok:
			return false, "the metadata has no such partition"
		case len(part.ISR) < 2:
			return false, fmt.Sprintf("in-sync replicas %v", part.ISR)
		}
		if leader < 0 {
			leader = part.Leader
		} else if part.Leader != leader {
			leader = part.Leader
			return true, ""
		}
		i := slices.Index(part.ISR, part.Leader)
		next := part.ISR[(i+1)%len(part.ISR)]
		order := append([]int32{next}, slices.DeleteFunc(slices.Clone(part.Replicas), func(r int32) bool { return r == next })...)
		moved, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{topic: {p: order}})
		if err == nil {
			err = moved.Error()
		}
		if err != nil {
			return false, "reassign: " + err.Error()
		}
		elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {p: {}}})
		if err != nil {
			return false, "elect: " + err.Error()
		}
		if r := elected[topic][p]; r.Err != nil {
			return false, "elect: " + r.Err.Error()
		}
		return false, "elected; the metadata does not say so yet"
	})
	return leader
}
