package srq_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/internal/logtest"
)

type transfer struct {
	User   string
	Amount int
}

// TestDecodeFailureLoggedOnce: a producer on JSON and a worker on msgpack. Each task is
// dead-lettered with a decode error, and the worker logs that once per queue and run, at Error,
// with the codec's name and the error; a later run logs it once again.
func TestDecodeFailureLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q, c := newQueue[transfer](t, srq.QueueConfig{})
	producer, err := srq.NewQueue[transfer](c, srq.QueueConfig{Name: q.Name(), Codec: codec.JSON{}})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, err := producer.Publish(ctx, transfer{"bob", i}, &srq.PublishOpts{ID: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, 3)
	var ran atomic.Int32
	logs := &logtest.Recorder{}
	w, err := srq.NewWorker(q, srq.HandlerFunc[transfer](func(context.Context, *srq.Task[transfer]) error {
		ran.Add(1)
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	dead := func() int64 {
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Dead
	}
	stop := runWorker(t, w)
	waitFor(t, "3 dead letters", func() bool { return dead() == 3 })
	stop()
	got := logs.Find("cannot decode")
	if len(got) != 1 {
		t.Fatalf("logged %d decode failures for 3 tasks, want 1: %v", len(got), got)
	}
	rec := got[0]
	if rec.Level != slog.LevelError || logtest.Attr(rec, "codec") != "msgpack" {
		t.Fatalf("%s %q codec=%v; want Error with codec=msgpack", rec.Level, rec.Message, logtest.Attr(rec, "codec"))
	}
	if id := fmt.Sprint(logtest.Attr(rec, "task")); id != "0" && id != "1" && id != "2" {
		t.Fatalf("the log line names task %q, want one of the three", id)
	}
	if err, _ := logtest.Attr(rec, "err").(error); err == nil {
		t.Fatalf("no decode error in %v", rec)
	}
	if n := ran.Load(); n != 0 {
		t.Fatalf("the handler ran %d times on payloads it could not decode", n)
	}

	publish(3, 2)
	if n, err := w.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	if got := logs.Find("cannot decode"); len(got) != 2 {
		t.Fatalf("after a second run logged %d decode failures, want 2 (one per run)", len(got))
	}

	// The recovery docs/errors.md gives: a worker on the producer's codec, then a requeue of the
	// letters whose error says they could not be decoded. Each runs with its value.
	page, err := q.DeadLetters(ctx, srq.DeadQuery{ErrorContains: "cannot decode"})
	if err != nil || len(page.Letters) != 5 {
		t.Fatalf("dead letters that could not be decoded: %d, %v; want 5", len(page.Letters), err)
	}
	for _, l := range page.Letters {
		if !strings.Contains(l.Error, "cannot decode payload with msgpack") {
			t.Fatalf("dead letter %s: last error %q", l.ID, l.Error)
		}
	}
	var amounts atomic.Int64
	fixed, err := srq.NewWorker(producer, srq.HandlerFunc[transfer](func(_ context.Context, t *srq.Task[transfer]) error {
		amounts.Add(int64(t.Value.Amount))
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(page.Letters))
	for i, l := range page.Letters {
		ids[i] = l.ID
	}
	if n, err := q.Requeue(ctx, ids...); err != nil || n != 5 {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	if n, err := fixed.RunOnce(ctx); err != nil || n != 5 {
		t.Fatalf("RunOnce of the fixed worker: %d, %v", n, err)
	}
	if st, err := q.Stats(ctx); err != nil || st.Acked != 5 || st.Dead != 0 || amounts.Load() != 0+1+2+3+4 {
		t.Fatalf("after the recovery: %+v, %v, amounts %d", st, err, amounts.Load())
	}
}
