package middleware_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
)

// The tests of this file check the promises of docs/middleware.md and docs/metrics.md about
// outcomes, error types, logs and trace context, with the recommended middleware chain.

// endedSpans is a span processor that hands every ended span to a channel, so a test waits for
// the spans it expects instead of polling.
type endedSpans chan sdktrace.ReadOnlySpan

func (c endedSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c endedSpans) OnEnd(s sdktrace.ReadOnlySpan)                   { c <- s }
func (c endedSpans) Shutdown(context.Context) error                  { return nil }
func (c endedSpans) ForceFlush(context.Context) error                { return nil }

// contractKit is a tracer provider whose ended spans arrive on ended, a manual metric reader,
// and the OTelConfig over both.
type contractKit struct {
	client *redis.Client
	ended  endedSpans
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	cfg    middleware.OTelConfig
}

func newContractKit(t *testing.T) *contractKit {
	t.Helper()
	k := &contractKit{client: redistest.Client(t), ended: make(endedSpans, 1000), reader: sdkmetric.NewManualReader()}
	k.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k.ended))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader))
	t.Cleanup(func() { _ = k.tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	k.cfg = middleware.OTelConfig{TracerProvider: k.tp, MeterProvider: mp, Propagator: propagation.TraceContext{}}
	return k
}

// queue returns queue name with TracingPublish and MetricsPublish on client.
func (k *contractKit) queue(t *testing.T, client *redis.Client, name string) *srq.Queue[string] {
	t.Helper()
	pub, err := middleware.MetricsPublish(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := srq.NewQueue[string](client, srq.QueueConfig{Name: name,
		PublishMiddleware: []srq.PublishMiddleware{middleware.TracingPublish(k.cfg), pub}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// processSpans waits for n ended spans named "process …" and returns them; other spans are
// dropped.
func (k *contractKit) processSpans(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	timeout := time.After(30 * time.Second)
	var out []sdktrace.ReadOnlySpan
	for len(out) < n {
		select {
		case s := <-k.ended:
			if strings.HasPrefix(s.Name(), "process ") {
				out = append(out, s)
			}
		case <-timeout:
			t.Fatalf("%d of %d process spans ended in time", len(out), n)
		}
	}
	return out
}

// durations returns the count of messaging.process.duration points by "<srq.outcome>
// <error.type>" (the outcome alone when the point has no error.type).
func (k *contractKit) durations(t *testing.T) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != middleware.MetricProcessDuration {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				key := attrString(p.Attributes, "srq.outcome")
				if e, ok := p.Attributes.Value("error.type"); ok {
					key += " " + e.AsString()
				}
				out[key] += p.Count
			}
		}
	}
	return out
}

// sent returns the sum of messaging.client.sent.messages by error.type ("" for none).
func (k *contractKit) sent(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != middleware.MetricSent {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				out[attrString(p.Attributes, "error.type")] += p.Value
			}
		}
	}
	return out
}

// attrString is the value of key in set as a string, "" when set has none.
func attrString(set attribute.Set, key attribute.Key) string {
	if v, ok := set.Value(key); ok {
		return v.Emit()
	}
	return ""
}

func spanAttrs(s sdktrace.ReadOnlySpan) attribute.Set { return attribute.NewSet(s.Attributes()...) }

