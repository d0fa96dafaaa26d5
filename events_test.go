package srq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
)

// collect reads events of q from from until n are in or the context ends.
func collect(ctx context.Context, t *testing.T, q *srq.Queue[order], from string, n int) []srq.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []srq.Event
	for ev, err := range q.Events(ctx, from) {
		if err != nil {
			t.Logf("read: %v", err)
			continue
		}
		out = append(out, ev)
		if len(out) == n {
			break
		}
	}
	if len(out) < n {
		t.Fatalf("got %d events, want %d: %v", len(out), n, kinds(out))
	}
	return out
}

func kinds(evs []srq.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Kind) + ":" + ev.ID
	}
	return out
}

// A task's life, as the stream tells it: published, retried with its error, dead-lettered,
// requeued, acked; another cancelled.
func TestEvents(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, _ := newQueue[order](t, srq.QueueConfig{Events: 1000})
	a, _ := q.Publish(ctx, order{User: "a"}, &srq.PublishOpts{Partition: "p", MaxAttempts: 2})
	b, _ := q.Publish(ctx, order{User: "b"}, &srq.PublishOpts{Delay: time.Hour})
	if err := q.Cancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	fail := true
	w, err := srq.NewWorker(q, srq.HandlerFunc[order](func(ctx context.Context, t *srq.Task[order]) error {
		if fail {
			return srq.RejectWithDelay(0, errors.New("boom"))
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if errs, err := q.Engine().Requeue(ctx, []string{a.ID}); err != nil || errs[0] != nil {
		t.Fatalf("requeue: %v %v", err, errs)
	}
	fail = false
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	evs := collect(ctx, t, q, "0", 7)
	want := []string{"published:" + a.ID, "published:" + b.ID, "cancelled:" + b.ID, "retried:" + a.ID,
		"dead:" + a.ID, "requeued:" + a.ID, "acked:" + a.ID}
	if fmt.Sprint(kinds(evs)) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", kinds(evs), want)
	}
	if evs[0].Partition != "p" || evs[3].Error != "boom" || evs[4].Error != "boom" || evs[0].Time.IsZero() {
		t.Fatalf("details: %+v", evs)
	}
	// Resuming from a cursor reads on from there.
	if more := collect(ctx, t, q, evs[4].Cursor, 2); more[0].Kind != engine.EventRequeued {
		t.Fatalf("resumed at %v", kinds(more))
	}
}

// A queue without a stream writes none; a bad cursor is refused.
func TestEventsOffAndBadCursor(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[order](t, srq.QueueConfig{})
	if _, err := q.Publish(ctx, order{}, nil); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, q.Engine().Keys().Events()).Result(); err != nil || n != 0 {
		t.Fatalf("a queue without events has a stream: %d, %v", n, err)
	}
	for _, err := range q.Events(ctx, "nonsense") {
		if !errors.Is(err, srq.ErrInvalid) {
			t.Fatalf("bad cursor: %v", err)
		}
		break
	}
}

// The stream, read across a restart of a Redis with AOF, resumes without a gap: every event
// written before and after the restart is read once, in order.
func TestEventsAcrossRedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "kills and restarts the server", redistest.DurableArgs...)
	c := srv.Client(t)
	ctx := testCtx(t)
	q, err := srq.NewQueue[order](c, srq.QueueConfig{Name: redistest.Queue(t), Events: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan srq.Event, 1000)
	readCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for ev, err := range q.Events(readCtx, "0") {
			if err == nil {
				read <- ev
			}
		}
		close(read)
	}()
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			for {
				_, err := q.Publish(ctx, order{Seq: i}, &srq.PublishOpts{ID: fmt.Sprint("t", i)})
				if err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond) // the server is restarting: try again
			}
		}
	}
	publish(0, 50)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	publish(50, 100)
	for i := range 100 {
		select {
		case ev := <-read:
			if ev.ID != fmt.Sprint("t", i) || ev.Kind != engine.EventPublished {
				t.Fatalf("event %d: %s %s", i, ev.Kind, ev.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("read %d events of 100", i)
		}
	}
}
