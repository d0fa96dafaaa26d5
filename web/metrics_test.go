package web

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/middleware"
)

// family is one metric as a scrape shows it and as docs/metrics.md lists it.
type family struct {
	Type   string   // counter, gauge or histogram
	Labels []string // sorted, without le
}

// scrape GETs the endpoint and returns its families and their samples.
func scrape(t *testing.T, h http.Handler) (map[string]family, map[string]*dto.MetricFamily) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	var p expfmt.TextParser
	mfs, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	out := map[string]family{}
	for name, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		f := family{Type: strings.ToLower(mf.GetType().String())}
		for l := range labels {
			f.Labels = append(f.Labels, l)
		}
		sort.Strings(f.Labels)
		out[name] = f
	}
	return out, mfs
}

// documented reads the metric table of docs/metrics.md: rows that start with a backticked name.
func documented(t *testing.T) map[string]family {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	name := regexp.MustCompile("^`([a-z_]+)`$")
	tick := regexp.MustCompile("`([a-z_]+)`")
	out := map[string]family{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// | `name` | type | unit | `label`, `label` | meaning |
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 6 || strings.TrimSpace(cells[0]) != "" {
			continue
		}
		m := name.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if m == nil {
			continue
		}
		fam := family{Type: strings.TrimSpace(cells[2])}
		for _, l := range tick.FindAllStringSubmatch(cells[4], -1) {
			fam.Labels = append(fam.Labels, l[1])
		}
		sort.Strings(fam.Labels)
		if _, dup := out[m[1]]; dup {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		out[m[1]] = fam
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetricsMatchDocs runs a worker with the metrics middleware on the endpoint's provider
// through every outcome (done, retry, dead), scrapes the endpoint, and checks that the scrape and
// the table of docs/metrics.md list the same metrics with the same types and labels.
func TestMetricsMatchDocs(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	m := b.metrics()
	otelCfg := middleware.OTelConfig{MeterProvider: m.MeterProvider()}
	pub, err := middleware.MetricsPublish(otelCfg)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := middleware.Metrics(otelCfg)
	if err != nil {
		t.Fatal(err)
	}
	q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: "metrics", Prefix: b.prefix,
		PublishMiddleware: []srq.PublishMiddleware{pub}})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(q, "!a", 1, "")          // done
	b.publish(q, "!b", 1, "retry")     // fails once, then done
	b.publish(q, "!c", 1, "permanent") // dead
	if err := b.in.PausePartition(b.ctx, q.Name(), "!idle"); err != nil {
		t.Fatal(err)
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, task *srq.Task[event]) error {
		switch {
		case task.Value.Fail == "permanent":
			return srq.Permanent(errors.New("bad"))
		case task.Value.Fail == "retry" && task.Attempt == 1:
			return errors.New("again")
		}
		return nil
	}), srq.WorkerConfig{Middleware: []srq.Middleware{mw}, Logger: slog.New(slog.DiscardHandler),
		Retry: func(int, error) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for st := b.stats(q.Name()); st.Acked < 2 || st.Dead < 1; st = b.stats(q.Name()) {
		if time.Now().After(deadline) {
			t.Fatalf("tasks not settled: %+v", st)
		}
		if _, err := w.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}

	got, samples := scrape(t, m)
	want := documented(t)
	if len(want) == 0 {
		t.Fatal("docs/metrics.md lists no metric")
	}
	for name, f := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("docs/metrics.md lists %s, which the scrape lacks", name)
		case g.Type != f.Type || !slices.Equal(g.Labels, f.Labels):
			t.Errorf("%s: scraped %s %v, documented %s %v", name, g.Type, g.Labels, f.Type, f.Labels)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("the scrape has %s (%s %v), which docs/metrics.md lacks", name, g.Type, g.Labels)
		}
	}
	// A few values, to know the gauges read the right queue.
	for name, wantV := range map[string]float64{"srq_queue_dead": 1, "srq_queue_pending": 0, "srq_queue_partitions_paused": 1,
		"messaging_client_sent_messages_total": 3, "messaging_client_consumed_messages_total": 4} {
		if v := value(samples[name], "metrics"); v != wantV {
			t.Errorf("%s = %v, want %v", name, v, wantV)
		}
	}
}

// metrics returns the endpoint over b's Inspector, shut down when the test ends.
func (b *bundle) metrics() *Metrics {
	b.t.Helper()
	m, err := NewMetrics(b.in, MetricsConfig{})
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// value returns the sum of the samples of mf whose messaging_destination_name is queue (counters'
// or gauges' values), or -1 for none.
func value(mf *dto.MetricFamily, queue string) float64 {
	sum, found := 0.0, false
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "messaging_destination_name" && l.GetValue() == queue {
				found = true
				if m.Counter != nil {
					sum += m.GetCounter().GetValue()
				} else {
					sum += m.GetGauge().GetValue()
				}
			}
		}
	}
	if !found {
		return -1
	}
	return sum
}

func TestMetricsChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if _, err := NewMetrics(nil, MetricsConfig{}); err == nil {
		t.Error("NewMetrics(nil) succeeded")
	}
	if _, err := NewMetrics(b.in, MetricsConfig{ScrapeTimeout: -1}); err == nil {
		t.Error("a negative ScrapeTimeout was accepted")
	}
	// Named queues: only those are reported; an unknown one does not hide the others.
	q := b.queue("named")
	b.publish(q, "", 2, "")
	m, err := NewMetrics(b.in, MetricsConfig{Queues: []string{"named", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	_, samples := scrape(t, m)
	if v := value(samples["srq_queue_pending"], "named"); v != 2 {
		t.Errorf("pending of named = %v, want 2", v)
	}
}

// TestMetricsSkipUnusableQueues: a registered queue whose stored shard count is unusable is left
// out of the scrape, as /api/stats leaves it out, with its error reported (the collection's
// error, which the endpoint's exporter hands to OpenTelemetry's error handler); the other queues
// are reported.
func TestMetricsSkipUnusableQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("good")
	b.publish(q, "", 2, "")
	if err := b.client.HSet(b.ctx, engine.RegistryKey(b.prefix), "broken", "0").Err(); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	if _, err := registerQueueGauges(provider.Meter("test"), b.in, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(b.ctx, &rm); err == nil || !strings.Contains(err.Error(), `metrics of queue "broken"`) {
		t.Fatalf("collect with an unusable queue registered: %v; want the error of queue broken", err)
	}
	var queues []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricQueuePending {
				continue
			}
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				name, _ := dp.Attributes.Value(attrQueue)
				queues = append(queues, name.AsString())
			}
		}
	}
	if len(queues) != 1 || queues[0] != q.Name() {
		t.Fatalf("pending reported for %v, want only %s", queues, q.Name())
	}
}

// TestMetricsNoSniff: the scrape, whose label values are queue names that publishers choose
// (markup included), is served as plain text that a browser must not sniff into HTML.
func TestMetricsNoSniff(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.publish(b.queue("<script>alert(1)</script>"), "", 1, "")
	m, err := NewMetrics(b.in, MetricsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "<script>") {
		t.Fatalf("scrape: %d\n%s", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", got)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
}

// TestMetricsEscapeControlCharacters: a queue name with escape sequences (registered by an earlier
// version, which allowed them) is a label value with each control character as a \u escape; the
// scrape holds no control character but its line feeds.
func TestMetricsEscapeControlCharacters(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const legacy = "old\x1b[31m\x07\x7f\u009b2J"
	if err := b.client.HSet(b.ctx, engine.RegistryKey(b.prefix), legacy, "1").Err(); err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(b.in, MetricsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if i := strings.IndexFunc(body, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }); i >= 0 {
		t.Fatalf("the scrape holds the control character %q:\n%s", body[i:i+1], body)
	}
	if want := `messaging_destination_name="old\\u001b[31m`; !strings.Contains(body, want) {
		t.Fatalf("the scrape text does not hold %s (operations.md):\n%s", want, body)
	}
	_, mfs := scrape(t, m)
	var got []string
	for _, mt := range mfs["srq_queue_pending"].GetMetric() {
		for _, l := range mt.GetLabel() {
			got = append(got, l.GetValue())
		}
	}
	if want := `old\u001b[31m\u0007\u007f\u009b2J`; !slices.Equal(got, []string{want}) {
		t.Fatalf("srq_queue_pending labels %q, want [%q]", got, want)
	}
}

// TestMetricsFlowsAndHeld: the flow counters and gauges, the held partitions and the cancelled
// and handed-back counts read the queues they name.
func TestMetricsFlowsAndHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	m := b.metrics()
	ledger, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: "ledger", Prefix: b.prefix, OnDeadLetter: srq.HoldPartition})
	if err != nil {
		t.Fatal(err)
	}
	b.kill(ledger, "!acct", 1, "no")
	orders, mail := b.queue("orders"), b.queue("mail")
	b.orderFlow(orders, mail, "done", "smtp down")
	b.runAll(orders, mail)
	b.orderFlow(orders, mail, "waits", "")
	ids := b.publish(orders, "", 1, "")
	if _, err := b.in.Cancel(b.ctx, "orders", ids[0], ""); err != nil {
		t.Fatal(err)
	}
	hb := b.queue("hb")
	b.publish(hb, "", 2, "")
	ds, err := hb.Engine().Fetch(b.ctx, "w", 2, time.Minute)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if res, err := hb.Engine().Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), HandBack: true},
		{Receipt: ds[1].Receipt(), HandBack: true}}); err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("hand back: %v %+v", err, res)
	}
	_, samples := scrape(t, m)
	labelled := func(name, queue, key, v string) float64 {
		for _, mt := range samples[name].GetMetric() {
			var q, e string
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "messaging_destination_name":
					q = l.GetValue()
				case key:
					e = l.GetValue()
				}
			}
			if q == queue && e == v {
				return mt.GetCounter().GetValue()
			}
		}
		return -1
	}
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"held partitions of ledger", value(samples["srq_queue_partitions_held"], "ledger"), 1},
		{"held partitions of orders", value(samples["srq_queue_partitions_held"], "orders"), 0},
		{"running flows of orders", value(samples["srq_queue_flows_running"], "orders"), 1},
		// waits's invoice, ship and complete, and done's complete, cancelled while email's dead
		// letter may be requeued.
		{"waiting steps of orders", value(samples["srq_queue_waiting"], "orders"), 4},
		{"flows started", labelled("srq_queue_flows_total", "orders", "srq_flow_event", "started"), 2},
		{"flows failed", labelled("srq_queue_flows_total", "orders", "srq_flow_event", "failed"), 1},
		{"flows completed", labelled("srq_queue_flows_total", "orders", "srq_flow_event", "completed"), 0},
		{"cancelled", labelled("srq_queue_events_total", "orders", "srq_event", "cancelled"), 1},
		{"handed back", labelled("srq_queue_events_total", "hb", "srq_event", "handed_back"), 2},
		{"rejected", labelled("srq_queue_events_total", "hb", "srq_event", "rejected"), 0},
		{"handed back by orders", labelled("srq_queue_events_total", "orders", "srq_event", "handed_back"), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	// The queue page lists the counter too.
	if page := b.mustGet("queue?q=hb"); !strings.Contains(page, `<tr><th>Handed back by stopping workers</th><td class="num">2</td></tr>`) {
		t.Errorf("the queue page does not count the hand-backs:\n%s", page)
	}
}
