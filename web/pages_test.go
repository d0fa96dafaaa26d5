package web

import (
	"encoding/json"
	"html"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// stat reads the number a page shows in the element with id.
func stat(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no element %s on the page", id)
	}
	return m[1]
}

func TestOverviewListsQueuesWithCounts(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	qa, qb := b.queue("alpha"), b.queue("beta")
	b.kill(qa, "!x", 2, "boom")
	b.publish(qa, "!u1", 3, "")
	b.publish(qb, "", 1, "")

	body := b.mustGet("")
	for _, want := range []string{
		`<a href="./queue?q=alpha">alpha</a>`, `<a href="./queue?q=beta">beta</a>`,
		`data-queue="alpha" data-stat="pending">3<`, `data-queue="alpha" data-stat="dead">2<`,
		`data-queue="beta" data-stat="pending">1<`, `data-queue="beta" data-stat="dead">0<`,
		`id="chart" data-src="./api/stats"`, `<script src="./static/app.js">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %s", want)
		}
	}
}

func TestOverviewWithoutQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	if body := b.mustGet(""); !strings.Contains(body, `id="no-queues"`) {
		t.Errorf("empty overview does not say there are no queues:\n%s", body)
	}
}

func TestMountPointRedirect(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	// Mounted as in the tests (mux pattern "/ops/srq/"), the mux itself adds the slash.
	req, _ := http.NewRequestWithContext(b.ctx, http.MethodGet, strings.TrimSuffix(b.base, "/")+"?x=1", nil)
	if r := b.do(req); r.status/100 != 3 || r.header.Get("Location") != "/ops/srq/?x=1" {
		t.Errorf("GET mount point without slash: %d Location %q", r.status, r.header.Get("Location"))
	}
	// Mounted so that the handler sees the bare mount point, it redirects relatively.
	for uri, want := range map[string]string{"/ops/srq?x=1": "./srq/?x=1", "/srq": "./srq/", "/": ""} {
		req := httptest.NewRequest(http.MethodGet, uri, nil)
		req.URL.Path, req.URL.RawPath = "", ""
		rec := httptest.NewRecorder()
		b.h.ServeHTTP(rec, req)
		if want == "" {
			if rec.Code != http.StatusNotFound {
				t.Errorf("%s: %d, want 404", uri, rec.Code)
			}
			continue
		}
		if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != want {
			t.Errorf("%s: %d Location %q, want 301 %q", uri, rec.Code, rec.Header().Get("Location"), want)
		}
	}
}

func TestQueuePage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{RefreshInterval: 700 * time.Millisecond})
	q := b.queue("")
	b.kill(q, "!bad", 1, "boom")
	b.publish(q, "!a", 2, "")
	b.publish(q, "b", 3, "")
	if err := b.in.PausePartition(b.ctx, q.Name(), "b"); err != nil {
		t.Fatal(err)
	}
	body := b.mustGet("queue?q=" + url.QueryEscape(q.Name()))
	for id, want := range map[string]string{"stat-pending": "5", "stat-inflight": "0", "stat-dead": "1",
		"stat-paused": "1", "queue-state": "running"} {
		if got := stat(t, body, id); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	if !strings.Contains(body, `data-interval="700"`) || !strings.Contains(body, `data-src="./api/stats?q=`+url.QueryEscape(q.Name())+`"`) {
		t.Error("the chart is not configured for the queue and the interval")
	}
	if !strings.Contains(body, `action="./pause-queue"`) {
		t.Error("no pause button for a running queue")
	}
	m := tokenRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the queue page")
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+"pause-queue", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: b.session})
	if err := b.h.csrf.check(req, html.UnescapeString(m[1])); err != nil {
		t.Errorf("the page's token is refused: %v", err)
	}
}

func TestQueueParamRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, p := range []string{"queue", "partitions", "inflight", "dead", "task"} {
		if r := b.get(p); r.status != http.StatusBadRequest {
			t.Errorf("GET %s without q: %d, want 400", p, r.status)
		}
	}
	if r := b.get("nope"); r.status != http.StatusNotFound || !strings.Contains(r.body, "no such page") {
		t.Errorf("GET nope: %d, want 404 page", r.status)
	}
}

// rowsOf returns the values of attr on the table rows of a page, in order.
func rowsOf(body, attr string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr `+attr+`="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestPartitionsByDepthAndAge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	// The oldest head, by a minute: tasks published in one millisecond would tie.
	if _, err := q.Publish(b.ctx, event{}, &srq.PublishOpts{Partition: "old", Ordered: true, At: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b.publish(q, "!deep", 4, "")
	b.publish(q, "!mid", 2, "")

	byDepth := rowsOf(b.mustGet("partitions?q="+url.QueryEscape(q.Name())), "data-partition")
	if strings.Join(byDepth, ",") != "!deep,!mid,!old" {
		t.Errorf("by depth: %v", byDepth)
	}
	byAge := rowsOf(b.mustGet("partitions?by=age&q="+url.QueryEscape(q.Name())), "data-partition")
	if len(byAge) != 3 || byAge[0] != "!old" {
		t.Errorf("by age: %v, want !old first", byAge)
	}
	top := rowsOf(b.mustGet("partitions?limit=1&q="+url.QueryEscape(q.Name())), "data-partition")
	if strings.Join(top, ",") != "!deep" {
		t.Errorf("limit=1: %v", top)
	}
	for _, bad := range []string{"by=size", "limit=0", "limit=x"} {
		if r := b.get("partitions?" + bad + "&q=" + url.QueryEscape(q.Name())); r.status != http.StatusBadRequest {
			t.Errorf("partitions?%s: %d, want 400", bad, r.status)
		}
	}
}

func TestInFlightPaged(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.publish(q, "", 3, "")
	ds, err := q.Engine().Fetch(b.ctx, "consumer-7", 3, time.Minute)
	if err != nil || len(ds) != 3 {
		t.Fatalf("fetch: %d %v", len(ds), err)
	}
	name := url.QueryEscape(q.Name())
	all := b.mustGet("inflight?q=" + name)
	if got := rowsOf(all, "data-id"); len(got) != 3 {
		t.Fatalf("in flight: %v", got)
	}
	if !strings.Contains(all, "consumer-7") || strings.Contains(all, `id="next"`) {
		t.Error("the page lacks the consumer, or offers a next page with nothing more")
	}
	first := b.mustGet("inflight?limit=2&q=" + name)
	second := b.mustGet("inflight?limit=2&offset=2&q=" + name)
	ids := append(rowsOf(first, "data-id"), rowsOf(second, "data-id")...)
	if len(ids) != 3 || !strings.Contains(first, `id="next"`) || strings.Contains(second, `id="next"`) {
		t.Errorf("pages of 2: %v; next link on the first page %v, on the second %v", ids,
			strings.Contains(first, `id="next"`), strings.Contains(second, `id="next"`))
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, d := range ds {
		if !seen[d.ID] {
			t.Errorf("task %s missing from the pages", d.ID)
		}
	}
	if r := b.get("inflight?offset=-1&q=" + name); r.status != http.StatusBadRequest {
		t.Errorf("negative offset: %d, want 400", r.status)
	}
}

func TestDeadLettersFilterAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	timeouts := b.kill(q, "!a", 2, "upstream timeout")
	refused := b.kill(q, "!b", 3, "card refused")
	name := url.QueryEscape(q.Name())

	all := b.mustGet("dead?q=" + name)
	if got := rowsOf(all, "data-id"); len(got) != 5 {
		t.Fatalf("dead letters: %v", got)
	}
	if !strings.Contains(all, "(5 in all)") || !strings.Contains(all, "upstream timeout") {
		t.Error("page lacks the total or an error")
	}
	byErr := rowsOf(b.mustGet("dead?error=TIMEOUT&q="+name), "data-id")
	if !sameSet(byErr, timeouts) {
		t.Errorf("error filter: %v, want %v", byErr, timeouts)
	}
	byPart := rowsOf(b.mustGet("dead?partition=%21b&q="+name), "data-id")
	if !sameSet(byPart, refused) {
		t.Errorf("partition filter: %v, want %v", byPart, refused)
	}
	// Pages of 2, followed through their next links.
	var ids []string
	next := "dead?limit=2&q=" + name
	for range 5 {
		body := b.mustGet(next)
		ids = append(ids, rowsOf(body, "data-id")...)
		m := regexp.MustCompile(`id="next" href="\./([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			break
		}
		next = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if !sameSet(ids, append(append([]string{}, timeouts...), refused...)) {
		t.Errorf("paged: %v", ids)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		if m[s]--; m[s] < 0 {
			return false
		}
	}
	return true
}

func TestTaskLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	dead := b.kill(q, "!p", 1, "it broke")
	res, err := q.Publish(b.ctx, event{N: 42}, &srq.PublishOpts{Partition: "!p", Headers: map[string]string{"trace": "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	name := url.QueryEscape(q.Name())
	body := b.mustGet("task?q=" + name + "&id=" + res.ID)
	// The payload, msgpack (the default codec), is shown decoded, as JSON; a pending task has no
	// dead-letter actions.
	if stat(t, body, "task-state") != "pending" || !strings.Contains(body, "trace") ||
		!strings.Contains(body, `data-format="msgpack">{
  &#34;fail&#34;: &#34;&#34;,
  &#34;n&#34;: 42
}</pre>`) || strings.Contains(body, `id="task-actions"`) {
		t.Errorf("pending task page:\n%s", body)
	}
	if !strings.Contains(body, `href="./partition?q=`+name+`&amp;p=%21p"`) {
		t.Errorf("the task page does not link its partition:\n%s", body)
	}
	body = b.mustGet("task?q=" + name + "&id=" + dead[0])
	if stat(t, body, "task-state") != "dead" || !strings.Contains(body, "it broke") ||
		!strings.Contains(body, `id="task-requeue"`) || !strings.Contains(body, `id="task-purge"`) {
		t.Errorf("dead task page:\n%s", body)
	}
	r := b.get("task?q=" + name + "&id=0000000000000000000000000000000")
	if r.status != http.StatusNotFound || !strings.Contains(r.body, `id="no-task"`) {
		t.Errorf("unknown task: %d", r.status)
	}
	if body := b.mustGet("task?q=" + name); !strings.Contains(body, `name="id"`) {
		t.Error("task page without id has no lookup form")
	}
}

// TestAPIStats: the chart's JSON for one queue and for every queue; a queue whose registered shard
// count is unusable is left out of every queue's, not made to fail it.
func TestAPIStats(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.kill(q, "!d", 1, "x")
	b.publish(q, "!a", 2, "")
	if err := b.client.HSet(b.ctx, engine.RegistryKey(b.prefix), "broken", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"api/stats", "api/stats?q=" + url.QueryEscape(q.Name())} {
		r := b.get(path)
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s", path, r.status, r.header.Get("Content-Type"))
		}
		var got apiStats
		if err := json.Unmarshal([]byte(r.body), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Queues) != 1 {
			t.Fatalf("%s: %+v", path, got)
		}
		g := got.Queues[0]
		if g.Name != q.Name() || g.Pending != 2 || g.Dead != 1 || g.Published != 3 || g.DeadLettered != 1 || got.ServerTime == 0 {
			t.Errorf("%s: %+v", path, got)
		}
		// The names are snake_case, as the srq command's --json.
		var raw struct {
			Top    map[string]json.RawMessage
			Queues []map[string]json.RawMessage `json:"queues"`
		}
		_ = json.Unmarshal([]byte(r.body), &raw.Top)
		_ = json.Unmarshal(raw.Top["queues"], &raw.Queues)
		if got, want := slices.Sorted(maps.Keys(raw.Top)), []string{"queues", "server_time"}; !slices.Equal(got, want) {
			t.Errorf("%s: fields %v, want %v", path, got, want)
		}
		want := []string{"acked", "dead", "dead_lettered", "held_partitions", "in_flight", "live_consumers", "name", "paused", "paused_partitions",
			"pending", "published", "ready_partitions", "rejected", "running_flows", "scheduled_partitions", "server_time", "waiting"}
		if got := slices.Sorted(maps.Keys(raw.Queues[0])); !slices.Equal(got, want) {
			t.Errorf("%s: queue fields %v, want %v", path, got, want)
		}
	}
}

// TestLiveCountsNameAPIFields: every count the pages refresh live (data-stat) names a field of
// /api/stats's queues, which the script copies by name.
func TestLiveCountsNameAPIFields(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.publish(q, "!a", 1, "")
	body := b.mustGet("api/stats?q=" + url.QueryEscape(q.Name()))
	var got struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Queues) != 1 {
		t.Fatalf("api/stats: %v %s", err, body)
	}
	fields := got.Queues[0]
	stat := regexp.MustCompile(`data-stat="([^"]+)"`)
	seen := 0
	for _, page := range []string{"", "queue?q=" + url.QueryEscape(q.Name())} {
		for _, m := range stat.FindAllStringSubmatch(b.mustGet(page), -1) {
			seen++
			if _, ok := fields[m[1]]; !ok {
				t.Errorf("%q: data-stat=%q names no field of api/stats (%v)", page, m[1], slices.Sorted(maps.Keys(fields)))
			}
		}
	}
	if seen < 10 {
		t.Fatalf("only %d live counts on the pages", seen)
	}
}

