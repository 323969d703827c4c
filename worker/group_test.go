package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// groupSession is the workers' session timeout in these tests: short, so that moving the
// work of a dead worker takes seconds. The destination must allow it.
const groupSession = 2 * time.Second

// groupEnv is the environment of one worker of a three-worker group on dst.
func groupEnv(dst *kafkatest.Cluster) []string {
	return workerEnv(dst, "KAFKAMIRROR_GROUP_SESSION_TIMEOUT="+groupSession.String(), "KAFKAMIRROR_GROUP_HEARTBEAT_INTERVAL=200ms",
		"KAFKAMIRROR_LOG_LEVEL=info")
}

// onGroupTiers runs f on kfake and on the newest Kafka of the real-broker tier (whose group
// coordinator is the real one), with a destination that allows short sessions and n workers
// of one group started on it over the topic "events" (startGroup).
func onGroupTiers(t *testing.T, partitions int32, n int, f func(t *testing.T, src, dst *kafkatest.Cluster, prod *kgo.Client, workers []*workerProc)) {
	t.Run("kfake", func(t *testing.T) {
		kafkatest.RequireFake(t)
		src, dst := kafkatest.Pair(t)
		// kafkatest's BrokerConfig is for real brokers; kfake takes the setting at run time.
		min := "500"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := dst.Admin(t).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "group.min.session.timeout.ms", Value: &min}}); err != nil {
			t.Fatal(err)
		}
		prod, workers := startGroup(t, src, dst, partitions, n)
		f(t, src, dst, prod, workers)
	})
	v := kafkatest.KafkaVersions()[0]
	t.Run("kafka-"+v, func(t *testing.T) {
		kafkatest.RequireKafka(t)
		src := kafkatest.New(t, kafkatest.Kafka(v))
		dst := kafkatest.New(t, kafkatest.Kafka(v), kafkatest.BrokerConfig("group.min.session.timeout.ms", "500"))
		kafkatest.Tally(t, src.Broker()+" → "+dst.Broker())
		prod, workers := startGroup(t, src, dst, partitions, n)
		f(t, src, dst, prod, workers)
	})
}

// startGroup creates the topic "events" with 1,000 records on src and starts n workers of one
// group on dst.
func startGroup(t *testing.T, src, dst *kafkatest.Cluster, partitions int32, n int) (*kgo.Client, []*workerProc) {
	t.Helper()
	src.CreateTopic(t, "events", partitions, nil)
	prod := src.Client(t)
	kafkatest.ProduceKeyed(t, prod, "events", 0, 1000)
	env := groupEnv(dst)
	workers := make([]*workerProc, n)
	for i := range workers {
		workers[i] = startWorker(t, env)
	}
	return prod, workers
}

// localStates is how many partitions the worker runs itself, by state (its /metrics).
func localStates(t *testing.T, w *workerProc) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range scrape(t, w.URL) {
		if s.name == "kafkamirror_partitions" && s.value > 0 {
			out[s.labels["state"]] = s.value
		}
	}
	return out
}

