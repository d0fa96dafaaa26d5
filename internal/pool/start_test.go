package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
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
		{name: "lease refused", left: lease, cause: errLeaseLost, want: false},
		{name: "shut down: not this check's business", left: lease, cause: errShutdown, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(lease)
			p := &runner{cfg: &cfg}
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
			eng, err := engine.New(redistest.Client(t), engine.Config{Queue: redistest.Queue(t)})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"a", "b", "c"} {
				if _, err := eng.Publish(ctx, []engine.Message{{ID: id, Partition: partition.Ordered("p")}}); err != nil {
					t.Fatal(err)
				}
			}
			const lease = time.Minute // the timers stay far off: only the known deadline decides
			var unit []*job
			var ran []string
			handle := func(_ context.Context, d *engine.Delivery, _ *engine.Engine) ([]byte, error) {
				ran = append(ran, d.ID)
				if len(ran) == tc.stale {
					stall(unit[tc.stale], lease) // the worker stalls while this handler runs
				}
				return nil, nil
			}
			cfg := testConfig(lease)
			p := New(cfg, []Source{{Name: "q", Engines: []*engine.Engine{eng}, Handle: handle, Logger: cfg.Logger}}).
				newRunner(3, 1, make(chan struct{}), ctx)
			ds, err := eng.Fetch(ctx, cfg.Consumer, 3, lease)
			if err != nil || len(ds) != 3 {
				t.Fatalf("fetch: %d tasks, %v", len(ds), err)
			}
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
			if n := len(p.jobs); n != 0 || len(p.slots) != 3 {
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

// Causes the tests' handler contexts end with, as the srq package's ErrLeaseLost and ErrShutdown.
var (
	errLeaseLost = errors.New("test: lease lost")
	errShutdown  = errors.New("test: shut down")
)

// testConfig returns a pool configuration for tests with the given lease, logging nowhere.
func testConfig(lease time.Duration) Config {
	return Config{
		Concurrency: 1, Prefetch: 2, Lease: lease, ShutdownTimeout: time.Second, RecoverInterval: lease / 2,
		PollWait: time.Second, Consumer: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Classify:   func(error) Verdict { return Verdict{Kind: Retry} },
		RetryDelay: func(int, error) time.Duration { return 0 },
		LeaseLost:  errLeaseLost, Shutdown: errShutdown,
	}
}
