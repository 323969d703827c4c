package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
)

// scriptedWorker answers the n-th describe of topic m/orders with answer(n) (n from 1).
func scriptedWorker(t *testing.T, answer func(n int) (int, any)) (*api.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := answer(int(calls.Add(1)))
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	c, err := api.NewClient(api.ClientConfig{URL: srv.URL, Token: "t", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

func fastPolling(t *testing.T) {
	oldInitial, oldMax, oldStuck := pollInitial, pollMax, stuckAfter
	pollInitial, pollMax, stuckAfter = time.Millisecond, 5*time.Millisecond, 50*time.Millisecond
	t.Cleanup(func() { pollInitial, pollMax, stuckAfter = oldInitial, oldMax, oldStuck })
}

func topicWith(ps ...api.Partition) *api.Topic {
	return &api.Topic{Mirror: "m", Topic: "orders", MirrorName: "m", DesiredState: "mirroring", Partitions: ps}
}

func TestWaitReachesTarget(t *testing.T) {
	fastPolling(t)
	client, calls := scriptedWorker(t, func(n int) (int, any) {
		switch {
		case n == 1:
			return 200, topicWith() // no partitions yet
		case n < 4:
			return 200, topicWith(api.Partition{Partition: 0, State: api.StatePreparing}, api.Partition{Partition: 1, State: api.StateMirroring})
		case n == 4:
			return 503, api.ErrorBody{ErrorCode: api.CodeCoordinatorLoadInProgress, Message: "loading"} // passes by itself
		}
		return 200, topicWith(api.Partition{Partition: 0, State: api.StateMirroring}, api.Partition{Partition: 1, State: api.StateMirroring})
	})
	got, err := waitForPartitions(context.Background(), client, "m", "orders", api.StateMirroring, time.Now().Add(10*time.Second), "create", 10*time.Second)
	if err != nil || len(got.Partitions) != 2 || calls.Load() != 5 {
		t.Fatalf("wait: %+v, %v after %d describes", got, err, calls.Load())
	}
}

func TestWaitTimesOutWithThePartitions(t *testing.T) {
	fastPolling(t)
	client, _ := scriptedWorker(t, func(int) (int, any) {
		return 200, topicWith(
			api.Partition{Partition: 0, State: api.StatePaused, SourceOffset: 10, DestinationOffset: 10},
			api.Partition{Partition: 1, State: api.StateFailed, SourceOffset: 9, DestinationOffset: 5, Lag: 4, Error: "NOT_LEADER_FOR_PARTITION", RetryAttempt: 2},
		)
	})
	_, err := waitForPartitions(context.Background(), client, "m", "orders", api.StatePaused, time.Now().Add(100*time.Millisecond), "update", 100*time.Millisecond)
	var we *waitError
	if !errors.As(err, &we) || we.NotRetryable || we.Last == nil {
		t.Fatalf("wait error %#v", err)
	}
	for _, want := range []string{
		`Topic "orders" of cluster mirror "m" did not reach PAUSED on every partition within 100ms.`,
		"partition 0: PAUSED, source offset 10, destination offset 10, lag 0",
		"partition 1: FAILED, source offset 9, destination offset 5, lag 4, automatic retry 2, error: NOT_LEADER_FOR_PARTITION",
		"The command was accepted; the worker keeps working on it. If the topic needs longer, raise timeouts.update.",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("timeout error lacks %q:\n%v", want, err)
		}
	}
}

func TestWaitStopsEarlyOnAFailureThatIsNotRetried(t *testing.T) {
	fastPolling(t)
	client, _ := scriptedWorker(t, func(int) (int, any) {
		return 200, topicWith(api.Partition{Partition: 0, State: api.StateFailed, SourceOffset: -1, DestinationOffset: 7,
			Error: "the destination has 7 records the source does not", RetryAttempt: -1})
	})
	start := time.Now()
	_, err := waitForPartitions(context.Background(), client, "m", "orders", api.StateMirroring, time.Now().Add(time.Minute), "create", time.Minute)
	var we *waitError
	if !errors.As(err, &we) || !we.NotRetryable || time.Since(start) > 10*time.Second {
		t.Fatalf("wait error %v after %v", err, time.Since(start))
	}
	if !strings.Contains(err.Error(), "not retried: waits for the operator, error: the destination has 7 records the source does not") {
		t.Errorf("error %v", err)
	}
	// A stop proceeds from FAILED: waiting for STOPPED is not cut short.
	_, err = waitForPartitions(context.Background(), client, "m", "orders", api.StateStopped, time.Now().Add(200*time.Millisecond), "delete", 200*time.Millisecond)
	if !errors.As(err, &we) || we.NotRetryable {
		t.Fatalf("waiting for STOPPED: %v", err)
	}
}

func TestWaitGivesUpOnARefusal(t *testing.T) {
	fastPolling(t)
	client, calls := scriptedWorker(t, func(int) (int, any) {
		return 404, api.ErrorBody{ErrorCode: api.CodeTopicNotInClusterMirror, Message: `topic "orders" is not in cluster mirror "m"`}
	})
	_, err := waitForPartitions(context.Background(), client, "m", "orders", api.StateMirroring, time.Now().Add(time.Minute), "create", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "TOPIC_NOT_IN_CLUSTER_MIRROR") || calls.Load() != 1 {
		t.Fatalf("wait error %v after %d describes", err, calls.Load())
	}
}