// recommendedChain is the order docs/middleware.md recommends (Tracing, Metrics, Logging,
// RateLimit, Retry, Timeout), with a generous rate limit, a Retry waiting an hour before every
// retry (so a retried task does not run again in the test), and Timeout(timeout); inner, if
// not nil, goes innermost.
func (k *contractKit) recommendedChain(t *testing.T, q *srq.Queue[string], logger *slog.Logger, timeout time.Duration, inner srq.Middleware) []srq.Middleware {
	t.Helper()
	metrics, err := middleware.Metrics(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := middleware.RateLimit(q, middleware.RateLimitConfig{PerQueue: middleware.Rate{Limit: 10000, Per: time.Second, Burst: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	hour := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
	chain := []srq.Middleware{
		middleware.Tracing(k.cfg), metrics, middleware.Logging(logger), limit,
		middleware.Retry(middleware.RetryConfig{Policy: hour}), middleware.Timeout(timeout),
	}
	if inner != nil {
		chain = append(chain, inner)
	}
	return chain
}

// logLines returns the lines of logs that mention task id.
func logLines(logs, id string) []string {
	var out []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "task="+id) {
			out = append(out, line)
		}
	}
	return out
}

// TestContractOutcomesWithRecommendedChain runs tasks through the recommended chain and checks
// each delivery's span (srq.outcome, error.type, status, a panic's stack), the duration
// histogram's points and Logging's lines: a handler cut off by Timeout fails with error.type
// timeout (outcome retry, or dead on its last attempt), though Retry turned its error into a
// rejection; a panic reaches middleware as *srq.PanicError and is error.type panic with
// exception.stacktrace; a snooze and a Sleep are outcomes snooze and wait, not failures; Logging
// writes "task waiting" at Debug for the Sleep.
func TestContractOutcomesWithRecommendedChain(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	q := k.queue(t, k.client, redistest.Queue(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var mu sync.Mutex
	runs := map[string]int{}
	h := srq.HandlerFunc[string](func(ctx context.Context, task *srq.Task[string]) error {
		mu.Lock()
		runs[task.Value]++
		n := runs[task.Value]
		mu.Unlock()
		switch task.Value {
		case "timeout", "timeout-last":
			<-ctx.Done()
			return ctx.Err()
		case "panic":
			panic(errors.New("kaboom"))
		case "snooze":
			if n == 1 {
				return srq.Snooze(time.Millisecond)
			}
		case "sleep":
			if n == 1 {
				return srq.Sleep(time.Millisecond)
			}
		}
		return nil
	})
	// inner is the innermost middleware: it records what error a panic reaches middleware as.
	panics := make(chan error, 1)
	inner := func(next srq.WorkFunc) srq.WorkFunc {
		return func(ctx context.Context, d *srq.Delivery) error {
			err := next(ctx, d)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				var rej *srq.RejectError
				var wait *srq.WaitError
				if !errors.As(err, &rej) && !errors.As(err, &wait) {
					panics <- err
				}
			}
			return err
		}
	}
	var logs bytes.Buffer // written by the worker's goroutines one line at a time; read after Run returns
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	ids := map[string]string{} // task id → value
	for _, v := range []string{"timeout", "timeout-last", "panic", "snooze", "sleep"} {
		opts := &srq.PublishOpts{MaxAttempts: 5}
		if v == "timeout-last" {
			opts.MaxAttempts = 1
		}
		res, err := q.Publish(ctx, v, opts)
		if err != nil {
			t.Fatal(err)
		}
		ids[res.ID] = v
	}
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Logger: quiet,
		Middleware: k.recommendedChain(t, q, logger, 50*time.Millisecond, inner)})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(ctx, w)

	// timeout, timeout-last and panic once each; snooze and sleep twice (the second run done).
	spans := k.processSpans(t, 7)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	got := map[string][]string{} // value → "<outcome> <error.type> <status>" per delivery, in order
	for _, s := range spans {
		a := spanAttrs(s)
		v := ids[attrString(a, "messaging.message.id")]
		desc := attrString(a, "srq.outcome")
		if e, ok := a.Value("error.type"); ok {
			desc += " " + e.AsString()
		}
		if s.Status().Code == codes.Error {
			desc += " Error"
		}
		got[v] = append(got[v], desc)
		if v == "panic" {
			stack := ""
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					if kv.Key == "exception.stacktrace" {
						stack = kv.Value.AsString()
					}
				}
			}
			if !strings.Contains(stack, "goroutine") {
				t.Errorf("panic span: exception.stacktrace %q, want the handler's stack", stack)
			}
		}
	}
	want := map[string][]string{
		"timeout":      {"retry timeout Error"},
		"timeout-last": {"dead timeout Error"},
		"panic":        {"retry panic Error"},
		"snooze":       {"snooze", "done"},
		"sleep":        {"wait", "done"},
	}
	for v, w := range want {
		if strings.Join(got[v], ", ") != strings.Join(w, ", ") {
			t.Errorf("%s: spans %q, want %q", v, got[v], w)
		}
	}

	wantPoints := map[string]uint64{"retry timeout": 1, "dead timeout": 1, "retry panic": 1, "snooze": 1, "wait": 1, "done": 2}
	if points := k.durations(t); !maps.Equal(points, wantPoints) {
		t.Errorf("%s points\n got %v\nwant %v", middleware.MetricProcessDuration, points, wantPoints)
	}

	select {
	case err := <-panics:
		var pan *srq.PanicError
		if !errors.As(err, &pan) || len(pan.Stack) == 0 || !strings.Contains(pan.Error(), "kaboom") {
			t.Errorf("a panic reached middleware as %T %v, want *srq.PanicError with its stack", err, err)
		}
	default:
		t.Error("the panic reached no middleware")
	}

	out := logs.String()
	for id, v := range ids {
		lines := logLines(out, id)
		switch v {
		case "sleep":
			if len(lines) != 2 || !strings.Contains(lines[0], `level=DEBUG msg="task waiting"`) ||
				!strings.Contains(lines[1], `level=DEBUG msg="task done"`) {
				t.Errorf("sleep: log lines %q", lines)
			}
		case "timeout":
			if len(lines) != 1 || !strings.Contains(lines[0], `level=INFO msg="task handed back"`) ||
				!strings.Contains(lines[0], "retry_in=1h0m0s") {
				t.Errorf("timeout: log lines %q", lines)
			}
		case "timeout-last":
			if len(lines) != 1 || !strings.Contains(lines[0], `level=WARN msg="task failed on its last attempt"`) {
				t.Errorf("timeout-last: log lines %q", lines)
			}
		}
	}
}

