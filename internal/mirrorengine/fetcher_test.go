package mirrorengine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// fetchLog records which partitions each of the mirror's fetches to a kfake cluster carried
// ("topic/partition", sorted). The comparator's and the cleaner's fetches name a rack; the
// mirror's do not.
type fetchLog struct {
	mu   sync.Mutex
	reqs [][]string
}

func watchFetches(t *testing.T, c *kafkatest.Cluster, topics ...string) *fetchLog {
	t.Helper()
	names := map[[16]byte]string{}
	for _, topic := range topics {
		names[c.Fake().TopicInfo(topic).TopicID] = topic
	}
	l := &fetchLog{}
	c.Fake().ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if req.Rack != "" {
			return nil, nil, false
		}
		var parts []string
		for _, rt := range req.Topics {
			name := rt.Topic
			if req.Version >= 13 {
				name = names[rt.TopicID]
			}
			for _, rp := range rt.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d", name, rp.Partition))
			}
		}
		slices.Sort(parts)
		l.mu.Lock()
		l.reqs = append(l.reqs, parts)
		l.mu.Unlock()
		return nil, nil, false
	})
	return l
}

// next returns the partitions of n fetches sent from now on.
func (l *fetchLog) next(t *testing.T, n int) [][]string {
	t.Helper()
	l.mu.Lock()
	from := len(l.reqs)
	l.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.mu.Lock()
		if len(l.reqs) >= from+n {
			out := slices.Clone(l.reqs[from : from+n])
			l.mu.Unlock()
			return out
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d fetches within 30 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func partitionNames(topic string, partitions int32) []string {
	var out []string
	for p := range partitions {
		out = append(out, fmt.Sprintf("%s/%d", topic, p))
	}
	slices.Sort(out)
	return out
}

// requireEveryFetchCarries checks the next fetches: once every partition is caught up, each
// fetch to the broker carries all of them, so an idle partition's wait is never queued in
// front of a busy one.
func requireEveryFetchCarries(t *testing.T, l *fetchLog, want []string) {
	t.Helper()
	slices.Sort(want)
	for i, got := range l.next(t, 5) {
		if !slices.Equal(got, want) {
			t.Fatalf("fetch %d carried %v, want every mirrored partition %v", i, got, want)
		}
	}
}

// One fetch carries every partition the source broker leads (issue #16: one fetcher per
// source broker), and the data arrives identical.
func TestMirrorOneFetchCarriesEveryPartitionOfABroker(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "wide", 8, nil)
	dst.CreateTopic(t, "wide", 8, nil)
	fetches := watchFetches(t, src, "wide")
	prod := manualProducer(t, src)
	run := startMirror(t, src, dst, "wide", 8, true)
	for p := range int32(8) {
		produceSync(t, prod, records("wide", p, 50, "a")...)
	}
	kafkatest.WaitIdentical(t, src, dst, "wide", waitIdentical)
	requireEveryFetchCarries(t, fetches, partitionNames("wide", 8))
	// A record in one partition still arrives while the others keep waiting.
	produceSync(t, prod, records("wide", 5, 1, "b")...)
	kafkatest.WaitIdentical(t, src, dst, "wide", waitIdentical)
	run.stop(t)
}

// Partitions join a running fetcher (another topic's mirror on the same source client) and
// leave it (that mirror stops) without disturbing the partitions that stay.
func TestFetcherPartitionsJoinAndLeave(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	for _, topic := range []string{"stays", "joins"} {
		src.CreateTopic(t, topic, 3, nil)
		dst.CreateTopic(t, topic, 3, nil)
	}
	fetches := watchFetches(t, src, "stays", "joins")
	prod := manualProducer(t, src)
	write := func(topic, tag string) {
		for p := range int32(3) {
			produceSync(t, prod, records(topic, p, 20, tag)...)
		}
	}
	sc, dc := src.Client(t), dst.Client(t)
	stays := startMirrorClients(context.Background(), t, sc, dc, "stays", 3, true)
	write("stays", "a")
	kafkatest.WaitIdentical(t, src, dst, "stays", waitIdentical)
	requireEveryFetchCarries(t, fetches, partitionNames("stays", 3))

	joins := startMirrorClients(context.Background(), t, sc, dc, "joins", 3, true)
	write("joins", "a")
	write("stays", "b")
	kafkatest.WaitIdentical(t, src, dst, "joins", waitIdentical)
	kafkatest.WaitIdentical(t, src, dst, "stays", waitIdentical)
	requireEveryFetchCarries(t, fetches, append(partitionNames("stays", 3), partitionNames("joins", 3)...))

	joins.stop(t)
	write("stays", "c")
	kafkatest.WaitIdentical(t, src, dst, "stays", waitIdentical)
	requireEveryFetchCarries(t, fetches, partitionNames("stays", 3))
	stays.stop(t)
}

// The partitions of one source client and broker share one fetcher, which ends with the last
// of them.
func TestFetcherEndsWithItsLastPartition(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "t", 2, nil)
	dst.CreateTopic(t, "t", 2, nil)
	prod := manualProducer(t, src)
	for p := range int32(2) {
		produceSync(t, prod, records("t", p, 10, "a")...)
	}
	sc := src.Client(t)
	run := startMirrorClients(context.Background(), t, sc, dst.Client(t), "t", 2, true)
	kafkatest.WaitIdentical(t, src, dst, "t", waitIdentical)
	fetchersOf := func(cl *kgo.Client) int {
		fetchers.mu.Lock()
		defer fetchers.mu.Unlock()
		n := 0
		for k := range fetchers.m {
			if k.cl == cl {
				n++
			}
		}
		return n
	}
	if n := fetchersOf(sc); n != 1 {
		t.Fatalf("%d fetchers run for one source client and broker, want 1", n)
	}
	run.stop(t)
	if n := fetchersOf(sc); n != 0 {
		t.Fatalf("%d fetchers run after their last partition left, want 0", n)
	}
}
