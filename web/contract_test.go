package web

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/logtest"
)

// These tests hold the dashboard to what docs/operations.md promises about its session cookie,
// its CSRF secret across replicas, its logs and the Prometheus registry it is given. They call
// the handler directly (not through setup's server), so that the request's TLS state and remote
// address are the test's to choose and to assert on.

// serve sends req to h and returns the recorded answer.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// browserCookie returns the srq_browser cookie that rec sets, or nil.
func browserCookie(rec *httptest.ResponseRecorder) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	return nil
}

// pageOf GETs path from h as a browser's first visit (no cookie) and returns the srq_browser
// cookie the page sets and the form token it carries.
func pageOf(t *testing.T, h http.Handler, path string) (*http.Cookie, string) {
	t.Helper()
	rec := serve(h, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
	}
	ck := browserCookie(rec)
	if ck == nil {
		t.Fatalf("GET %s set no %s cookie", path, sessionCookie)
	}
	m := tokenRE.FindStringSubmatch(rec.Body.String())
	if m == nil {
		t.Fatalf("GET %s: no form token in the page", path)
	}
	return ck, m[1]
}

// postForm builds a same-origin form POST to path, carrying cookie when it is not nil.
func postForm(path string, form url.Values, cookie *http.Cookie) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if cookie != nil {
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	}
	return req
}

// TestSessionCookieSecureOnTLS: operations.md says the srq_browser cookie is Secure on a TLS
// connection, HttpOnly, SameSite=Lax, for the path the dashboard is mounted at (no Path attribute:
// the browser scopes it to the page's directory) and gone when the browser closes (no Expires or
// Max-Age). Over plain HTTP it must not be Secure, or the browser would drop it and no form would
// work.
func TestSessionCookieSecureOnTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, overTLS := range []bool{true, false} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if overTLS {
			req.TLS = &tls.ConnectionState{}
		}
		rec := serve(b.h, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("TLS %v: GET /: %d\n%s", overTLS, rec.Code, rec.Body)
		}
		ck := browserCookie(rec)
		if ck == nil {
			t.Fatalf("TLS %v: no %s cookie in %q", overTLS, sessionCookie, rec.Header().Values("Set-Cookie"))
		}
		if ck.Secure != overTLS {
			t.Errorf("TLS %v: cookie Secure = %v, want %v (Set-Cookie %q)", overTLS, ck.Secure, overTLS, rec.Header().Get("Set-Cookie"))
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "" || ck.MaxAge != 0 || !ck.Expires.IsZero() {
			t.Errorf("TLS %v: cookie %q, want HttpOnly, SameSite=Lax, no Path and a session cookie", overTLS, rec.Header().Get("Set-Cookie"))
		}
	}
}

// TestCSRFSecretAcrossReplicas: operations.md says a form only works against the process that
// served it unless every replica behind a load balancer has the same Config.CSRFSecret of at
// least 32 bytes. A page from one replica must then be postable to another with the same
// browser cookie; with the default (random) secrets it must not; and a shorter secret is refused
// by NewHandler with ErrInvalid, as Config.CSRFSecret's doc says.
func TestCSRFSecretAcrossReplicas(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte("k"), 32)
	b := setup(t, Config{CSRFSecret: secret})
	q := b.queue("")
	b.publish(q, "", 1, "")
	page := "/queue?q=" + url.QueryEscape(q.Name())
	replica := func(cfg Config) http.Handler {
		t.Helper()
		cfg.Logger = slog.New(slog.DiscardHandler)
		h, err := NewHandler(b.in, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	// Shared secret: the page of one replica, posted to the other.
	cookie, token := pageOf(t, b.h, page)
	other := replica(Config{CSRFSecret: bytes.Clone(secret)})
	rec := serve(other, postForm("/pause-queue", url.Values{"q": {q.Name()}, "token": {token}}, cookie))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("a token from a replica with the same secret: %d, want 303\n%s", rec.Code, rec.Body)
	}
	if !b.stats(q.Name()).Paused {
		t.Fatal("the accepted pause did not pause the queue")
	}

	// Default secrets: each process draws its own, so the other replica refuses the token.
	first, second := replica(Config{}), replica(Config{})
	cookie, token = pageOf(t, first, page)
	resume := func() *http.Request {
		return postForm("/resume-queue", url.Values{"q": {q.Name()}, "token": {token}}, cookie)
	}
	if rec := serve(second, resume()); rec.Code != http.StatusForbidden {
		t.Errorf("a token from a replica with its own default secret: %d, want 403", rec.Code)
	}
	if !b.stats(q.Name()).Paused {
		t.Fatal("a refused resume resumed the queue")
	}
	// The same request to the replica that served the page works: the 403 above is the secret's.
	if rec := serve(first, resume()); rec.Code != http.StatusSeeOther {
		t.Errorf("the token back to the replica that issued it: %d, want 303", rec.Code)
	}
	if b.stats(q.Name()).Paused {
		t.Error("the accepted resume did not resume the queue")
	}

	// A secret of fewer than 32 bytes (an empty one included: only nil means the default) is
	// refused; 32 bytes is enough.
	for _, n := range []int{0, 16, 31} {
		if _, err := NewHandler(b.in, Config{CSRFSecret: make([]byte, n)}); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("a CSRFSecret of %d bytes: %v, want ErrInvalid", n, err)
		}
	}
	if _, err := NewHandler(b.in, Config{CSRFSecret: make([]byte, 32)}); err != nil {
		t.Errorf("a CSRFSecret of 32 bytes: %v", err)
	}
}

