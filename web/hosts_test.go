package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/srqueue/srq/engine"
)

// evilHost is the Host a page on a rebound DNS name sends.
const evilHost = "rebind.evil.example:8481"

// dashboardRoutes are a path of every page, JSON endpoint, static file and action of the handler,
// relative to its mount point, for queue q with dead letter id.
func dashboardRoutes(q, id string) (gets, posts []string) {
	qp := "q=" + url.QueryEscape(q)
	gets = []string{"", "queue?" + qp, "partitions?" + qp, "partition?" + qp + "&p=!p", "inflight?" + qp,
		"dead?" + qp, "task?" + qp + "&id=" + id, "schedules?" + qp, "flows?" + qp, "flow?" + qp + "&id=x",
		"events?" + qp, "api/stats", "api/events?" + qp, "static/app.js", "static/app.css", "static/events.js",
		"no-such-page", "purge"}
	posts = []string{"requeue", "purge", "pause-partition", "resume-partition", "pause-queue", "resume-queue",
		"pause-schedule", "resume-schedule", "trigger-schedule", "delete-schedule", "cancel"}
	return gets, posts
}

// requestHost sends method path (relative to the mount point) with the Host header host, as a
// same-origin browser at that host would, and returns the status and body.
func (b *bundle) requestHost(method, path, host string, form url.Values) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		form.Set("token", b.token())
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Host = host
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+host)
	}
	return b.do(req)
}

// TestHostCheckRefusesRebinding: on a loopback connection the default handler answers 421 on every
// route to a request whose Host is not localhost or a loopback address (a page whose DNS name was
// rebound to 127.0.0.1), reads nothing and changes nothing; the loopback names are answered on any
// port.
func TestHostCheckRefusesRebinding(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	ids := b.kill(q, "!p", 2, "boom")
	gets, posts := dashboardRoutes(q.Name(), ids[0])
	for _, path := range gets {
		r := b.requestHost(http.MethodGet, path, evilHost, nil)
		if r.status != http.StatusMisdirectedRequest || strings.Contains(r.body, ids[0]) || r.header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s with Host %s: %d, Set-Cookie %q\n%.300s", path, evilHost, r.status, r.header.Get("Set-Cookie"), r.body)
		}
		for _, host := range []string{"localhost:8481", "LOCALHOST", "localhost.", "127.0.0.1", "127.1.2.3:80", "[::1]:8481"} {
			if r := b.requestHost(http.MethodGet, path, host, nil); r.status == http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %s: 421, want it answered", path, host)
			}
		}
	}
	form := func() url.Values {
		return url.Values{"q": {q.Name()}, "scope": {"all"}, "partition": {"!p"}, "schedule": {"s"}, "id": {ids[0]}}
	}
	for _, path := range posts {
		if r := b.requestHost(http.MethodPost, path, evilHost, form()); r.status != http.StatusMisdirectedRequest {
			t.Errorf("POST %s with Host and Origin %s: %d, want 421\n%.300s", path, evilHost, r.status, r.body)
		}
	}
	if st := b.stats(q.Name()); st.Dead != 2 || st.Paused || st.PausedPartitions != 0 {
		t.Fatalf("refused requests changed the queue: %+v", st)
	}
	if !strings.Contains(b.logs.String(), "Host not allowed") || !strings.Contains(b.logs.String(), evilHost) {
		t.Errorf("refusals not logged:\n%s", b.logs.String())
	}
	// The same purge from localhost goes through: the check refused the host, not the request.
	if r := b.requestHost(http.MethodPost, "purge", "localhost:1", form()); r.status != http.StatusSeeOther {
		t.Fatalf("POST purge from localhost: %d\n%s", r.status, r.body)
	}
	if st := b.stats(q.Name()); st.Dead != 0 {
		t.Fatalf("purge from localhost left %d dead letters", st.Dead)
	}
}

