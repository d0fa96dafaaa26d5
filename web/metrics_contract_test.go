package web_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
	"github.com/srqueue/srq/web"
)

// The tests of this file check the promises of docs/metrics.md about web.NewMetrics: when it
// fails, what a scrape costs, and error_type with the recommended middleware chain.

// roundTrips counts the round trips a client makes: one per command, one per pipeline.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// contractPrefix returns a key prefix of the test's own, dropped when it ends.
func contractPrefix(t *testing.T, c *redis.Client) string {
	t.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	prefix := "srqmc-" + hex.EncodeToString(r[:])
	t.Cleanup(func() { _ = redistest.DropKeys(context.Background(), c, prefix+":") })
	return prefix
}

// scrapeText serves one scrape of m and returns its body.
func scrapeText(t *testing.T, m *web.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// TestMetricsContractNewMetricsFails: NewMetrics fails with ErrInvalid for a nil Inspector and a
// negative ScrapeTimeout, and succeeds with a Registry of the caller's; middleware.Metrics fails with ErrInvalid for buckets that are not finite and increasing.
func TestMetricsContractNewMetricsFails(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	in, err := inspect.New(c, inspect.Config{Prefix: contractPrefix(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := web.NewMetrics(nil, web.MetricsConfig{}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("NewMetrics(nil): %v, want ErrInvalid", err)
	}
	if _, err := web.NewMetrics(in, web.MetricsConfig{ScrapeTimeout: -time.Second}); !errors.Is(err, srq.ErrInvalid) {
		t.Errorf("negative ScrapeTimeout: %v, want ErrInvalid", err)
	}
	m, err := web.NewMetrics(in, web.MetricsConfig{Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	for _, b := range [][]float64{{1, 1}, {2, 1}, {1, math.NaN()}, {1, math.Inf(1)}} {
		if _, err := middleware.Metrics(middleware.OTelConfig{MeterProvider: m.MeterProvider(), DurationBuckets: b}); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("DurationBuckets %v: %v, want ErrInvalid", b, err)
		}
		if _, err := middleware.Metrics(middleware.OTelConfig{MeterProvider: m.MeterProvider(), LagBuckets: b}); !errors.Is(err, srq.ErrInvalid) {
			t.Errorf("LagBuckets %v: %v, want ErrInvalid", b, err)
		}
	}
}

// TestMetricsContractScrapeRoundTrips: a scrape lists the registered queues in one round trip
// (none with MetricsConfig.Queues), and reads a queue of n shards with no overdue schedule in
// 2 + 4n round trips.
func TestMetricsContractScrapeRoundTrips(t *testing.T) {
	t.Parallel()
	// The counts are those of a server with Redis Functions; the embedded Redis has none, and
	// each script's first call on it takes a round trip more.
	redistest.SharedReal(t, "round trips of the Functions path")
	base := redistest.Client(t)
	prefix := contractPrefix(t, base)
	opts := *base.Options()
	counted := redis.NewClient(&opts)
	t.Cleanup(func() { _ = counted.Close() })
	trips := &roundTrips{}
	counted.AddHook(trips)
	const shards = 3
	q, err := srq.NewQueue[string](base, srq.QueueConfig{Name: "sharded", Prefix: prefix, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q.Publish(ctx, "v", nil); err != nil {
		t.Fatal(err)
	}
	in, err := inspect.New(counted, inspect.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		queues []string
		want   int64
	}{
		{"every registered queue", nil, 1 + 2 + 4*shards},
		{"named queues", []string{"sharded"}, 2 + 4*shards},
	} {
		m, err := web.NewMetrics(in, web.MetricsConfig{Queues: tc.queues})
		if err != nil {
			t.Fatal(err)
		}
		_ = scrapeText(t, m) // loads the scripts
		// Enough open connections that the scrape's calls at once (one a shard) open none: a new
		// connection's HELLO and CLIENT SETINFO are round trips of their own.
		conns := make([]*redis.Conn, 2*shards+2)
		for i := range conns {
			conns[i] = counted.Conn()
			if err := conns[i].Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, cn := range conns {
			_ = cn.Close()
		}
		before := trips.n.Load()
		body := scrapeText(t, m)
		if got := trips.n.Load() - before; got != tc.want {
			t.Errorf("%s: a scrape made %d round trips, want %d", tc.name, got, tc.want)
		}
		if !strings.Contains(body, `srq_queue_pending{messaging_destination_name="sharded"} 1`) {
			t.Errorf("%s: the scrape lacks the queue's pending gauge:\n%s", tc.name, body)
		}
		_ = m.Shutdown(ctx)
	}
}

// TestMetricsContractTimeoutErrorType: with the recommended chain on the endpoint's
// MeterProvider, a handler cut off by middleware.Timeout is counted with error_type="timeout",
// though middleware.Retry rejected its error.
func TestMetricsContractTimeoutErrorType(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	prefix := contractPrefix(t, c)
	m := newMetricsOf(t, c, prefix)
	otelCfg := middleware.OTelConfig{MeterProvider: m.MeterProvider()}
	q, err := srq.NewQueue[string](c, srq.QueueConfig{Name: "slow", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q.Publish(ctx, "v", &srq.PublishOpts{MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	metrics, err := middleware.Metrics(otelCfg)
	if err != nil {
		t.Fatal(err)
	}
	limit, err := middleware.RateLimit(q, middleware.RateLimitConfig{})
	if err != nil {
		t.Fatal(err)
	}
	hour := func() backoff.BackOff { return backoff.NewConstantBackOff(time.Hour) }
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(ctx context.Context, _ *srq.Task[string]) error {
		<-ctx.Done()
		return ctx.Err()
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler), Middleware: []srq.Middleware{
		middleware.Tracing(otelCfg), metrics, middleware.Logging(slog.New(slog.DiscardHandler)), limit,
		middleware.Retry(middleware.RetryConfig{Policy: hour}), middleware.Timeout(20 * time.Millisecond),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	body := scrapeText(t, m)
	found := false
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "messaging_process_duration_seconds_count{") && strings.Contains(line, `messaging_destination_name="slow"`) {
			if !strings.Contains(line, `error_type="timeout"`) || !strings.Contains(line, `srq_outcome="retry"`) || !strings.HasSuffix(line, "} 1") {
				t.Errorf("scraped %s, want error_type timeout, outcome retry, count 1", line)
			}
			found = true
		}
	}
	if !found {
		t.Errorf("no messaging_process_duration_seconds_count of queue slow in:\n%s", body)
	}
}

// newMetricsOf returns the metrics of the queues under prefix, with the default MetricsConfig,
// shut down when t ends.
func newMetricsOf(t *testing.T, c redis.UniversalClient, prefix string) *web.Metrics {
	t.Helper()
	in, err := inspect.New(c, inspect.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	m, err := web.NewMetrics(in, web.MetricsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}