// TestWorkerGroupKillOne runs three workers on one destination: the partitions spread over
// them in a few rebalances, commands given to any worker apply once, and when one worker is
// SIGKILLed its partitions are MIRRORING on the others within the session timeout plus a few
// seconds, the others report how long those partitions went without an owner, and the logs
// are identical to the source's.
func TestWorkerGroupKillOne(t *testing.T) {
	t.Parallel()
	const partitions = 300
	onGroupTiers(t, partitions, 3, func(t *testing.T, src, dst *kafkatest.Cluster, prod *kgo.Client, workers []*workerProc) {
		ctx := ctxT(t)

		// Two applies creating one mirror with different settings through two workers at
		// once: one outcome (a create repeating the one that took effect would succeed).
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = workers[i+1].Client.CreateMirror(ctx, api.CreateMirrorRequest{Name: "g", Source: api.SourceConnection{BootstrapServers: src.Addrs()},
					Sync: &api.SyncSettings{Interval: fmt.Sprintf("%dm", i+1)}})
			}()
		}
		wg.Wait()
		var created int
		for _, err := range errs {
			var ae *api.Error
			switch {
			case err == nil:
				created++
			case errors.As(err, &ae) && ae.Code == api.CodeClusterMirrorAlreadyExists:
			default:
				t.Fatalf("concurrent create: %v", err)
			}
		}
		if created != 1 {
			t.Fatalf("concurrent creates through two workers: %d succeeded (%v), want exactly 1", created, errs)
		}

		if res, err := workers[2].Client.StartTopics(ctx, "g", []string{"events"}, ""); err != nil || res[0].Err() != nil {
			t.Fatalf("start: %+v, %v", res, err)
		}
		waitTopic(t, workers[0].Client, "g", "events", "every partition MIRRORING with lag 0, seen from any worker", caughtUp(api.StateMirroring))
		kafkatest.WaitFor(t, 30*time.Second, "the partitions spread over the three workers", func() (bool, string) {
			var counts []float64
			total := 0.0
			for _, w := range workers {
				n := localStates(t, w)[api.StateMirroring]
				counts = append(counts, n)
				total += n
			}
			for _, w := range workers {
				if n, _ := metric(scrape(t, w.URL), "kafkamirror_group_owned_units", "kind", "partition"); n < partitions/3-1 {
					return false, fmt.Sprintf("a worker owns %v partitions", n)
				}
			}
			for _, n := range counts {
				if n < partitions/3-1 || n > partitions/3+1 {
					return false, fmt.Sprintf("MIRRORING per worker: %v", counts)
				}
			}
			return total == partitions, fmt.Sprintf("MIRRORING per worker: %v", counts)
		})

		// Any worker's describe names the worker that runs each partition, as the group
		// coordinator holds the assignment: once the generation that spread them is stored.
		kafkatest.WaitFor(t, 10*time.Second, "the describe to name three workers", func() (bool, string) {
			d, err := workers[0].Client.GetTopic(ctx, "g", "events")
			if err != nil {
				return false, err.Error()
			}
			runs := map[string]int{}
			for _, p := range d.Partitions {
				runs[p.Worker]++
			}
			return len(runs) == 3 && runs[""] == 0, fmt.Sprintf("partitions per worker in the describe: %v", runs)
		})
		out, code := workers[1].cli(t, "group")
		if code != 0 || strings.Count(out, "http://") != 3 || strings.Count(out, "true") != 1 {
			t.Fatalf("kafkamirror-worker group: exit %d, want three workers, one applying the commands:\n%s", code, out)
		}
		t.Logf("kafkamirror-worker group:\n%s", out)
		// A worker learns the other workers' partitions when it next rereads __mirror_state
		// (every second).
		kafkatest.WaitFor(t, 10*time.Second, "describe --workers on another worker to name the worker of every partition", func() (bool, string) {
			out, code := workers[2].cli(t, "describe", "--mirror", "g", "--workers")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			column := slices.Index(strings.Fields(lines[0]), "WORKER")
			named := code == 0 && column > 0 && len(lines) == partitions+1
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				named = named && len(f) > column && f[column] != "-"
			}
			return named, out
		})

		// One rebalance per worker joining, and a few (two rounds each) per mirror and topic
		// started: workers that learn of new units do not each ask for their own. A worker
		// that lost its lease (a machine too busy to answer heartbeats in time) rejoins: the
		// bound holds only when none did.
		gen, _ := metric(scrape(t, workers[1].URL), "kafkamirror_group_generation")
		stoodDown := 0.0
		for _, w := range workers {
			n, _ := metric(scrape(t, w.URL), "kafkamirror_group_stood_down_total")
			stoodDown += n
		}
		if gen > maxGenerations && stoodDown == 0 {
			t.Fatalf("generation %v after three joins, a mirror and a topic, want at most %d", gen, maxGenerations)
		}
		t.Logf("generation %v before the kill (%v units stood down)", gen, stoodDown)

		before := []unownedSeconds{unowned(t, workers[1]), unowned(t, workers[2])}
		workers[0].Kill()
		<-workers[0].Done()
		killed := time.Now()
		kafkatest.WaitFor(t, groupSession+10*time.Second, "the dead worker's partitions MIRRORING on the others", func() (bool, string) {
			a, b := localStates(t, workers[1])[api.StateMirroring], localStates(t, workers[2])[api.StateMirroring]
			return a+b == partitions, fmt.Sprintf("MIRRORING: %v + %v", a, b)
		})
		t.Logf("the dead worker's partitions were MIRRORING on the others %v after the kill", time.Since(killed).Round(100*time.Millisecond))
		var took unownedSeconds
		for i, w := range workers[1:] {
			after := unowned(t, w)
			took.count += after.count - before[i].count
			took.sum += after.sum - before[i].sum
			took.within += after.within - before[i].within
		}
		if took.count < partitions/3-1 || took.sum == 0 || took.within != took.count {
			t.Fatalf("time without an owner of the partitions taken over: %d started, %.1f s in all, %d within %v s; want at least %d, more than 0 s, all within",
				took.count, took.sum, took.within, unownedBound, partitions/3-1)
		}
		t.Logf("the %d partitions taken over went %.2f s without an owner on average", took.count, took.sum/float64(took.count))
		kafkatest.ProduceKeyed(t, prod, "events", 1000, 2000)
		waitTopic(t, workers[1].Client, "g", "events", "every partition caught up on the two workers left", caughtUp(api.StateMirroring))
		kafkatest.WaitIdentical(t, src, dst, "events", 60*time.Second)

		for _, w := range workers[1:] {
			if code, body := w.raw(t, http.MethodGet, "/readyz", "", ""); code != http.StatusOK {
				t.Fatalf("readyz: %d %s", code, body)
			}
		}

		// A failover and a restart given to different workers reach the partitions of both.
		if res, err := workers[1].Client.StopTopics(ctx, "g", []string{"events"}); err != nil || res[0].Err() != nil {
			t.Fatalf("stop: %+v, %v", res, err)
		}
		waitTopic(t, workers[2].Client, "g", "events", "every partition STOPPED", inState(api.StateStopped))
		if res, err := workers[2].Client.StartTopics(ctx, "g", []string{"events"}, ""); err != nil || res[0].Err() != nil {
			t.Fatalf("restart: %+v, %v", res, err)
		}
		kafkatest.ProduceKeyed(t, prod, "events", 3000, 1000)
		waitTopic(t, workers[1].Client, "g", "events", "every partition MIRRORING again with lag 0", caughtUp(api.StateMirroring))
		kafkatest.WaitIdentical(t, src, dst, "events", 60*time.Second)
	})
}