// TestRefusalAndMutationLogs: operations.md says Auth's refusals are logged at Info with the
// method, path, remote address and the hook's error, and every mutation that succeeds at Info as
// "srq web: mutation" with the action, queue, remote address and what it touched. Config.Logger
// receives them.
func TestRefusalAndMutationLogs(t *testing.T) {
	t.Parallel()
	logs := &logtest.Recorder{}
	errViewer := fmt.Errorf("viewers may not change anything: %w", ErrForbidden)
	b := setup(t, Config{Logger: slog.New(logs), Auth: func(r *http.Request) error {
		if r.Method == http.MethodPost && r.Header.Get("X-Role") != "operator" {
			return errViewer
		}
		return nil
	}})
	q := b.queue("")
	dead := b.kill(q, "", 1, "boom")
	const remote = "203.0.113.7:4242"
	cookie, token := pageOf(t, b.h, "/dead?q="+url.QueryEscape(q.Name()))
	form := url.Values{"q": {q.Name()}, "scope": {"selected"}, "id": {dead[0]}, "token": {token}}

	// Refused by Auth.
	req := postForm("/requeue", form, cookie)
	req.RemoteAddr = remote
	if rec := serve(b.h, req); rec.Code != http.StatusForbidden {
		t.Fatalf("viewer's requeue: %d, want 403", rec.Code)
	}
	refused := logs.Find("srq web: request refused by Auth")
	if len(refused) != 1 {
		t.Fatalf("%d refusal records, want 1", len(refused))
	}
	want := map[string]any{"method": http.MethodPost, "path": "/requeue", "remote": remote, "error": errViewer.Error()}
	checkRecord(t, refused[0], want)

	// Accepted.
	req = postForm("/requeue", form, cookie)
	req.Header.Set("X-Role", "operator")
	req.RemoteAddr = remote
	if rec := serve(b.h, req); rec.Code != http.StatusSeeOther {
		t.Fatalf("operator's requeue: %d, want 303\n%s", rec.Code, rec.Body)
	}
	done := logs.Find("srq web: mutation")
	if len(done) != 1 || done[0].Message != "srq web: mutation" {
		t.Fatalf("mutation records %v, want one \"srq web: mutation\"", done)
	}
	checkRecord(t, done[0], map[string]any{"action": "requeue", "queue": q.Name(), "remote": remote, "count": int64(1)})
	if ids, _ := logtest.Attr(done[0], "ids").([]string); !slices.Equal(ids, dead) {
		t.Errorf("mutation record's ids %v, want %v", logtest.Attr(done[0], "ids"), dead)
	}
}

// checkRecord fails t unless rec is at Info and has each attribute of want with its value.
func checkRecord(t *testing.T, rec slog.Record, want map[string]any) {
	t.Helper()
	if rec.Level != slog.LevelInfo {
		t.Errorf("%q logged at %v, want INFO", rec.Message, rec.Level)
	}
	for k, v := range want {
		if got := logtest.Attr(rec, k); got != v {
			t.Errorf("%q: %s = %v (%T), want %v", rec.Message, k, got, got, v)
		}
	}
}

// TestMetricsNextToOwnRegistry: operations.md says MetricsConfig.Registry serves the srq
// metrics next to your own. With a registry that already holds a collector of the application's,
// the endpoint must serve both, and so must the application's own handler over that registry.
func TestMetricsNextToOwnRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.publish(q, "", 3, "")
	reg := prometheus.NewRegistry()
	orders := prometheus.NewCounter(prometheus.CounterOpts{Name: "myapp_orders_total", Help: "Orders taken."})
	reg.MustRegister(orders)
	orders.Add(2)
	m, err := NewMetrics(b.in, MetricsConfig{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(b.ctx) })
	for name, h := range map[string]http.Handler{"Metrics": m, "promhttp over the registry": promhttp.HandlerFor(reg, promhttp.HandlerOpts{})} {
		_, samples := scrape(t, h)
		if mf := samples["myapp_orders_total"]; mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Errorf("%s: myapp_orders_total = %v, want a counter at 2", name, mf)
		}
		if v := value(samples["srq_queue_pending"], q.Name()); v != 3 {
			t.Errorf("%s: srq_queue_pending of %s = %v, want 3", name, q.Name(), v)
		}
	}
}

// TestPromiseAPIErrors: docs/operations.md "A GET of api/stats or api/events that fails answers
// {"error": string} with 400, 404 or 500; any other path under api/, or another method than GET,
// gets the dashboard's HTML 404."
func TestPromiseAPIErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for path, status := range map[string]int{"api/stats?q=nosuch": 404, "api/events?q=nosuch": 404, "api/events?q=x&limit=0": 400} {
		r := b.get(path)
		var body struct {
			Error string `json:"error"`
		}
		if r.status != status || json.Unmarshal([]byte(r.body), &body) != nil || body.Error == "" {
			t.Errorf("GET %s: %d %q, want %d with an error in JSON", path, r.status, r.body, status)
		}
	}
	for _, r := range []response{b.get("api/nope"), b.post("api/stats", url.Values{})} {
		if r.status != 404 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("an unknown API path or method: %d %q, want the HTML 404", r.status, r.header.Get("Content-Type"))
		}
	}
	// HEAD is answered as GET is, without the body.
	req, err := http.NewRequestWithContext(b.ctx, http.MethodHead, b.base+"api/stats?q=nosuch", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.do(req); r.status != 404 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || r.body != "" {
		t.Errorf("HEAD api/stats of an unknown queue: %d %q %q, want GET's 404 without a body", r.status, r.header.Get("Content-Type"), r.body)
	}
}
