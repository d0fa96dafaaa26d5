package faults_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
	"github.com/srqueue/srq/srqtest/history"
)

// noPanic runs f and fails the test if it panics.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			t.Errorf("%s panicked: %v", what, v)
		}
	}()
	f()
}

// queueKeys returns the keys of eng's queue in Redis.
func queueKeys(t *testing.T, ctx context.Context, eng *engine.Engine) []string {
	t.Helper()
	keys, err := eng.Client().Keys(ctx, redistest.GlobEscape(eng.Keys().Base())+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestBadInputPublish: every invalid publish fails with a clear ErrInvalid error (or the codec's
// error), never panics, and writes nothing: the queue has no key afterwards, and a valid publish
// next to an invalid one in a batch is not written either.
func TestBadInputPublish(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, time.Minute)
	c := client(t, srv, nil)
	const limit = 64
	q, err := srq.NewQueue[string](c, srq.QueueConfig{Name: "bad", MaxPayloadBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", limit) // msgpack adds a header: over the limit
	hugeHeaders := map[string]string{"h": strings.Repeat("v", engine.MaxHeaderBytes)}
	tests := []struct {
		name string
		v    string
		opts srq.PublishOpts
		want string // in the error
	}{
		{"oversized payload", big, srq.PublishOpts{}, fmt.Sprintf("the limit is %d", limit)},
		{"id too long", "", srq.PublishOpts{ID: strings.Repeat("i", engine.MaxIDLen+1)}, "task id is"},
		{"id not UTF-8", "", srq.PublishOpts{ID: "\xff\xfe"}, "not valid UTF-8"},
		{"ordered partition without a name", "", srq.PublishOpts{Ordered: true}, "names no partition"},
		{"bare ordered prefix", "", srq.PublishOpts{Partition: "!"}, "names no partition"},
		{"partition not UTF-8", "", srq.PublishOpts{Partition: "\xc3"}, "not valid UTF-8"},
		{"partition too long", "", srq.PublishOpts{Partition: strings.Repeat("p", partition.MaxLen+1)}, "the limit is"},
		{"negative delay", "", srq.PublishOpts{Delay: -time.Second}, "negative delay"},
		{"delay past the limit", "", srq.PublishOpts{Delay: engine.MaxDelay + time.Hour}, "over the limit"},
		{"delay and at", "", srq.PublishOpts{Delay: time.Second, At: time.Now()}, "both Delay and At"},
		{"at before 1970", "", srq.PublishOpts{At: time.Unix(-10, 0)}, "before 1970"},
		{"priority past int32", "", srq.PublishOpts{Priority: math.MaxInt32 + 1}, "priority"},
		{"headers too large", "", srq.PublishOpts{Headers: hugeHeaders}, "headers are"},
	}
	for _, tc := range tests {
		noPanic(t, tc.name, func() {
			_, err := q.Publish(ctx, tc.v, &tc.opts)
			if !errors.Is(err, srq.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v; want ErrInvalid saying %q", tc.name, err, tc.want)
			}
			// The same message in a batch after a valid one: the whole batch is refused.
			_, err = q.PublishBatch(ctx, []srq.Message[string]{{Value: "ok", Opts: srq.PublishOpts{ID: "fine"}}, {Value: tc.v, Opts: tc.opts}})
			if !errors.Is(err, srq.ErrInvalid) || !strings.Contains(err.Error(), "message 1") {
				t.Errorf("%s in a batch: %v; want ErrInvalid naming message 1", tc.name, err)
			}
		})
	}
	// A value the codec cannot encode.
	qf, err := srq.NewQueue[float64](c, srq.QueueConfig{Name: "bad", Codec: codec.JSON{}})
	if err != nil {
		t.Fatal(err)
	}
	noPanic(t, "NaN", func() {
		if _, err := qf.Publish(ctx, math.NaN(), nil); err == nil || !strings.Contains(err.Error(), "encode with json") {
			t.Errorf("NaN with JSON: %v; want an encode error", err)
		}
	})
	if keys := queueKeys(t, ctx, q.Engine()); len(keys) != 0 {
		t.Fatalf("refused publishes wrote %q", keys)
	}

	// Nothing was poisoned: valid publishes work, an empty id gets a generated one, and a payload
	// exactly at the limit is accepted.
	res, err := q.PublishBatch(ctx, []srq.Message[string]{{Value: "a"}, {Value: big[:limit-2], Opts: srq.PublishOpts{ID: "at-limit"}}})
	if err != nil || len(res[0].ID) != 26 || res[1].ID != "at-limit" {
		t.Fatalf("valid publish after refused ones: %+v, %v", res, err)
	}
	if s, _ := stats(ctx, q.Engine()); s.Published != 2 || s.Pending != 2 {
		t.Fatalf("stats %+v: want the 2 valid tasks only", s)
	}
}

// TestBadInputConfig: invalid configurations fail with ErrInvalid; zero-valued ones get the
// documented defaults. A nil handler, including a nil HandlerFunc, is refused.
func TestBadInputConfig(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, time.Minute)
	c := client(t, srv, nil)
	for name, cfg := range map[string]srq.QueueConfig{
		"no name":           {},
		"brace in the name": {Name: "a{b}"},
		"negative payload":  {Name: "q", MaxPayloadBytes: -1},
		"long prefix":       {Name: "q", Prefix: strings.Repeat("p", engine.MaxNameLen+1)},
		"negative window":   {Name: "q", DedupWindow: -time.Second},
	} {
		noPanic(t, name, func() {
			if _, err := srq.NewQueue[int](c, cfg); !errors.Is(err, srq.ErrInvalid) {
				t.Errorf("queue config %s: %v; want ErrInvalid", name, err)
			}
		})
	}
	noPanic(t, "nil client", func() {
		if _, err := srq.NewQueue[int](nil, srq.QueueConfig{Name: "q"}); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("nil client: %v; want ErrInvalid", err)
		}
	})

	q, err := srq.NewQueue[int](c, srq.QueueConfig{Name: "defaults"})
	if err != nil {
		t.Fatal(err)
	}
	got := q.Engine().Config()
	if got.Prefix != "srq" || got.DeadLetterMaxCount != 100_000 || got.DeadLetterMaxAge != 30*24*time.Hour ||
		got.MaxPayloadBytes != 4<<20 || got.DedupWindow != 0 || got.CrashIsNotAttempt {
		t.Errorf("zero QueueConfig: engine config %+v; want the documented defaults", got)
	}

	ok := srq.HandlerFunc[int](func(context.Context, *srq.Task[int]) error { return nil })
	var nilFunc srq.HandlerFunc[int]
	for name, f := range map[string]func() (*srq.Worker, error){
		"nil queue":       func() (*srq.Worker, error) { return srq.NewWorker[int](nil, ok, srq.WorkerConfig{}) },
		"nil handler":     func() (*srq.Worker, error) { return srq.NewWorker[int](q, nil, srq.WorkerConfig{}) },
		"nil HandlerFunc": func() (*srq.Worker, error) { return srq.NewWorker[int](q, nilFunc, srq.WorkerConfig{}) },
		"negative concurrency": func() (*srq.Worker, error) {
			return srq.NewWorker(q, ok, srq.WorkerConfig{Concurrency: -1})
		},
		"lease below 30ms": func() (*srq.Worker, error) {
			return srq.NewWorker(q, ok, srq.WorkerConfig{Lease: 10 * time.Millisecond})
		},
		"negative lease":     func() (*srq.Worker, error) { return srq.NewWorker(q, ok, srq.WorkerConfig{Lease: -time.Second}) },
		"negative recovery":  func() (*srq.Worker, error) { return srq.NewWorker(q, ok, srq.WorkerConfig{RecoverInterval: -1}) },
		"negative poll wait": func() (*srq.Worker, error) { return srq.NewWorker(q, ok, srq.WorkerConfig{PollWait: -1}) },
	} {
		noPanic(t, name, func() {
			if _, err := f(); !errors.Is(err, srq.ErrInvalid) {
				t.Errorf("worker %s: %v; want ErrInvalid", name, err)
			}
		})
	}

	// A zero WorkerConfig: 10 handlers, 10 more tasks prefetched, leases of 30s; tasks published
	// with zero options get 25 max attempts.
	const n = 30
	for i := 0; i < n; i++ {
		if _, err := q.Publish(ctx, i, nil); err != nil {
			t.Fatal(err)
		}
	}
	var running atomic.Int32
	release := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		running.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w, 30*time.Second)
	eng := q.Engine()
	waitUntil(t, "10 handlers and 10 prefetched tasks", 30*time.Second, func() bool {
		s, ok := stats(ctx, eng)
		return ok && running.Load() == 10 && s.InFlight == 20
	})
	ids, err := c.ZRange(ctx, eng.Keys().Inflight(), 0, 0).Result()
	if err != nil || len(ids) != 1 {
		t.Fatal(ids, err)
	}
	ti, err := eng.Task(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	s, _ := stats(ctx, eng)
	if lease := ti.LeaseEnds.Sub(s.ServerTime); lease < 25*time.Second || lease > 30*time.Second || ti.MaxAttempts != srq.DefaultMaxAttempts {
		t.Errorf("task %+v: lease ends in %v, max attempts %d; want about 30s and %d", ti, lease, ti.MaxAttempts, srq.DefaultMaxAttempts)
	}
	if running.Load() != 10 {
		t.Errorf("%d handlers ran at once, want 10", running.Load())
	}
	close(release)
	waitUntil(t, "the tasks to run", 30*time.Second, func() bool { return drained(ctx, eng) })
	stop()
}

// TestBadInputEngine: the engine's calls refuse invalid arguments with ErrInvalid and unknown or
// stale receipts per item, without panicking or writing.
func TestBadInputEngine(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, time.Minute)
	eng, err := engine.New(client(t, srv, nil), engine.Config{Queue: "bad-engine"})
	if err != nil {
		t.Fatal(err)
	}
	invalid := map[string]func() error{
		"fetch 0 tasks":          func() error { _, err := eng.Fetch(ctx, "c", 0, time.Second); return err },
		"fetch with a 0 lease":   func() error { _, err := eng.Fetch(ctx, "c", 1, 0); return err },
		"fetch without consumer": func() error { _, err := eng.Fetch(ctx, "", 1, time.Second); return err },
		"extend with a 0 lease": func() error {
			_, _, err := eng.Extend(ctx, []engine.Receipt{{ID: "x", Token: 1}}, 0)
			return err
		},
		"reject with a negative delay": func() error {
			_, err := eng.Reject(ctx, []engine.Rejection{{Receipt: engine.Receipt{ID: "x", Token: 1}, Delay: -time.Second}})
			return err
		},
		"task with an empty id":      func() error { _, err := eng.Task(ctx, ""); return err },
		"requeue an empty id":        func() error { _, err := eng.Requeue(ctx, []string{""}); return err },
		"dead letters, limit 0":      func() error { _, err := eng.DeadLetters(ctx, 0, 0); return err },
		"dead letters, offset -1":    func() error { _, err := eng.DeadLetters(ctx, -1, 10); return err },
		"pause the bare prefix":      func() error { return eng.Pause(ctx, "!") },
		"limit an ordered partition": func() error { return eng.SetConcurrency(ctx, "!p", 2) },
		"negative limit":             func() error { return eng.SetConcurrency(ctx, "p", -1) },
		"negative max attempts": func() error {
			_, err := eng.Publish(ctx, []engine.Message{{MaxAttempts: -1}})
			return err
		},
	}
	for name, f := range invalid {
		noPanic(t, name, func() {
			if err := f(); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("%s: %v; want ErrInvalid", name, err)
			}
		})
	}
	noPanic(t, "unknown receipts", func() {
		rs := []engine.Receipt{{ID: "nope", Token: 1}, {ID: "", Token: 0}, {ID: "\xff", Token: math.MaxUint64}}
		errs, err := eng.Ack(ctx, rs)
		if err != nil || len(errs) != 3 {
			t.Fatalf("ack of unknown tasks: %v, %v", errs, err)
		}
		for i, e := range errs {
			if !errors.Is(e, engine.ErrNotFound) {
				t.Errorf("ack of %q: %v; want ErrNotFound", rs[i].ID, e)
			}
		}
		ext, _, err := eng.Extend(ctx, rs, time.Second)
		if err != nil || !errors.Is(ext[0], engine.ErrNotFound) {
			t.Errorf("extend of unknown tasks: %v, %v", ext, err)
		}
	})
	if keys := queueKeys(t, ctx, eng); len(keys) != 0 {
		t.Fatalf("refused calls wrote %q", keys)
	}
}