// maxGenerations bounds the group's generation in TestWorkerGroupKillOne before the kill.
const maxGenerations = 8

// unownedBound bounds a partition's time without an owner as its new owner measures it: the
// lease (60% of the session timeout) plus a rebalance (kafkamirror_group_unowned_seconds's
// bucket boundary above groupSession+lease+2s).
const unownedBound = "5.12"

// unownedSeconds is a worker's kafkamirror_group_unowned_seconds for partitions: how many it
// started, their seconds in all, and how many within unownedBound.
type unownedSeconds struct {
	count, within int
	sum           float64
}

func unowned(t *testing.T, w *workerProc) unownedSeconds {
	t.Helper()
	samples := scrape(t, w.URL)
	count, _ := metric(samples, "kafkamirror_group_unowned_seconds_count", "kind", "partition")
	sum, _ := metric(samples, "kafkamirror_group_unowned_seconds_sum", "kind", "partition")
	within, _ := metric(samples, "kafkamirror_group_unowned_seconds_bucket", "kind", "partition", "le", unownedBound)
	return unownedSeconds{count: int(count), within: int(within), sum: sum}
}

// TestWorkerGroupZombie pauses a worker (SIGSTOP) past its session timeout while data flows:
// its partitions move to the other worker; resumed (SIGCONT), it writes nothing more to
// them: no partition FAILED (a stale write would be caught by the offset check), the logs
// stay identical, and its log says it stood down.
func TestWorkerGroupZombie(t *testing.T) {
	t.Parallel()
	const partitions = 40
	onGroupTiers(t, partitions, 2, func(t *testing.T, src, dst *kafkatest.Cluster, prod *kgo.Client, workers []*workerProc) {
		zombie, other := workers[0], workers[1]
		ctx := ctxT(t)
		mirrorTopics(ctx, t, other.Client, "z", src.Addrs(), "events")
		waitTopic(t, other.Client, "z", "events", "every partition MIRRORING with lag 0", caughtUp(api.StateMirroring))
		kafkatest.WaitFor(t, 30*time.Second, "partitions on both workers", func() (bool, string) {
			a, b := localStates(t, zombie)[api.StateMirroring], localStates(t, other)[api.StateMirroring]
			return a > 0 && a+b == partitions, fmt.Sprintf("MIRRORING: %v + %v", a, b)
		})

		if err := zombie.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resume := sync.OnceFunc(func() { _ = zombie.Cmd.Process.Signal(syscall.SIGCONT) })
		t.Cleanup(resume)
		// Data arrives for the paused worker's partitions; the other takes them over.
		kafkatest.ProduceKeyed(t, prod, "events", 1000, 1000)
		kafkatest.WaitFor(t, groupSession+10*time.Second, "every partition MIRRORING on the worker left", func() (bool, string) {
			n := localStates(t, other)[api.StateMirroring]
			return n == partitions, fmt.Sprintf("MIRRORING there: %v", n)
		})
		waitTopic(t, other.Client, "z", "events", "caught up without the paused worker", caughtUp(api.StateMirroring))

		resume()
		kafkatest.WaitFor(t, 30*time.Second, "the resumed worker saying it stood down", func() (bool, string) {
			return strings.Contains(zombie.Stderr.String(), "stood down"), "no such line yet"
		})
		if n, _ := metric(scrape(t, zombie.URL), "kafkamirror_group_stood_down_total"); n == 0 {
			t.Fatal("kafkamirror_group_stood_down_total is 0 after standing down")
		}
		kafkatest.ProduceKeyed(t, prod, "events", 2000, 1000)
		kafkatest.WaitIdentical(t, src, dst, "events", 60*time.Second)
		waitTopic(t, other.Client, "z", "events", "caught up after the resume, nothing FAILED", caughtUp(api.StateMirroring))
	})
}

