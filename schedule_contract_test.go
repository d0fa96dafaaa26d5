package srq_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// What a tick publishes (schedules.md): its task is available at the tick plus Delay plus the
// jitter (below Jitter), it keeps its result for KeepResult and its OnDeadLetter holds its ordered
// partition, and the queue's PublishMiddleware does not see it, also when the queue's own worker
// fires it.
func TestTickTaskOptions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var published atomic.Int32
	q, _ := newQueue[string](t, srq.QueueConfig{PublishMiddleware: []srq.PublishMiddleware{
		func(next srq.PublishFunc) srq.PublishFunc {
			return func(ctx context.Context, p *srq.Publishing) ([]srq.PublishResult, error) {
				published.Add(1)
				return next(ctx, p)
			}
		},
	}})
	const jitter = 5 * time.Second
	if _, err := q.Schedule(ctx, "later", "l", &srq.ScheduleOpts{Every: time.Second, Jitter: jitter,
		Publish: srq.PublishOpts{Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Schedule(ctx, "dies", "d", &srq.ScheduleOpts{Every: time.Second,
		Publish: srq.PublishOpts{Partition: "acct", Ordered: true, KeepResult: time.Hour, OnDeadLetter: srq.HoldPartition}}); err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(context.Context, *srq.Task[string]) error {
		return srq.Permanent(errors.New("no"))
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	var dead string // a tick of "dies" that was dead-lettered
	waitFor(t, "a tick of each schedule", func() bool {
		page, err := q.DeadLetters(ctx, srq.DeadQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Letters {
			if strings.HasPrefix(l.ID, "sched/dies/") {
				dead = l.ID
			}
		}
		s, err := q.GetSchedule(ctx, "later")
		return dead != "" && err == nil && s.Fired > 0
	})
	stop()
	s, err := q.GetSchedule(ctx, "later")
	if err != nil {
		t.Fatal(err)
	}
	id := srq.TickID("later", s.LastTick)
	ti, err := q.Engine().Task(ctx, id)
	if err != nil {
		t.Fatalf("the tick's task %s: %v", id, err)
	}
	if late := ti.AvailableAt.Sub(s.LastTick) - time.Hour; late < 0 || late >= jitter {
		t.Errorf("the tick's task is available %v after tick+Delay, want in [0, %v)", late, jitter)
	}
	var failed *srq.TaskFailedError
	if _, err := srq.ResultOf[string](ctx, q, dead); !errors.As(err, &failed) || failed.State != "dead" {
		t.Errorf("the dead tick's kept outcome: %v, want its failure", err)
	}
	held, _, err := q.Engine().PartitionsBy(ctx, engine.IndexHeld, 10)
	if err != nil || len(held) != 1 {
		t.Errorf("held partitions %v, %v; want the dead tick's", held, err)
	}
	if n := published.Load(); n != 0 {
		t.Errorf("the queue's PublishMiddleware saw %d publishes of ticks, want none", n)
	}
}
