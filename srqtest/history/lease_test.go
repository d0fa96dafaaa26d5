package history_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/srqtest"
	"github.com/srqueue/srq/srqtest/history"
)

// TestRedisLease reads one delivery's lease through its life: valid with the lease's time left,
// gone for another token, expired once the server's clock passes its deadline (and at it), gone
// once recovery took it back.
func TestRedisLease(t *testing.T) {
	t.Parallel()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: "lease"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	m.SetTime(now) // the server's clock stands still unless the test moves it
	if _, err := q.Publish(ctx, 1, &srq.PublishOpts{ID: "a", Partition: "p", Ordered: true}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Engine().Fetch(ctx, "c1", 1, time.Second)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v %v", ds, err)
	}
	d := &srq.Delivery{Delivery: ds[0], Queue: q.Name()}
	other := &srq.Delivery{Delivery: ds[0], Queue: q.Name()}
	other.Token++
	lease := history.RedisLease(q.ShardOf)
	steps := []struct {
		name string
		d    *srq.Delivery
		at   time.Time
		want history.Lease
	}{
		{"fetched", d, now, history.Lease{State: history.LeaseValid, Left: time.Second}},
		{"later", d, now.Add(999*time.Millisecond + 500*time.Microsecond), history.Lease{State: history.LeaseValid, Left: 500 * time.Microsecond}},
		{"another token", other, now, history.Lease{State: history.LeaseGone}},
		{"at the deadline", d, now.Add(time.Second), history.Lease{State: history.LeaseExpired}},
		{"past the deadline", d, now.Add(2500 * time.Millisecond), history.Lease{State: history.LeaseExpired, Left: -1500 * time.Millisecond}},
	}
	for _, s := range steps {
		m.SetTime(s.at)
		got, err := lease(ctx, s.d)
		if err != nil || got != s.want {
			t.Errorf("%s: %+v, %v; want %+v", s.name, got, err, s.want)
		}
		if got.Valid() != (s.want.State == history.LeaseValid) {
			t.Errorf("%s: Valid() = %v", s.name, got.Valid())
		}
	}
	if _, err := q.Engine().RecoverAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := lease(ctx, d); err != nil || got.State != history.LeaseGone {
		t.Errorf("recovered: %+v, %v; want gone", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := lease(cctx, d); !errors.Is(err, context.Canceled) {
		t.Errorf("with an ended context: %v", err)
	}
}

// TestLeaseMiddleware runs a task through a worker whose recorder checks leases: the start event
// holds what the check found, and the check runs even when the handler's context has ended.
func TestLeaseMiddleware(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		name    string
		found   history.Lease
		err     error
		wantErr string
	}{
		{name: "valid", found: history.Lease{State: history.LeaseValid, Left: 2 * time.Second}},
		{name: "gone", found: history.Lease{State: history.LeaseGone}},
		{name: "expired", found: history.Lease{State: history.LeaseExpired, Left: -time.Millisecond}},
		{name: "failed", err: errors.New("no answer"), found: history.Lease{State: history.LeaseUnknown}, wantErr: "no answer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := history.NewRecorder("A", nil)
			var checked *srq.Delivery
			check := func(ctx context.Context, d *srq.Delivery) (history.Lease, error) {
				if ctx.Err() != nil {
					return history.Lease{}, ctx.Err()
				}
				checked = d
				return tc.found, tc.err
			}
			// The handler's context has ended before the middleware runs: the check still answers.
			ended := func(next srq.WorkFunc) srq.WorkFunc {
				return func(ctx context.Context, d *srq.Delivery) error {
					ctx, cancel := context.WithCancelCause(ctx)
					cancel(srq.ErrLeaseLost)
					return next(ctx, d)
				}
			}
			hd := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil })
			srqtest.Process[int](t, hd, 1, &srq.PublishOpts{ID: "a"}, srq.QueueConfig{},
				srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{ended, rec.LeaseMiddleware("w1", check)}})
			evs := rec.Events()
			if len(evs) != 2 || checked == nil || checked.ID != "a" {
				t.Fatalf("events %+v, checked %+v", evs, checked)
			}
			s := evs[0]
			if s.Op != history.OpStart || s.Lease != tc.found.State || s.LeaseLeft != int64(tc.found.Left) || s.Err != tc.wantErr {
				t.Fatalf("start %+v, want lease %+v, err %q", s, tc.found, tc.wantErr)
			}
			r := history.Check(evs)
			if want := tc.found.State != history.LeaseUnknown; (r.LeaseChecked == 1) != want {
				t.Errorf("lease checked %d", r.LeaseChecked)
			}
			if want := tc.found.State == history.LeaseGone || tc.found.State == history.LeaseExpired; (r.Count(history.Expired) == 1) != want {
				t.Errorf("report %s", r)
			}
		})
	}
}
