package rounds

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// The partitions of a started topic prepare together: while one look at the topic is under
// way, every partition that asks waits for the next, and that one look answers them all;
// none is answered by a look that began before it asked.
func TestPrepareRoundsAnswerEveryAskerOnce(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var runs [][]int32
	rs := &Rounds[int32, []int32]{
		Run: func(ps []int32) []int32 {
			mu.Lock()
			runs = append(runs, ps)
			first := len(runs) == 1
			mu.Unlock()
			if first {
				<-release
			}
			return ps
		},
		Spawn: func(f func()) { go f() },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan []int32, 1)
	go func() {
		got, _ := rs.Ask(ctx, 0)
		first <- got
	}()
	for { // the first round runs with partition 0 alone
		mu.Lock()
		n := len(runs)
		mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for p := int32(1); p < 100; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := rs.Ask(ctx, p)
			if err != nil || !slices.Contains(got, p) {
				t.Errorf("partition %d answered by the round of %v (%v)", p, got, err)
			}
		}()
	}
	for { // every asker is in the gathering round before the first one ends
		rs.mu.Lock()
		n := 0
		if rs.next != nil {
			n = len(rs.next.keys)
		}
		rs.mu.Unlock()
		if n == 99 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := <-first; !slices.Equal(got, []int32{0}) {
		t.Fatalf("partition 0 answered by %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 || len(runs[1]) != 99 {
		t.Fatalf("rounds %v; want two, the second for the 99 partitions that waited", runs)
	}
}

// A round its first asker begins from idle waits for Gather: the askers that arrive
// meanwhile, a moment behind the first, share that round with it instead of the next.
func TestGatherHoldsTheFirstRoundForAskersAMomentBehind(t *testing.T) {
	gathered := make(chan struct{})
	runs := make(chan []int32, 10)
	rs := &Rounds[int32, []int32]{
		Run: func(ps []int32) []int32 {
			runs <- ps
			return ps
		},
		Spawn:  func(f func()) { go f() },
		Gather: func() { <-gathered },
	}
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: no asker outlives the test
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for p := range int32(10) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := rs.Ask(ctx, p); err != nil || !slices.Contains(got, p) {
				t.Errorf("partition %d answered by the round of %v (%v)", p, got, err)
			}
		}()
	}
	for n := 0; n < 10; {
		if ctx.Err() != nil {
			t.Fatalf("%d of 10 askers in the gathering round", n)
		}
		time.Sleep(time.Millisecond)
		rs.mu.Lock()
		if rs.next != nil {
			n = len(rs.next.keys)
		}
		rs.mu.Unlock()
	}
	close(gathered)
	wg.Wait()
	if len(runs) != 1 {
		t.Fatalf("%d rounds; want one for the ten askers", len(runs))
	}
}
