package web_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/web"
)

// promisePrefix returns a key prefix of the test's own, dropped when it ends.
func promisePrefix(t *testing.T, c *redis.Client) string {
	t.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	prefix := "srqpm-" + hex.EncodeToString(r[:])
	t.Cleanup(func() { _ = redistest.DropKeys(context.Background(), c, prefix+":") })
	return prefix
}

// promiseOtelErrors is an OpenTelemetry error handler that keeps the errors while armed, and
// afterwards logs them as OpenTelemetry's default handler does: the global handler's first
// delegate stays set for the life of the process.
type promiseOtelErrors struct {
	mu    sync.Mutex
	armed bool
	errs  []error
}

func (h *promiseOtelErrors) Handle(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed {
		log.Print(err)
		return
	}
	h.errs = append(h.errs, err)
}

// TestPromiseMetricsUnreadableQueueLeftOut: docs/metrics.md "A queue whose stats cannot be read
// is left out of that scrape, and the error goes to OpenTelemetry's error handler". One of two
// registered queues cannot be read (a key of the wrong type): the scrape succeeds, reports the
// other queue and not that one, and the error naming it reaches otel's error handler. Not
// parallel: the error handler is global.
func TestPromiseMetricsUnreadableQueueLeftOut(t *testing.T) {
	c := redistest.Client(t)
	prefix := promisePrefix(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{"good", "broken"} {
		q, err := srq.NewQueue[string](c, srq.QueueConfig{Name: name, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Publish(ctx, "v", nil); err != nil {
			t.Fatal(err)
		}
		if name == "broken" {
			if err := c.Set(ctx, q.Engine().Keys().Dead(), "not a sorted set", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// And a queue whose registered shard count is unusable: no stats to read either.
	if err := c.HSet(ctx, engine.RegistryKey(prefix), "badcount", "abc").Err(); err != nil {
		t.Fatal(err)
	}
	m := newMetricsOf(t, c, prefix)

	h := &promiseOtelErrors{armed: true}
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(h)
	t.Cleanup(func() {
		h.mu.Lock()
		h.armed = false
		h.mu.Unlock()
		otel.SetErrorHandler(prev)
	})
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, body)
	}
	if !strings.Contains(body, `srq_queue_pending{messaging_destination_name="good"} 1`) {
		t.Errorf("the readable queue is not reported:\n%s", body)
	}
	for _, q := range []string{"broken", "badcount"} {
		if strings.Contains(body, `messaging_destination_name="`+q+`"`) {
			t.Errorf("the unreadable queue %s is reported:\n%s", q, body)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, q := range []string{"broken", "badcount"} {
		found := false
		for _, err := range h.errs {
			found = found || strings.Contains(err.Error(), `metrics of queue "`+q+`"`)
		}
		if !found {
			t.Errorf("OpenTelemetry's error handler got %v, want the error of queue %s", h.errs, q)
		}
	}
}

// promiseDeadlines records, for each command a client sends, how long its context had left.
type promiseDeadlines struct {
	mu   sync.Mutex
	left []time.Duration // -1: no deadline
}

func (d *promiseDeadlines) note(ctx context.Context) {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.mu.Lock()
	d.left = append(d.left, left)
	d.mu.Unlock()
}

func (d *promiseDeadlines) DialHook(next redis.DialHook) redis.DialHook { return next }
func (d *promiseDeadlines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { d.note(ctx); return next(ctx, cmd) }
}
func (d *promiseDeadlines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { d.note(ctx); return next(ctx, cmds) }
}

// TestPromiseMetricsScrapeTimeoutDefault: docs/metrics.md "MetricsConfig.ScrapeTimeout (5s by
// default) bounds the whole scrape", docs/operations.md "ScrapeTimeout | 5s". With ScrapeTimeout
// unset, every Redis call of a scrape carries a deadline at most 5 s away, and not much less (the
// scrape's first call is sent at once); with it set to 2 s, at most 2 s away.
func TestPromiseMetricsScrapeTimeoutDefault(t *testing.T) {
	t.Parallel()
	base := redistest.Client(t)
	prefix := promisePrefix(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := srq.NewQueue[string](base, srq.QueueConfig{Name: "timed", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Publish(ctx, "v", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		set, want time.Duration
	}{{0, 5 * time.Second}, {2 * time.Second, 2 * time.Second}} {
		opts := *base.Options()
		counted := redis.NewClient(&opts)
		t.Cleanup(func() { _ = counted.Close() })
		dl := &promiseDeadlines{}
		counted.AddHook(dl)
		in, err := inspect.New(counted, inspect.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		m, err := web.NewMetrics(in, web.MetricsConfig{ScrapeTimeout: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		_ = m.Shutdown(ctx)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `srq_queue_pending{messaging_destination_name="timed"} 1`) {
			t.Fatalf("ScrapeTimeout %v: scrape %d:\n%s", tc.set, rec.Code, rec.Body)
		}
		dl.mu.Lock()
		left := dl.left
		dl.mu.Unlock()
		if len(left) == 0 {
			t.Fatalf("ScrapeTimeout %v: the scrape sent nothing", tc.set)
		}
		// Generous below: the deadline is set when the scrape starts, its first call follows.
		if first := left[0]; first > tc.want || first < tc.want/2 {
			t.Errorf("ScrapeTimeout %v: the scrape's first call had %v left, want just under %v", tc.set, first, tc.want)
		}
		for i, l := range left {
			if l < 0 || l > tc.want {
				t.Errorf("ScrapeTimeout %v: call %d of the scrape had %v left, want a deadline within %v", tc.set, i, l, tc.want)
			}
		}
	}
}