// TestWorkerGroupRollingRestart restarts the three workers one after the other (SIGTERM, then
// a new process) while a producer writes all the time: each one hands its partitions over as
// it leaves, no partition FAILS at any moment (each worker's failure counter stays 0 until it
// stops), and the logs end identical.
func TestWorkerGroupRollingRestart(t *testing.T) {
	t.Parallel()
	const partitions = 30
	onGroupTiers(t, partitions, 3, func(t *testing.T, src, dst *kafkatest.Cluster, prod *kgo.Client, workers []*workerProc) {
		ctx := ctxT(t)
		mirrorTopics(ctx, t, workers[0].Client, "r", src.Addrs(), "events")
		waitTopic(t, workers[0].Client, "r", "events", "every partition MIRRORING with lag 0", caughtUp(api.StateMirroring))
		// A PREPARING on a destination topic the broker has just created may fail (retried)
		// with NOT_LEADER_FOR_PARTITION: the restarts must add no failure.
		baseline := failures(t, workers)

		stop, produced := produceUntilStopped(prod, "events", 1000)
		mirroring := func(what string) {
			kafkatest.WaitFor(t, groupSession+30*time.Second, what, func() (bool, string) {
				var counts []float64
				total := 0.0
				for _, w := range workers {
					n := localStates(t, w)[api.StateMirroring]
					counts, total = append(counts, n), total+n
				}
				return total == partitions, fmt.Sprintf("MIRRORING per worker: %v", counts)
			})
		}
		for i := range workers {
			before := produced()
			if got := failures(t, workers); !slices.Equal(got, baseline) {
				t.Fatalf("partition failures counted by each worker: %v, %v before the restarts began", got, baseline)
			}
			baseline[i] = 0 // its successor starts counting at 0
			if code := workers[i].Terminate(t); code != 0 {
				t.Fatalf("worker %d: exit code %d after SIGTERM", i, code)
			}
			workers[i] = startWorker(t, groupEnv(dst))
			mirroring(fmt.Sprintf("every partition MIRRORING on a worker after restarting worker %d", i))
			kafkatest.WaitFor(t, 30*time.Second, "records produced during the restart", func() (bool, string) {
				return produced() > before, fmt.Sprintf("%d records", produced())
			})
		}
		n, err := stop()
		if err != nil {
			t.Fatalf("the producer: %v", err)
		}
		var took unownedSeconds
		for _, w := range workers {
			u := unowned(t, w)
			took.count, took.sum = took.count+u.count, took.sum+u.sum
		}
		t.Logf("%d records produced while the workers restarted; the last workers started %d partitions, %.2f s without an owner on average",
			n, took.count, took.sum/float64(max(took.count, 1)))
		kafkatest.WaitIdentical(t, src, dst, "events", 60*time.Second)
		waitTopic(t, workers[0].Client, "r", "events", "every partition caught up", caughtUp(api.StateMirroring))
		if got := failures(t, workers); !slices.Equal(got, baseline) {
			t.Fatalf("partition failures counted by the restarted workers: %v", got)
		}
	})
}