// TestContractHandedBackAtShutdown: a handler that the worker's ShutdownTimeout cuts off is
// handed back: its span and duration point have srq.outcome handed_back, no error.type and no
// Error status; Logging writes "task handed back" at Info without retry_in, though Retry is in
// the chain; the queue counts it as handed back, not rejected.
func TestContractHandedBackAtShutdown(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	q := k.queue(t, k.client, redistest.Queue(t))
	long := k.startLongTask(t, q, srq.WorkerConfig{ShutdownTimeout: 20 * time.Millisecond})
	if err := long.stop(); err != nil {
		t.Fatal(err)
	}
	s := k.processSpans(t, 1)[0]
	a := spanAttrs(s)
	if out := attrString(a, "srq.outcome"); out != "handed_back" {
		t.Errorf("span outcome %q, want handed_back", out)
	}
	if e, ok := a.Value("error.type"); ok || s.Status().Code == codes.Error {
		t.Errorf("handed-back span: error.type %q, status %v", e.Emit(), s.Status())
	}
	if points := k.durations(t); !maps.Equal(points, map[string]uint64{"handed_back": 1}) {
		t.Errorf("%s points %v, want handed_back once", middleware.MetricProcessDuration, points)
	}
	lines := logLines(long.logs.String(), long.id)
	if len(lines) != 1 || !strings.Contains(lines[0], `level=INFO msg="task handed back"`) || strings.Contains(lines[0], "retry_in") {
		t.Errorf("log lines %q", lines)
	}
	st, err := q.Engine().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.HandedBack != 1 || st.Rejected != 0 {
		t.Errorf("queue counters: handed back %d, rejected %d; want 1, 0", st.HandedBack, st.Rejected)
	}
}

// longTask is a task whose handler runs until its context ends, then returns the context's error,
// under a worker with the recommended chain: what startLongTask returns once the handler started.
type longTask struct {
	id   string
	logs *bytes.Buffer
	stop func() error // ends the worker's Run and returns its error
}

