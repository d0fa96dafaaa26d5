package srq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// DeleteQueue removes every key of a sharded queue and its registry entry, refusing while a
// worker is live unless forced; the other queues are untouched.
func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[order](t, srq.QueueConfig{Shards: 3, Events: 100, ResultRetention: time.Hour})
	other, err := srq.NewQueue[order](c, srq.QueueConfig{Name: q.Name() + "-other"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := q.Publish(ctx, order{Seq: i}, &srq.PublishOpts{Partition: string(rune('a' + i%10))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.Publish(ctx, order{}, nil); err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if t.Value.Seq%2 == 0 {
			return srq.Permanent(errors.New("dead"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := srq.DeleteQueue(ctx, c, q.Name(), nil); !errors.Is(err, srq.ErrQueueBusy) {
		t.Fatalf("DeleteQueue with a live consumer: %v", err)
	}
	n, err := srq.DeleteQueue(ctx, c, q.Name(), &srq.DeleteQueueOpts{Force: true})
	if err != nil || n == 0 {
		t.Fatalf("DeleteQueue: %d, %v", n, err)
	}
	for _, eng := range q.Shards() {
		if keys, _ := c.Keys(ctx, eng.Keys().Base()+"*").Result(); len(keys) > 0 {
			t.Fatalf("left: %v", keys)
		}
	}
	qs, err := engine.Queues(ctx, c, "srq")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range qs {
		if info.Name == q.Name() {
			t.Fatal("the queue is still registered")
		}
	}
	if st, err := other.Engine().Stats(ctx); err != nil || st.Pending != 1 {
		t.Fatalf("the other queue: %+v, %v", st, err)
	}
	if n, err := srq.DeleteQueue(ctx, c, q.Name(), nil); err != nil || n != 0 {
		t.Fatalf("deleting it again: %d, %v", n, err)
	}
}
