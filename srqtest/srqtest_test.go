package srqtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/srqtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestProcessOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		err   error
		opts  *srq.PublishOpts
		check func(t *testing.T, o srqtest.Outcome)
	}{
		{"ack", nil, nil, func(t *testing.T, o srqtest.Outcome) {
			if !o.Acked || o.Err != nil || o.Attempts != 1 {
				t.Fatalf("%+v", o)
			}
		}},
		{"retry with the policy", errors.New("boom"), nil, func(t *testing.T, o srqtest.Outcome) {
			if !o.Retried || o.Attempts != 1 || o.LastError != "boom" || time.Until(o.RetryAt) < 30*time.Minute {
				t.Fatalf("%+v", o)
			}
		}},
		{"reject with delay on an ordered partition", srq.RejectWithDelay(time.Hour, errors.New("429")),
			&srq.PublishOpts{Partition: "u", Ordered: true}, func(t *testing.T, o srqtest.Outcome) {
				if !o.Retried || time.Until(o.RetryAt) < 59*time.Minute {
					t.Fatalf("%+v", o)
				}
			}},
		{"snooze does not use an attempt", srq.Snooze(time.Hour), &srq.PublishOpts{MaxAttempts: 1}, func(t *testing.T, o srqtest.Outcome) {
			if !o.Retried || o.Attempts != 0 || time.Until(o.RetryAt) < 59*time.Minute {
				t.Fatalf("%+v", o)
			}
		}},
		{"permanent", srq.Permanent(errors.New("bad")), nil, func(t *testing.T, o srqtest.Outcome) {
			if !o.DeadLettered || o.LastError != "bad" {
				t.Fatalf("%+v", o)
			}
		}},
		{"last attempt", errors.New("still failing"), &srq.PublishOpts{MaxAttempts: 1}, func(t *testing.T, o srqtest.Outcome) {
			if !o.DeadLettered || o.Attempts != 1 {
				t.Fatalf("%+v", o)
			}
		}},
		{"delayed a day: runs now", nil, &srq.PublishOpts{Delay: 24 * time.Hour}, func(t *testing.T, o srqtest.Outcome) {
			if !o.Acked {
				t.Fatalf("%+v", o)
			}
		}},
		{"due next year, retried from then", errors.New("boom"), &srq.PublishOpts{At: time.Now().AddDate(1, 0, 0)},
			func(t *testing.T, o srqtest.Outcome) {
				if !o.Retried || time.Until(o.RetryAt) < 364*24*time.Hour {
					t.Fatalf("%+v", o)
				}
			}},
	}
	for _, tc := range cases {
		// Every case on a queue of one shard and on one of 4, whose partitions live in other
		// shards than the first.
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/shards-%d", tc.name, shards), func(t *testing.T) {
				t.Parallel()
				h := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return tc.err })
				o := srqtest.Process[int](t, h, 7, tc.opts, srq.QueueConfig{Shards: shards},
					srq.WorkerConfig{Logger: quiet, Retry: func(int, error) time.Duration { return time.Hour }})
				tc.check(t, o)
			})
		}
	}
}

func TestProcessRecoversPanics(t *testing.T) {
	t.Parallel()
	h := srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error { panic("oops") })
	o := srqtest.Process[string](t, h, "x", nil, srq.QueueConfig{}, srq.WorkerConfig{Logger: quiet})
	var pe *srq.PanicError
	if !errors.As(o.Err, &pe) || pe.Value != "oops" || len(pe.Stack) == 0 || !o.Retried {
		t.Fatalf("%+v", o)
	}
}

func TestNewRedis(t *testing.T) {
	t.Parallel()
	c := srqtest.NewRedis(t)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}
