package srq

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// TestMayStart: a handler starts only while more than a third of its lease is left by the deadline
// the worker knows, and never once the lease was refused.
func TestMayStart(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	for _, tc := range []struct {
		name  string
		left  time.Duration // from now to the deadline the worker knows
		cause error         // the job's context ended with it
		want  bool
	}{
		{name: "just fetched", left: lease, want: true},
		{name: "two thirds left, as before an extension", left: 2 * lease / 3, want: true},
		{name: "within the margin", left: lease/3 - time.Millisecond, want: false},
		{name: "past the deadline (a stall)", left: -lease / 2, want: false},
		{name: "lease refused", left: lease, cause: ErrLeaseLost, want: false},
		{name: "shut down: not this check's business", left: lease, cause: ErrShutdown, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &pool{w: &Worker{cfg: WorkerConfig{Lease: lease}}}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tc.cause != nil {
				cancel(tc.cause)
			}
			if got := p.mayStart(&job{ctx: ctx, deadline: time.Now().Add(tc.left)}); got != tc.want {
				t.Fatalf("mayStart = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStaleUnitHandedBack runs units of an ordered partition whose lease deadline, as the worker
// knows it, has passed although their timers have not ended their contexts yet (as right after a
// stall): runUnit starts no handler for them and hands them back, in position and without using an
// attempt; and it checks before each task of a unit, so a deadline that passes while an earlier
// task runs keeps the later ones from starting.
func TestStaleUnitHandedBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stale int // the task of the unit whose deadline passes while the one before it runs; 0: before the first
		ran   []string
	}{
		{name: "stale before the first task", stale: 0},
		{name: "stale while the first task runs", stale: 1, ran: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			q, err := NewQueue[int](redistest.Client(t), QueueConfig{Name: redistest.Queue(t)})
			if err != nil {
				t.Fatal(err)
			}
			eng := q.Engine()
			for _, id := range []string{"a", "b", "c"} {
				if _, err := q.Publish(ctx, 1, &PublishOpts{ID: id, Partition: "p", Ordered: true}); err != nil {
					t.Fatal(err)
				}
			}
			const lease = time.Minute // the timers stay far off: only the known deadline decides
			var unit []*job
			var ran []string
			h := HandlerFunc[int](func(_ context.Context, task *Task[int]) error {
				ran = append(ran, task.ID)
				if len(ran) == tc.stale {
					stall(unit[tc.stale], lease) // the worker stalls while this handler runs
				}
				return nil
			})
			w, err := NewWorker(q, h, WorkerConfig{Lease: lease, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ds, err := eng.Fetch(ctx, w.consumer, 3, lease)
			if err != nil || len(ds) != 3 {
				t.Fatalf("fetch: %d tasks, %v", len(ds), err)
			}
			p := &pool{w: w, slots: make(chan struct{}, 3), acks: newAckQueues(w.shards.engines),
				stopping: make(chan struct{}), base: ctx}
			units := p.group(ds, []*engine.Engine{eng, eng, eng}, ctx)
			if len(units) != 1 || len(units[0]) != 3 {
				t.Fatalf("units %v", units)
			}
			unit = units[0]
			if tc.stale == 0 {
				stall(unit[0], lease)
			}
			p.runUnit(unit)
			p.closeAcks()
			_ = p.ackLoop()

			if fmt.Sprint(ran) != fmt.Sprint(tc.ran) {
				t.Errorf("ran %v, want %v", ran, tc.ran)
			}
			if n := len(w.jobs); n != 0 || len(p.slots) != 3 {
				t.Errorf("%d jobs held, %d of 3 slots free", n, len(p.slots))
			}
			// The rest of the partition is pending again, in order, on its first attempt.
			again, err := eng.Fetch(ctx, "other", 3, lease)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, d := range again {
				ids = append(ids, d.ID)
				if d.Attempt != 1 {
					t.Errorf("%s: attempt %d after the hand-back, want 1", d.ID, d.Attempt)
				}
			}
			if want := []string{"a", "b", "c"}[len(tc.ran):]; fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Errorf("fetched %v after the hand-back, want %v", ids, want)
			}
		})
	}
}

// stall moves j's known lease deadline into the past, as a worker stopped past its lease finds it,
// and leaves its timer alone.
func stall(j *job, lease time.Duration) {
	j.deadline = time.Now().Add(-lease)
}