// produceUntilStopped writes keyed records to topic, from the key index from on, in small
// batches until stop is called; produced counts the records acknowledged, and stop returns
// their number and the first error.
func produceUntilStopped(cl *kgo.Client, topic string, from int) (stop func() (int, error), produced func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int64
	done := make(chan error, 1)
	go func() {
		for k := from; ctx.Err() == nil; k += 10 {
			recs := make([]*kgo.Record, 10)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa((k+i)%17)), Value: []byte("value-" + strconv.Itoa(k+i))}
			}
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.ProduceSync(pctx, recs...).FirstErr()
			pcancel()
			if err != nil && ctx.Err() == nil {
				done <- err
				return
			}
			if err == nil {
				n.Add(int64(len(recs)))
			}
		}
		done <- nil
	}()
	return func() (int, error) {
		cancel()
		err := <-done
		return int(n.Load()), err
	}, func() int { return int(n.Load()) }
}

// failures is each worker's count of partitions that went to FAILED.
func failures(t *testing.T, workers []*workerProc) []float64 {
	t.Helper()
	out := make([]float64, len(workers))
	for i, w := range workers {
		for _, s := range scrape(t, w.URL) {
			if s.name == "kafkamirror_partition_failures_total" {
				out[i] += s.value
			}
		}
	}
	return out
}

// TestWorkerGroupSourcePartitionsAdded: partitions added to a mirrored source topic are
// mirrored by a group of three workers. Only the worker running the mirror's metadata sync
// sees the source grow; it records the new partitions, so the group's leader assigns them
// wherever it runs. A sync that crashed after growing the destination topic and before
// recording the new partitions left them unrecorded: the next sync, seeing no growth, still
// records them (a runner on another worker waits for its partition's record).
func TestWorkerGroupSourcePartitionsAdded(t *testing.T) {
	t.Parallel()
	kafkatest.RequireFake(t)
	for _, tc := range []struct {
		name         string
		grownAlready bool
	}{{"sync grows the destination", false}, {"destination grown before the crash", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sourcePartitionsAdded(t, tc.grownAlready)
		})
	}
}

func sourcePartitionsAdded(t *testing.T, grownAlready bool) {
	src, dst := kafkatest.Pair(t)
	min := "500"
	if _, err := dst.Admin(t).AlterBrokerConfigs(ctxT(t), []kadm.AlterConfig{{Name: "group.min.session.timeout.ms", Value: &min}}); err != nil {
		t.Fatal(err)
	}
	prod, workers := startGroup(t, src, dst, 3, 3)
	ctx := ctxT(t)
	if _, err := workers[0].Client.CreateMirror(ctx, api.CreateMirrorRequest{Name: "grow", Source: api.SourceConnection{BootstrapServers: src.Addrs()},
		Sync: &api.SyncSettings{Interval: "1s"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := workers[0].Client.StartTopics(ctx, "grow", []string{"events"}, ""); err != nil || res[0].Err() != nil {
		t.Fatalf("start: %+v, %v", res, err)
	}
	waitTopic(t, workers[1].Client, "grow", "events", "every partition MIRRORING with lag 0", caughtUp(api.StateMirroring))

	grow := []*kafkatest.Cluster{src}
	if grownAlready {
		grow = []*kafkatest.Cluster{dst, src}
	}
	for _, c := range grow {
		if _, err := c.Admin(t).UpdatePartitions(ctx, 9, "events"); err != nil {
			t.Fatal(err)
		}
	}
	kafkatest.ProduceKeyed(t, prod, "events", 1000, 900) // keyed: every partition gets records
	kafkatest.WaitFor(t, 60*time.Second, "the nine partitions MIRRORING with lag 0, seen from each worker", func() (bool, string) {
		for _, w := range workers {
			d, err := w.Client.GetTopic(ctxT(t), "grow", "events")
			if err != nil {
				return false, err.Error()
			}
			if len(d.Partitions) != 9 {
				return false, fmt.Sprintf("%d partitions described", len(d.Partitions))
			}
			for _, p := range d.Partitions {
				if !caughtUp(api.StateMirroring)(p) {
					return false, fmt.Sprintf("partition %d: %s, lag %d", p.Partition, p.State, p.Lag)
				}
			}
		}
		return true, ""
	})
	kafkatest.WaitIdentical(t, src, dst, "events", 60*time.Second)
}
