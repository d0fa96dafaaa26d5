package srq_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// An ordered partition of a queue that holds partitions on a dead letter: when its second task
// dies, the rest wait; the partition shows as held; a requeue runs the dead task first, then the
// rest in order.
func TestHeldPartitionKeepsOrderThroughRequeue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{OnDeadLetter: srq.HoldPartition})
	ids := make([]string, 5)
	for i := range ids {
		res, err := q.Publish(ctx, order{User: "acct", Seq: i}, &srq.PublishOpts{Partition: "acct", Ordered: true})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ID
	}
	var mu sync.Mutex
	var ran []int
	failed := false
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		mu.Lock()
		defer mu.Unlock()
		if t.Value.Seq == 1 && !failed {
			failed = true
			return srq.Permanent(errors.New("ledger rejects it"))
		}
		ran = append(ran, t.Value.Seq)
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	drain := func() {
		for {
			n, err := w.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
		}
	}
	drain()
	if !slices.Equal(ran, []int{0}) {
		t.Fatalf("before the requeue ran %v, want [0]", ran)
	}
	held, _, err := q.Engine().PartitionsBy(ctx, engine.IndexHeld, 10)
	if err != nil || len(held) != 1 || held[0].Key != "!acct" || held[0].HeldBy != ids[1] ||
		!strings.Contains(held[0].HeldError, "ledger rejects it") || held[0].Pending != 3 || held[0].Ready {
		t.Fatalf("held partitions: %+v, %v", held, err)
	}
	if errs, err := q.Engine().Requeue(ctx, []string{ids[1]}); err != nil || errs[0] != nil {
		t.Fatalf("requeue: %v %v", err, errs)
	}
	drain()
	if !slices.Equal(ran, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("ran %v, want [0 1 2 3 4]", ran)
	}
	if held, _, _ := q.Engine().PartitionsBy(ctx, engine.IndexHeld, 10); len(held) != 0 {
		t.Fatalf("still held: %+v", held)
	}
}

// A held partition is released by purging its dead letter, or by a resume; a task published to
// continue (the per-publish policy) does not hold it.
func TestHeldPartitionReleases(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{OnDeadLetter: srq.HoldPartition})
	kill := func(p string, opts srq.PublishOpts) string {
		opts.Partition, opts.Ordered = p, true
		res, err := q.Publish(ctx, order{User: "dies"}, &opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Publish(ctx, order{User: "next"}, &srq.PublishOpts{Partition: p, Ordered: true}); err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	a := kill("a", srq.PublishOpts{})
	kill("b", srq.PublishOpts{})
	kill("c", srq.PublishOpts{OnDeadLetter: srq.ContinuePartition})
	var mu sync.Mutex
	next := map[string]bool{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if t.Value.User == "dies" {
			return srq.Permanent(errors.New("no"))
		}
		mu.Lock()
		next[string(t.Partition)] = true
		mu.Unlock()
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	waitFor(t, "c's next task", func() bool { mu.Lock(); defer mu.Unlock(); return next["!c"] })
	// a and b hold only once their first tasks are dead letters, which c's next task does not wait
	// for: a purge before a's death would find nothing to purge.
	waitFor(t, "a and b held", func() bool {
		held, _, err := q.Engine().PartitionsBy(ctx, engine.IndexHeld, 10)
		return err == nil && len(held) == 2
	})
	if _, err := q.Engine().Purge(ctx, []string{a}); err != nil {
		t.Fatal(err)
	}
	if err := q.Engine().Resume(ctx, "!b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's and b's next tasks", func() bool { mu.Lock(); defer mu.Unlock(); return next["!a"] && next["!b"] })
}