// TestAllowedHosts: the hosts Config.AllowedHosts lists are answered, on any port or on the one
// given, beside the loopback names; others are refused on every connection, loopback or not; the
// address the connection was accepted on is answered as a Host; "*" answers every host; without
// entries, a connection that is not loopback is not checked.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	in := setup(t, Config{}).in
	local := func(ip string) context.Context {
		return context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080})
	}
	for _, tt := range []struct {
		allowed []string
		local   string // the address the connection was accepted on; "" for none known
		host    string
		ok      bool
	}{
		{nil, "127.0.0.1", "localhost:8080", true},
		{nil, "127.0.0.1", evilHost, false},
		{nil, "::1", "[::1]:8080", true},
		{nil, "::1", "evil.example", false},
		{nil, "10.0.0.5", evilHost, true},
		{nil, "", evilHost, true},
		{[]string{"ops.example.com"}, "127.0.0.1", "ops.example.com", true},
		{[]string{"ops.example.com"}, "127.0.0.1", "OPS.Example.com.:443", true},
		{[]string{"ops.example.com"}, "127.0.0.1", "localhost:9", true},
		{[]string{"ops.example.com"}, "127.0.0.1", evilHost, false},
		{[]string{"ops.example.com"}, "127.0.0.1", "ops.example.com.evil.example", false},
		{[]string{"ops.example.com"}, "10.0.0.5", evilHost, false},
		{[]string{"ops.example.com"}, "10.0.0.5", "10.0.0.5:8080", true},
		{[]string{"ops.example.com"}, "10.0.0.5", "10.0.0.6:8080", false},
		{[]string{"ops.example.com"}, "", evilHost, false},
		{[]string{"ops.example.com:8443"}, "10.0.0.5", "ops.example.com:8443", true},
		{[]string{"ops.example.com:8443"}, "10.0.0.5", "ops.example.com", false},
		{[]string{"ops.example.com:8443"}, "10.0.0.5", "ops.example.com:443", false},
		{[]string{"[fd00::5]:8080", "fd00::6"}, "10.0.0.5", "[fd00::5]:8080", true},
		{[]string{"[fd00::5]:8080", "fd00::6"}, "10.0.0.5", "[fd00::6]:1", true},
		{[]string{"*"}, "127.0.0.1", evilHost, true},
	} {
		h, err := NewHandler(in, Config{AllowedHosts: tt.allowed, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "/static/app.css", nil)
		if tt.local != "" {
			req = req.WithContext(local(tt.local))
		}
		req.Host = tt.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Code != http.StatusMisdirectedRequest; got != tt.ok {
			t.Errorf("AllowedHosts %q, connection to %q, Host %q: %d, want answered %v", tt.allowed, tt.local, tt.host, rec.Code, tt.ok)
		}
	}
	// The check comes before Auth: a refused host is not asked for credentials.
	h, err := NewHandler(in, Config{Auth: func(*http.Request) error { return errors.New("who are you") },
		AuthChallenge: `Basic realm="srq"`, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(local("127.0.0.1"), http.MethodGet, "/", nil)
	req.Host = evilHost
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest || rec.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("a refused host with Auth set: %d, challenge %q; want 421 without one", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
	for _, bad := range []string{"", "http://ops.example.com", "ops.example.com/", "a@b", "ops.example.com:0",
		"ops.example.com:99999", "[::1", "*.example.com", ":8080", "ops example.com", "ops\x1b[31m.example.com"} {
		if _, err := NewHandler(in, Config{AllowedHosts: []string{bad}}); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("AllowedHosts [%q]: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestAllowedHostsBehindProxy: behind a reverse proxy on the same machine that passes its public
// host name on, the dashboard is refused until that name is in AllowedHosts; then its pages and
// its forms (with the public origin) work through the proxy.
func TestAllowedHostsBehindProxy(t *testing.T) {
	t.Parallel()
	for _, allowed := range [][]string{nil, {"ops.example.com"}} {
		b := setup(t, Config{AllowedHosts: allowed})
		q := b.queue("")
		b.publish(q, "", 1, "")
		target, _ := url.Parse(b.srv.URL)
		proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = "ops.example.com"
		}})
		t.Cleanup(proxy.Close)
		res, err := http.Get(proxy.URL + "/ops/srq/queue?q=" + url.QueryEscape(q.Name()))
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if allowed == nil {
			if res.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("through the proxy without AllowedHosts: %d, want 421", res.StatusCode)
			}
			continue
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("through the proxy with AllowedHosts: %d", res.StatusCode)
		}
		form := url.Values{"q": {q.Name()}, "token": {b.token()}}
		req, _ := http.NewRequestWithContext(b.ctx, http.MethodPost, proxy.URL+"/ops/srq/pause-queue", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://ops.example.com")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if r := b.do(req); r.status != http.StatusSeeOther || !b.stats(q.Name()).Paused {
			t.Fatalf("pause through the proxy: %d\n%s", r.status, r.body)
		}
	}
}

// TestRestrictHosts: the check wraps other handlers, such as Metrics, as it guards the dashboard.
func TestRestrictHosts(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "metrics") })
	h, err := RestrictHosts(ok, []string{"prometheus.internal"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for host, want := range map[string]int{"prometheus.internal:9": 200, "localhost": 200, evilHost: 421} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
	if _, err := RestrictHosts(ok, []string{"http://x"}, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("a malformed entry: %v, want ErrInvalid", err)
	}
}
