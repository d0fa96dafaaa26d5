package srq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
)

// TestDedupAsDocumented checks what getting-started, PublishOpts.ID and QueueConfig.DedupWindow
// say: an id is a duplicate while its task exists (pending, leased or dead-lettered); once the task
// was acked, with the default DedupWindow of 0 publishing the id again makes a new task that runs
// again, also when its result is kept; with a DedupWindow it is a duplicate for that long.
func TestDedupAsDocumented(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		cfg         srq.QueueConfig
		opts        srq.PublishOpts
		dupAfterAck bool
		runs        int32 // of the three publishes after the first run
	}{
		{"default config", srq.QueueConfig{}, srq.PublishOpts{ID: "evt-9f1c"}, false, 3},
		{"default config, result kept", srq.QueueConfig{}, srq.PublishOpts{ID: "evt-9f1c", KeepResult: time.Hour}, false, 3},
		{"a dedup window", srq.QueueConfig{DedupWindow: time.Hour}, srq.PublishOpts{ID: "evt-9f1c"}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			q, _ := newQueue[string](t, tc.cfg)
			var runs atomic.Int32
			w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error {
				runs.Add(1)
				return nil
			}), srq.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			publish := func(want bool) {
				t.Helper()
				res, err := q.Publish(ctx, "signup", &tc.opts)
				if err != nil || res.Duplicate != want || res.ID != tc.opts.ID {
					t.Fatalf("publish %s: %+v, %v; want duplicate %v", tc.opts.ID, res, err, want)
				}
			}
			publish(false)
			publish(true) // pending: a retried publish changes nothing
			if n, err := w.RunOnce(ctx); err != nil || n != 1 || runs.Load() != 1 {
				t.Fatalf("first run: %d fetched, %v, %d runs", n, err, runs.Load())
			}
			publish(tc.dupAfterAck)
			if _, err := w.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			publish(tc.dupAfterAck)
			if _, err := w.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runs.Load(); got != tc.runs {
				t.Fatalf("ran %d times for 4 publishes of one id, each run to its ack before the next; want %d", got, tc.runs)
			}
		})
	}

	t.Run("a dead letter", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		q, _ := newQueue[string](t, srq.QueueConfig{})
		w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error {
			return srq.Permanent(errors.New("no"))
		}), srq.WorkerConfig{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "d"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if res, err := q.Publish(ctx, "x", &srq.PublishOpts{ID: "d"}); err != nil || !res.Duplicate {
			t.Fatalf("publish of a dead letter's id: %+v, %v; want a duplicate", res, err)
		}
	})
}