// TestBadInputForeignPayload: a producer of another type (JSON strings) publishes into the middle
// of an ordered partition of msgpack tasks. The foreign task must go to the dead letters at once,
// without reaching the handler, and the partition must go on: the tasks after it complete, in
// order. Nothing else is lost or out of order.
func TestBadInputForeignPayload(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, time.Minute)
	c := client(t, srv, nil)
	q, err := srq.NewQueue[task](c, srq.QueueConfig{Name: "mixed"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := srq.NewQueue[string](c, srq.QueueConfig{Name: "mixed", Codec: codec.JSON{}})
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder("test", nil)
	opts := func(id string) *srq.PublishOpts { return &srq.PublishOpts{ID: id, Partition: "m", Ordered: true} }
	for i := 0; i < 6; i++ {
		id := fmt.Sprint("good", i)
		if _, err := q.Publish(ctx, task{N: i}, opts(id)); err != nil {
			t.Fatal(err)
		}
		rec.Published("p", id, "!m")
		if i == 2 {
			if _, err := other.Publish(ctx, "not a task", opts("foreign")); err != nil {
				t.Fatal(err)
			}
			rec.Published("p", "foreign", "!m")
		}
	}
	var sawForeign atomic.Bool
	w, err := srq.NewWorker(q, srq.HandlerFunc[task](func(_ context.Context, t *srq.Task[task]) error {
		if t.ID == "foreign" {
			sawForeign.Store(true)
		}
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{rec.Middleware("w")}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w, 30*time.Second)
	waitUntil(t, "the partition to drain", 30*time.Second, func() bool { return drained(ctx, q.Engine()) })
	stop()
	if sawForeign.Load() {
		t.Error("the handler got the foreign payload")
	}
	page, err := q.Engine().DeadLetters(ctx, 0, 10)
	if err != nil || page.Total != 1 || page.Letters[0].ID != "foreign" || page.Letters[0].Attempts != 1 ||
		!strings.Contains(page.Letters[0].LastError, codec.ErrDecode.Error()) {
		t.Fatalf("dead letters %+v, %v; want the foreign task, dead after one attempt with a decode error", page, err)
	}
	// The foreign task ran once (its decoding failed) and is dead; without it, the history of
	// the partition must be clean: every good task completed once, in order.
	var good []history.Event
	foreign := 0
	for _, e := range rec.Events() {
		switch {
		case e.ID != "foreign":
			good = append(good, e)
		case e.Op == history.OpEnd && (e.OK || !strings.Contains(e.Err, codec.ErrDecode.Error())):
			t.Errorf("the foreign task ended %+v; want a decode error", e)
		case e.Op == history.OpStart:
			foreign++
		}
	}
	if foreign != 1 {
		t.Errorf("the foreign task ran %d times, want once", foreign)
	}
	if r := check(t, good); r.Completed != 6 {
		t.Errorf("%d good tasks completed, want 6", r.Completed)
	}
}

// TestBadInputLargeCalls: calls far larger than a worker usually makes (a fetch of 5,000 tasks, as
// a worker with Concurrency 2,500 does; acks, extensions and rejections of as many) work, rather
// than failing in a script for ever.
func TestBadInputLargeCalls(t *testing.T) {
	t.Parallel()
	srv := realServer(t)
	ctx := testCtx(t, time.Minute)
	eng, err := engine.New(client(t, srv, nil), engine.Config{Queue: "large"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	msgs := make([]engine.Message, 2*n)
	for i := range msgs {
		msgs[i].Partition = partition.Key(fmt.Sprint("p", i%3))
	}
	if _, err := eng.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var ds []engine.Delivery
	noPanic(t, "large fetch", func() {
		if ds, err = eng.Fetch(ctx, "c", n, time.Minute); err != nil || len(ds) != n {
			t.Fatalf("fetch of %d: %d tasks, %v", n, len(ds), err)
		}
	})
	rs := make([]engine.Receipt, n)
	for i := range ds {
		rs[i] = ds[i].Receipt()
	}
	if errs, _, err := eng.Extend(ctx, rs, time.Minute); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("extend of %d: %v", n, errors.Join(err, errors.Join(errs...)))
	}
	rej := make([]engine.Rejection, n/2)
	for i := range rej {
		rej[i].Receipt = rs[i]
	}
	if res, err := eng.Reject(ctx, rej); err != nil || res[0].Err != nil {
		t.Fatalf("reject of %d: %v", n/2, err)
	}
	if errs, err := eng.Ack(ctx, rs[n/2:]); err != nil || errors.Join(errs...) != nil {
		t.Fatalf("ack of %d: %v", n/2, errors.Join(err, errors.Join(errs...)))
	}
	if s, _ := stats(ctx, eng); s.Pending != 2*n-n/2 || s.InFlight != 0 || s.Acked != n/2 {
		t.Fatalf("stats %+v", s)
	}
}
