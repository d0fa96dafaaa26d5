package srq_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// upkeepQueues returns n queues of int on one client and a worker over them all with cfg, whose
// handler sends the id of each task it runs, and when, on the channel returned; the worker is not
// started.
func upkeepQueues(t *testing.T, n int, cfg srq.WorkerConfig) ([]*srq.Queue[int], *srq.Worker, <-chan ranAt) {
	t.Helper()
	return upkeepQueuesOn(t, redistest.Client(t), n, cfg)
}

// upkeepQueuesOn is upkeepQueues on client c.
func upkeepQueuesOn(t *testing.T, c redis.UniversalClient, n int, cfg srq.WorkerConfig) ([]*srq.Queue[int], *srq.Worker, <-chan ranAt) {
	t.Helper()
	ran := make(chan ranAt, 64)
	h := srq.HandlerFunc[int](func(_ context.Context, task *srq.Task[int]) error {
		ran <- ranAt{id: task.ID, at: time.Now()}
		return nil
	})
	var qs []*srq.Queue[int]
	var served []srq.Served
	for i := range n {
		q := queueOn[int](t, c, fmt.Sprint("-", i), srq.QueueConfig{})
		qs = append(qs, q)
		served = append(served, srq.Serve(q, h, nil))
	}
	w, err := srq.NewWorkerOf(cfg, served...)
	if err != nil {
		t.Fatal(err)
	}
	return qs, w, ran
}

// ranAt is a task a handler ran, and when.
type ranAt struct {
	id string
	at time.Time
}

// elsewhere returns q as another process sees it: the same queue on a client of its own.
func elsewhere(t *testing.T, q *srq.Queue[int]) *engine.Engine {
	t.Helper()
	other, err := srq.NewQueue[int](redistest.Client(t), srq.QueueConfig{Name: q.Name()})
	if err != nil {
		t.Fatal(err)
	}
	return other.Engine()
}

// TestMultiQueueFiresScheduleOnTime: a worker over eight queues fires a schedule of the fifth on
// its ticks, although it looks for due work only every PollWait, which is longer than the
// schedule's period.
func TestMultiQueueFiresScheduleOnTime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const poll = 3 * time.Second
	qs, w, ran := upkeepQueues(t, 8, srq.WorkerConfig{PollWait: poll, RecoverInterval: poll, Logger: quiet})
	if _, err := qs[4].Schedule(ctx, "tick", 1, &srq.ScheduleOpts{Every: time.Second}); err != nil {
		t.Fatal(err)
	}
	runWorker(t, w)
	started := time.Now()
	for seen := 0; seen < 3; {
		var r ranAt
		select {
		case r = <-ran:
		case <-ctx.Done():
			t.Fatal("no tick ran")
		}
		ms, err := strconv.ParseInt(r.id[strings.LastIndexByte(r.id, '/')+1:], 10, 64)
		if err != nil || !strings.HasPrefix(r.id, "sched/tick/") {
			t.Fatalf("ran %q, not a tick of the schedule", r.id)
		}
		tick := time.UnixMilli(ms)
		if tick.Before(started) {
			continue // due before the worker ran
		}
		seen++
		// Well under PollWait. The embedded Redis runs its scripts in Go (gopher-lua), which under
		// -race beside the rest of the suite on two cores can take most of a second for a firing.
		bound := 700 * time.Millisecond
		if redistest.Embedded() {
			bound = 2 * time.Second
		}
		if late := r.at.Sub(tick); late > bound {
			t.Errorf("tick %v ran %v late (PollWait %v)", tick, late, poll)
		} else {
			t.Logf("tick %v ran %v after its time", tick.Format(time.StampMilli), late)
		}
	}
}

