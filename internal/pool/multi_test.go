package pool

import (
	"context"
	"testing"
	"time"
)

// newTestPicker returns a picker over sources of the given weights, one shard each, every shard
// ready; the shards have ack queues and a waiter, as runMulti gives them.
func newTestPicker(weights ...float64) *picker {
	k := &picker{changed: make(chan struct{})}
	w := &waiter{poked: make(chan struct{}, 1)}
	for _, wt := range weights {
		s := &msource{weight: wt}
		sh := &mshard{src: s, acks: newAckQueue(), w: w}
		sh.ride(true)
		s.shards = []*mshard{sh}
		k.sources = append(k.sources, s)
	}
	return k
}

// TestPickerShares: with every queue ready, the turns follow the weights: each fetch of 4 tasks
// goes to the queue that fetched fewest for its weight.
func TestPickerShares(t *testing.T) {
	t.Parallel()
	k := newTestPicker(3, 2, 1)
	got := map[*msource]int{}
	for range 600 {
		sh := k.take(context.Background())
		got[sh.src] += 4
		k.fetched(sh, 4, -1, nil)
	}
	for i, want := range []int{1200, 800, 400} {
		if n := got[k.sources[i]]; n < want-4 || n > want+4 {
			t.Errorf("queue %d of weight %v fetched %d tasks, want %d", i, k.sources[i].weight, n, want)
		}
	}
}

// TestPickerIdleEarnsNoCredit: a queue that was idle while another ran joins the turns at the
// other's level: it does not get every turn until it has caught up.
func TestPickerIdleEarnsNoCredit(t *testing.T) {
	t.Parallel()
	k := newTestPicker(1, 1)
	a, b := k.sources[0], k.sources[1]
	// b runs dry at once; a runs alone for 100 fetches.
	for {
		sh := k.take(context.Background())
		if sh.src == b {
			k.fetched(sh, 0, -1, nil)
			break
		}
		k.fetched(sh, 1, -1, nil)
	}
	for range 100 {
		sh := k.take(context.Background())
		if sh.src != a {
			t.Fatal("an idle queue got a turn")
		}
		k.fetched(sh, 1, -1, nil)
	}
	k.mu.Lock()
	k.wakeLocked(b.shards[0]) // work came for b
	k.mu.Unlock()
	turns := map[*msource]int{}
	for range 10 {
		sh := k.take(context.Background())
		turns[sh.src]++
		k.fetched(sh, 1, -1, nil)
	}
	if turns[a] < 4 || turns[b] < 4 {
		t.Errorf("after b woke, a got %d and b %d of 10 turns, want about half each", turns[a], turns[b])
	}
	if !b.shards[0].riding || !a.shards[0].riding {
		t.Error("the acks of a ready shard do not ride with its fetches")
	}
}

// TestPickerTakeWaits: take waits while no shard is ready and returns nil when its context ends;
// a shard whose fetch found nothing is idle, with its due time, and its acks go to the acker.
func TestPickerTakeWaits(t *testing.T) {
	t.Parallel()
	k := newTestPicker(1)
	sh := k.take(context.Background())
	k.fetched(sh, 0, time.Second, nil)
	if sh.state != shardIdle || sh.due.IsZero() || sh.riding {
		t.Fatalf("state %v, due %v, riding %v after an empty fetch", sh.state, sh.due, sh.riding)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if got := k.take(ctx); got != nil {
		t.Fatal("take returned a shard that is idle")
	}
}
