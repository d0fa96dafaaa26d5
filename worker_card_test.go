package srq_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// TestWorkerRecord: a running worker keeps a record of itself in each queue it serves (host,
// pid, queues, concurrency, when it started, how many handlers run), which follows its running
// handlers at the lease extension period and is gone once Run returns.
func TestWorkerRecord(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.Client(t)
	a, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t) + "-a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := srq.NewQueue[int](c, srq.QueueConfig{Name: redistest.Queue(t) + "-b"})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	h := srq.HandlerFunc[int](func(ctx context.Context, _ *srq.Task[int]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	w, err := srq.NewWorkerOf(srq.WorkerConfig{Concurrency: 3, Lease: 3 * time.Second, ConsumerID: "card-test"},
		srq.Serve(a, h, nil), srq.Serve(b, h, nil))
	if err != nil {
		t.Fatal(err)
	}
	record := func(q *srq.Queue[int]) *engine.WorkerRecord {
		t.Helper()
		recs, err := q.Engine().Workers(ctx, []string{"card-test"})
		if err != nil {
			t.Fatal(err)
		}
		return recs[0]
	}
	before := time.Now()
	stop := runWorker(t, w)
	waitFor(t, "the worker's record", func() bool { return record(a) != nil && record(b) != nil })
	host, _ := os.Hostname()
	rec := record(a)
	if rec.Host != host || rec.PID != os.Getpid() || rec.Concurrency != 3 || !slices.Equal(rec.Queues, []string{a.Name(), b.Name()}) ||
		rec.Started.Before(before.Truncate(time.Millisecond)) || rec.Running != 0 {
		t.Fatalf("record %+v", rec)
	}
	for i := range 2 {
		if _, err := a.Publish(ctx, i, nil); err != nil {
			t.Fatal(err)
		}
	}
	if ttl, err := c.PTTL(ctx, a.Engine().Keys().Worker("card-test")).Result(); err != nil ||
		ttl <= engine.WorkerRecordTTL-time.Minute || ttl > engine.WorkerRecordTTL {
		t.Errorf("the record expires in %v (%v), want about %v", ttl, err, engine.WorkerRecordTTL)
	}
	waitFor(t, "two running handlers on the record", func() bool { r := record(b); return r != nil && r.Running == 2 })
	close(release)
	waitFor(t, "no running handler on the record", func() bool { r := record(a); return r != nil && r.Running == 0 })
	stop()
	if record(a) != nil || record(b) != nil {
		t.Fatal("the record outlives Run")
	}
}