// TestMultiQueueRecoversOnTime: a worker over eight queues returns an expired lease of one of
// them, another consumer's, within about RecoverInterval of its expiry, although PollWait is
// longer.
func TestMultiQueueRecoversOnTime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const interval, lease = 500 * time.Millisecond, time.Second
	qs, w, ran := upkeepQueues(t, 8, srq.WorkerConfig{PollWait: 5 * time.Second, RecoverInterval: interval, Logger: quiet})
	if _, err := qs[2].Publish(ctx, 1, &srq.PublishOpts{ID: "orphan"}); err != nil {
		t.Fatal(err)
	}
	// Another consumer takes the task and dies with it.
	fetched := time.Now()
	if ds, err := elsewhere(t, qs[2]).Fetch(ctx, "gone", 1, lease); err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	runWorker(t, w)
	select {
	case r := <-ran:
		late := r.at.Sub(fetched.Add(lease))
		t.Logf("the orphan ran %v after its lease expired (RecoverInterval %v)", late, interval)
		if r.id != "orphan" || late > interval+500*time.Millisecond {
			t.Errorf("ran %q %v after the lease expired, RecoverInterval %v", r.id, late, interval)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the orphan did not run in 10s")
	}
}

// TestRelaysOutboxPerShard: on a client whose queues cannot be probed in one call (a Ring, as a
// Cluster), each shard's relay loop relays what another process's ack left in its flow outbox
// every RecoverInterval.
func TestRelaysOutboxPerShard(t *testing.T) {
	t.Parallel()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"one": redistest.Client(t).Options().Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	const every = 300 * time.Millisecond
	qs, w, ran := upkeepQueuesOn(t, ring, 2, srq.WorkerConfig{PollWait: time.Hour, RecoverInterval: every, Logger: quiet})
	d := nextStepRelayed(t, qs[0], qs[1], w, ran)
	t.Logf("the next step ran %v after the first was acked elsewhere (RecoverInterval %v)", d, every)
	if d > 5*every {
		t.Errorf("the next step ran %v after the ack, RecoverInterval %v", d, every)
	}
}

// TestMultiQueueRelaysOutbox: a worker over eight queues relays what another process's ack
// left in one queue's flow outbox (a flow's next step, in another of the queues), on its own
// look for due work: RecoverInterval is far off and no call of the worker wrote to the outbox.
func TestMultiQueueRelaysOutbox(t *testing.T) {
	t.Parallel()
	const poll = 200 * time.Millisecond
	qs, w, ran := upkeepQueues(t, 8, srq.WorkerConfig{PollWait: poll, RecoverInterval: time.Hour, Logger: quiet})
	d := nextStepRelayed(t, qs[1], qs[6], w, ran)
	t.Logf("the next step ran %v after the first was acked elsewhere (PollWait %v)", d, poll)
	if d > 2*time.Second {
		t.Errorf("the next step ran %v after the ack, PollWait %v", d, poll)
	}
}

// nextStepRelayed publishes a flow of two steps, the first in from and the next in to, lets
// another process run the first (its ack sends the release of the next, in another queue's slot,
// through the outbox of from's), runs w, and returns how long after that ack w ran the next step.
// It fails t when w runs another task first or none within 10s.
func nextStepRelayed(t *testing.T, from, to *srq.Queue[int], w *srq.Worker, ran <-chan ranAt) time.Duration {
	t.Helper()
	ctx := testCtx(t)
	first, next := from.Step("first", 1, nil), to.Step("next", 2, nil)
	if _, err := srq.PublishFlow(ctx, &srq.Flow{ID: "f", Steps: srq.Chain(first, next)}); err != nil {
		t.Fatal(err)
	}
	other := elsewhere(t, from)
	ds, err := other.Fetch(ctx, "other", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	runWorker(t, w)
	acked := time.Now()
	if errs, err := other.Ack(ctx, []engine.Receipt{ds[0].Receipt()}); err != nil || errs[0] != nil {
		t.Fatalf("ack: %v, %v", errs, err)
	}
	select {
	case r := <-ran:
		if !strings.HasSuffix(r.id, "/next") {
			t.Fatalf("ran %q, not the next step", r.id)
		}
		return r.at.Sub(acked)
	case <-time.After(10 * time.Second):
		t.Fatal("the next step did not run in 10s")
		return 0
	}
}