// startLongTask publishes a task to q and runs a worker of cfg (its Logger and Middleware set
// here) until the task's handler has started.
func (k *contractKit) startLongTask(t *testing.T, q *srq.Queue[string], cfg srq.WorkerConfig) longTask {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	res, err := q.Publish(ctx, "long", nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := srq.HandlerFunc[string](func(ctx context.Context, _ *srq.Task[string]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	logs := &bytes.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Logger, cfg.Middleware = quiet, k.recommendedChain(t, q, logger, time.Minute, nil)
	w, err := srq.NewWorker(q, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(ctx, w)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the handler did not start")
	}
	return longTask{id: res.ID, logs: logs, stop: stop}
}

// TestContractTracingPublishKeepsCallersHeaders: TracingPublish injects the trace context into a
// copy of the message's headers: the caller's map is unchanged, and the handler gets the
// caller's headers with the trace context.
func TestContractTracingPublishKeepsCallersHeaders(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	q := k.queue(t, k.client, redistest.Queue(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, span := k.tp.Tracer("test").Start(ctx, "request")
	headers := map[string]string{"tenant": "acme"}
	if _, err := q.Publish(root, "v", &srq.PublishOpts{Headers: headers}); err != nil {
		t.Fatal(err)
	}
	span.End()
	if !maps.Equal(headers, map[string]string{"tenant": "acme"}) {
		t.Errorf("the caller's headers became %v", headers)
	}
	var got map[string]string
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, task *srq.Task[string]) error {
		got = task.Headers
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{middleware.Tracing(k.cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	if got["tenant"] != "acme" || got["traceparent"] == "" {
		t.Errorf("the handler got headers %v, want tenant and traceparent", got)
	}
}

// TestContractNoTraceContextStartsNewTrace: a task published without trace context (by a queue
// without TracingPublish) gets a process span that is the root of a new trace, not a child of
// the span the worker was started in.
func TestContractNoTraceContextStartsNewTrace(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	name := redistest.Queue(t)
	plain, err := srq.NewQueue[string](k.client, srq.QueueConfig{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := plain.Publish(ctx, "v", nil); err != nil {
		t.Fatal(err)
	}
	workerCtx, workerSpan := k.tp.Tracer("test").Start(ctx, "worker")
	defer workerSpan.End()
	var handlerCtx context.Context
	w, err := srq.NewWorker(plain, srq.HandlerFunc[string](func(ctx context.Context, _ *srq.Task[string]) error {
		handlerCtx = ctx
		return nil
	}), srq.WorkerConfig{Logger: quiet, Middleware: []srq.Middleware{middleware.Tracing(k.cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(workerCtx); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	s := k.processSpans(t, 1)[0]
	if s.Parent().IsValid() {
		t.Errorf("the process span has parent %v, want none", s.Parent())
	}
	if s.SpanContext().TraceID() == workerSpan.SpanContext().TraceID() {
		t.Error("the process span joined the worker's trace")
	}
	if handlerCtx == nil {
		t.Fatal("the handler did not run")
	}
}

// TestContractFailedPublishCounted: MetricsPublish counts the messages of a failed publish in
// messaging.client.sent.messages with error.type: timeout for a publish whose context's deadline
// passed, _OTHER for a Redis client error; TracingPublish's send span has status Error.
func TestContractFailedPublishCounted(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	name := redistest.Queue(t)
	q := k.queue(t, k.client, name)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	batch := []srq.Message[string]{{Value: "a"}, {Value: "b"}, {Value: "c"}}
	if _, err := q.PublishBatch(expired, batch); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish with an expired context: %v", err)
	}
	opts := *k.client.Options()
	closed := redis.NewClient(&opts)
	_ = closed.Close()
	qc := k.queue(t, closed, name)
	if _, err := qc.PublishBatch(context.Background(), batch[:2]); err == nil {
		t.Fatal("publish on a closed client succeeded")
	}
	if _, err := q.Publish(context.Background(), "ok", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := k.sent(t), map[string]int64{"timeout": 3, "_OTHER": 2, "": 1}; !maps.Equal(got, want) {
		t.Errorf("%s by error.type\n got %v\nwant %v", middleware.MetricSent, got, want)
	}
	errorSpans := 0
	for range 3 {
		select {
		case s := <-k.ended:
			if s.Status().Code == codes.Error {
				errorSpans++
			}
		case <-time.After(30 * time.Second):
			t.Fatal("send spans did not end")
		}
	}
	if errorSpans != 2 {
		t.Errorf("%d send spans with status Error, want 2", errorSpans)
	}
}

// TestContractCancelledWhileRunning: a task that Queue.Cancel cancels while its handler runs, and
// whose handler then returns its context's error, ends cancelled: its span and duration point
// have srq.outcome cancelled, no error.type and no Error status; Logging writes "task cancelled"
// at Info; the queue counts it cancelled, and nothing of it is pending.
func TestContractCancelledWhileRunning(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	q := k.queue(t, k.client, redistest.Queue(t))
	long := k.startLongTask(t, q, srq.WorkerConfig{Lease: 300 * time.Millisecond})
	ctx := context.Background()
	if err := q.Cancel(ctx, long.id); err != nil {
		t.Fatal(err)
	}
	s := k.processSpans(t, 1)[0]
	if err := long.stop(); err != nil {
		t.Fatal(err)
	}
	a := spanAttrs(s)
	if out := attrString(a, "srq.outcome"); out != "cancelled" {
		t.Errorf("span outcome %q, want cancelled", out)
	}
	if e, ok := a.Value("error.type"); ok || s.Status().Code == codes.Error {
		t.Errorf("cancelled span: error.type %q, status %v", e.Emit(), s.Status())
	}
	if points := k.durations(t); !maps.Equal(points, map[string]uint64{"cancelled": 1}) {
		t.Errorf("%s points %v, want cancelled once", middleware.MetricProcessDuration, points)
	}
	lines := logLines(long.logs.String(), long.id)
	if len(lines) != 1 || !strings.Contains(lines[0], `level=INFO msg="task cancelled"`) {
		t.Errorf("log lines %q", lines)
	}
	if st, err := q.Stats(ctx); err != nil || st.Cancelled != 1 || st.Pending != 0 {
		t.Errorf("stats %+v, %v; want 1 cancelled, none pending", st, err)
	}
}

// startWorker runs w until the returned stop is called, which ends Run and returns its error.
func startWorker(ctx context.Context, w *srq.Worker) (stop func() error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	return func() error { cancel(); return <-done }
}

// TestContractUnstartedHandBacksNotRecorded: at shutdown the tasks a worker fetched and never
// started go back without reaching the middleware, so Metrics records only the delivery whose
// handler ran and was cut off (metrics.md), though the queue counts every hand-back.
func TestContractUnstartedHandBacksNotRecorded(t *testing.T) {
	t.Parallel()
	k := newContractKit(t)
	q := k.queue(t, k.client, redistest.Queue(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		if _, err := q.Publish(ctx, "v", &srq.PublishOpts{Partition: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan struct{}, 3)
	h := srq.HandlerFunc[string](func(ctx context.Context, _ *srq.Task[string]) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	w, err := srq.NewWorker(q, h, srq.WorkerConfig{Concurrency: 1, Prefetch: 2, ShutdownTimeout: 20 * time.Millisecond,
		Logger: quiet, Middleware: k.recommendedChain(t, q, quiet, time.Minute, nil)})
	if err != nil {
		t.Fatal(err)
	}
	stop := startWorker(ctx, w)
	<-started
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.InFlight == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks in flight, want 3 (one running, two prefetched)", st.InFlight)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Stats(ctx); err != nil || st.HandedBack != 3 {
		t.Fatalf("handed back %d, %v; want 3", st.HandedBack, err)
	}
	if points := k.durations(t); !maps.Equal(points, map[string]uint64{"handed_back": 1}) {
		t.Errorf("%s points %v, want handed_back once: the started task only", middleware.MetricProcessDuration, points)
	}
}
