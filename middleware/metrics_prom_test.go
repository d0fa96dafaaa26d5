package middleware_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/middleware"
	"github.com/srqueue/srq/web"
)

// handlerTimes are the times the handlers of TestMetricsPrometheusScrape take, in turn.
var handlerTimes = []time.Duration{0, 2 * time.Millisecond, 8 * time.Millisecond, 30 * time.Millisecond, 120 * time.Millisecond}

// TestMetricsPrometheusScrape runs a worker with Metrics and MetricsPublish on the provider of a
// Prometheus endpoint (web.NewMetrics, through go.opentelemetry.io/otel/exporters/prometheus),
// with handlers that take from nothing to 120ms, one task that fails once and one that fails for
// good, and scrapes the endpoint: the histograms have DefaultBuckets, the processing times and
// the lags spread over several of them, the p99 read from the buckets is where the slowest
// handlers are, and every metric, label and label value the queries of docs/metrics.md use is in
// the scrape.
func TestMetricsPrometheusScrape(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := redistest.Client(t)
	var r [6]byte
	_, _ = rand.Read(r[:])
	prefix := "srqprom-" + hex.EncodeToString(r[:])
	t.Cleanup(func() { _ = redistest.DropKeys(context.Background(), client, prefix+":") })
	in, err := inspect.New(client, inspect.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := web.NewMetrics(in, web.MetricsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = endpoint.Shutdown(context.Background()) })
	cfg := middleware.OTelConfig{MeterProvider: endpoint.MeterProvider()}
	pub, err := middleware.MetricsPublish(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := middleware.Metrics(cfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := srq.NewQueue[int](client, srq.QueueConfig{Name: "latency", Prefix: prefix, PublishMiddleware: []srq.PublishMiddleware{pub}})
	if err != nil {
		t.Fatal(err)
	}
	const tasks = 40
	msgs := make([]srq.Message[int], tasks)
	for i := range msgs {
		msgs[i].Value = i
	}
	if _, err := q.PublishBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[int](func(ctx context.Context, task *srq.Task[int]) error {
		select { // the handler's work
		case <-time.After(handlerTimes[task.Value%len(handlerTimes)]):
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case task.Value == 3 && task.Attempt == 1:
			return errors.New("flaky")
		case task.Value == 6:
			return srq.Permanent(errors.New("malformed"))
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 1, Logger: quiet, Middleware: []srq.Middleware{mw},
		Retry: func(int, error) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	waitUntil(t, func() bool {
		st, err := q.Engine().Stats(ctx)
		return err == nil && st.Acked == tasks-1 && st.Dead == 1
	})
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	rec := httptest.NewRecorder()
	endpoint.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}

	for name, minBuckets := range map[string]int{"messaging_process_duration_seconds": 4, "srq_queue_lag_seconds": 3} {
		bounds, counts, total := histogram(t, families[name])
		if want := append(middleware.DefaultBuckets(), math.Inf(1)); !slices.Equal(bounds, want) {
			t.Errorf("%s: buckets %v, want %v", name, bounds, want)
		}
		used := 0
		for _, c := range counts {
			if c > 0 {
				used++
			}
		}
		if used < minBuckets || total < tasks+1 {
			t.Errorf("%s: %v observations in %d buckets (%v), want %d+ in %d+", name, total, used, counts, tasks+1, minBuckets)
		}
		if name == "messaging_process_duration_seconds" {
			// One in five handlers takes 120ms: the p99 lies in (0.1, 0.25].
			if p99 := quantile(0.99, bounds, counts); p99 <= 0.1 || p99 > 0.25 {
				t.Errorf("%s: p99 %v, want in (0.1, 0.25]; buckets %v", name, p99, counts)
			}
		}
	}

	for _, query := range docQueries(t) {
		checkQuery(t, query, families)
	}
}

// histogram merges the series of a histogram family: its upper bounds (+Inf last), the
// observations in each bucket (not cumulative), and their total.
func histogram(t *testing.T, mf *dto.MetricFamily) (bounds []float64, counts []float64, total float64) {
	t.Helper()
	if mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s: type %v, want a histogram", mf.GetName(), mf.GetType())
	}
	var cumulative []float64
	for _, m := range mf.GetMetric() {
		h := m.GetHistogram()
		bs := h.GetBucket()
		if n := len(bs); n > 0 && math.IsInf(bs[n-1].GetUpperBound(), 1) {
			bs = bs[:n-1] // the sample count stands for +Inf below
		}
		if bounds == nil {
			for _, b := range bs {
				bounds = append(bounds, b.GetUpperBound())
			}
			bounds = append(bounds, math.Inf(1))
			cumulative = make([]float64, len(bounds))
		}
		if len(bs)+1 != len(bounds) {
			t.Fatalf("%s: series with different buckets", mf.GetName())
		}
		for i, b := range bs {
			cumulative[i] += float64(b.GetCumulativeCount())
		}
		cumulative[len(bounds)-1] += float64(h.GetSampleCount())
	}
	counts = make([]float64, len(cumulative))
	for i, c := range cumulative {
		counts[i] = c
		if i > 0 {
			counts[i] -= cumulative[i-1]
		}
	}
	return bounds, counts, cumulative[len(cumulative)-1]
}

// quantile is PromQL's histogram_quantile over non-cumulative bucket counts: linear
// interpolation inside the bucket where the quantile falls.
func quantile(q float64, bounds, counts []float64) float64 {
	var total float64
	for _, c := range counts {
		total += c
	}
	rank, seen := q*total, 0.0
	for i, c := range counts {
		if seen+c >= rank {
			lower := 0.0
			if i > 0 {
				lower = bounds[i-1]
			}
			if math.IsInf(bounds[i], 1) {
				return lower
			}
			return lower + (bounds[i]-lower)*(rank-seen)/c
		}
		seen += c
	}
	return math.NaN()
}

// docQueries returns the PromQL queries of docs/metrics.md: each ```promql block split at its
// comment lines.
func docQueries(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, block := range regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		var cur []string
		for _, line := range strings.Split(block[1], "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
				if len(cur) > 0 {
					queries = append(queries, strings.Join(cur, "\n"))
				}
				cur = nil
				continue
			}
			cur = append(cur, line)
		}
		if len(cur) > 0 {
			queries = append(queries, strings.Join(cur, "\n"))
		}
	}
	if len(queries) < 5 {
		t.Fatalf("docs/metrics.md has %d PromQL queries", len(queries))
	}
	return queries
}

// promQLWords are the PromQL functions, operators and keywords the documented queries may use.
var promQLWords = map[string]bool{"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true,
	"increase": true, "histogram_quantile": true, "by": true, "without": true, "on": true, "ignoring": true,
	"and": true, "or": true, "unless": true, "bool": true, "le": true, "clamp_min": true, "topk": true,
	"group_left": true, "group_right": true}

var (
	groupingRe = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	matcherRe  = regexp.MustCompile(`([a-z_][a-z0-9_]*)\s*(=~|!=|!~|=)\s*"([^"]*)"`)
	rangeRe    = regexp.MustCompile(`\[[^\]]*\]`)
	wordRe     = regexp.MustCompile(`[a-z_][a-z0-9_]*`)
)

// noteLabel records that a query uses label without matching a value.
func noteLabel(labels map[string][]string, label string) {
	if _, ok := labels[label]; !ok {
		labels[label] = nil
	}
}

// checkQuery fails unless every metric query names is in families (a histogram's _bucket, _count
// and _sum are its family's), and every label it groups or matches by is on one of them, with the
// value it matches (for =) among the scraped values.
func checkQuery(t *testing.T, query string, families map[string]*dto.MetricFamily) {
	t.Helper()
	labels := map[string][]string{} // label → values matched with =
	for _, g := range groupingRe.FindAllStringSubmatch(query, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				noteLabel(labels, l)
			}
		}
	}
	for _, m := range matcherRe.FindAllStringSubmatch(query, -1) {
		if m[2] == "=" {
			labels[m[1]] = append(labels[m[1]], m[3])
		} else {
			noteLabel(labels, m[1])
		}
	}
	rest := rangeRe.ReplaceAllString(matcherRe.ReplaceAllString(groupingRe.ReplaceAllString(query, ""), ""), "")
	var used []*dto.MetricFamily
	for _, w := range wordRe.FindAllString(rest, -1) {
		if promQLWords[w] {
			continue
		}
		mf := families[w]
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(w, suffix); ok && mf == nil && families[base].GetType() == dto.MetricType_HISTOGRAM {
				mf = families[base]
			}
		}
		if mf == nil {
			t.Errorf("query %q: %s is not in the scrape", query, w)
			continue
		}
		used = append(used, mf)
	}
	for l, values := range labels {
		if l == "le" {
			continue
		}
		seen := map[string]bool{}
		for _, mf := range used {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == l {
						seen[lp.GetValue()] = true
					}
				}
			}
		}
		if len(seen) == 0 {
			t.Errorf("query %q: no metric it uses has the label %s", query, l)
		}
		for _, v := range values {
			if !seen[v] {
				t.Errorf("query %q: %s=%q is in no scraped series (values %v)", query, l, v, seen)
			}
		}
	}
}