func TestStaticAssets(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for path, ctype := range map[string]string{"static/app.js": "text/javascript", "static/app.css": "text/css",
		"static/events.js": "text/javascript"} {
		r := b.get(path)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) || len(r.body) < 100 {
			t.Errorf("%s: %d %q", path, r.status, r.header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"static/", "static/layout.html"} {
		if r := b.get(path); r.status != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, r.status)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	r := b.get("")
	for k, want := range map[string]string{"Content-Security-Policy": contentSecurityPolicy, "X-Frame-Options": "DENY",
		"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if got := r.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct{ got, want string }{
		{ago(now, now.Add(-1500*time.Millisecond)), "1s ago"},
		{ago(now, now.Add(2*time.Minute)), "in 2m00s"},
		{until(now, now.Add(90*time.Minute)), "in 1h30m"},
		{until(now, now.Add(-72*time.Hour)), "3d0h ago"},
		{ago(now, time.Time{}), "–"},
		{human(250 * time.Millisecond), "250ms"},
		{utc(now), "2026-01-02 03:04:05.000 UTC"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	js := newPayloadView([]byte(`{"user":"ключ"}`))
	if js.Hex || js.Format != "JSON" || js.Text != "{\n  \"user\": \"ключ\"\n}" || js.Truncated {
		t.Errorf("JSON payload: %+v", js)
	}
	mp := newPayloadView([]byte{0x81, 0xa1, 'n', 0x01}) // msgpack {"n": 1}
	if mp.Hex || mp.Format != "msgpack" || mp.Text != "{\n  \"n\": 1\n}" {
		t.Errorf("msgpack payload: %+v", mp)
	}
	text := newPayloadView([]byte("plain words"))
	if text.Hex || text.Format != "text" || text.Text != "plain words" {
		t.Errorf("text payload: %+v", text)
	}
	bin := newPayloadView([]byte{0x82, 0xa1, 'n', 0x01}) // a msgpack map cut short
	if !bin.Hex || bin.Format != "hex" || !strings.Contains(bin.Text, "82 a1 6e 01") {
		t.Errorf("binary payload: %+v", bin)
	}
	long := newPayloadView([]byte(strings.Repeat("é", payloadTextMax)))
	if !long.Truncated || long.Shown > payloadTextMax || !utf8Valid(long.Text) {
		t.Errorf("long payload: shown %d of %d", long.Shown, long.Size)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
