package srq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
)

// TestRedisAtMaxmemory: what docs/troubleshooting.md says of a Redis at its maxmemory (with
// noeviction): a publish fails with Redis's OOM error, the worker's calls are refused too, and
// nothing is lost: once memory is freed, the refused publish goes through and every task runs.
func TestRedisAtMaxmemory(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "maxmemory and its OOM errors", "--maxmemory-policy", "noeviction")
	c := srv.Client(t)
	ctx := testCtx(t)
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "before"}); err != nil {
		t.Fatal(err)
	}
	ran := 0
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error {
		ran++
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // every byte is over it
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, 2, &srq.PublishOpts{ID: "during"}); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("publish at maxmemory: %v; want Redis's OOM error", err)
	}
	if n, err := w.RunOnce(ctx); err == nil || !strings.Contains(err.Error(), "OOM") || n != 0 || ran != 0 {
		t.Fatalf("RunOnce at maxmemory: %d, %v (ran %d); want the fetch refused with OOM", n, err, ran)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if res, err := q.Publish(ctx, 2, &srq.PublishOpts{ID: "during"}); err != nil || res.Duplicate {
		t.Fatalf("the refused publish again: %+v, %v; want it added", res, err)
	}
	for range 3 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Acked != 2 || ran != 2 || st.Pending != 0 {
		t.Fatalf("after freeing memory: %+v, %v, ran %d; want both tasks acked", st, err, ran)
	}
}
