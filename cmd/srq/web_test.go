package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a stderr the command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// webRun is a running srq web.
type webRun struct {
	base   string // http://host:port
	stderr *lockedBuffer
	cancel context.CancelFunc
	code   chan int
}

// startWeb runs srq web with args against the fixture's Redis and waits for the address it prints.
func startWeb(t *testing.T, f *fixture, args ...string) *webRun {
	t.Helper()
	return startWebWith(t, f, defaultWebTimeouts, args...)
}

// startWebWith is startWeb with the server's timeouts tm.
func startWebWith(t *testing.T, f *fixture, tm webTimeouts, args ...string) *webRun {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	w := &webRun{stderr: &lockedBuffer{}, cancel: cancel, code: make(chan int, 1)}
	t.Cleanup(func() { w.stop(t) })
	c := newCLI(ctx, strings.NewReader(""), io.Discard, w.stderr)
	c.webTimeouts = tm
	go func() {
		w.code <- c.main(append([]string{"--redis-url", f.url, "--prefix", f.prefix, "web"}, args...))
	}()
	addrRE := regexp.MustCompile(`http://(\S+)/ `)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if m := addrRE.FindStringSubmatch(w.stderr.String()); m != nil {
			host, port, err := net.SplitHostPort(m[1])
			if err != nil {
				t.Fatal(err)
			}
			if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
				host = "127.0.0.1" // every interface: this one too
			}
			w.base = "http://" + net.JoinHostPort(host, port)
			return w
		}
		select {
		case c := <-w.code:
			w.cancel()
			w.cancel, w.code = nil, nil // stop has nothing to wait for
			t.Fatalf("srq web exited with %d: %s", c, w.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("srq web printed no address: %s", w.stderr.String())
		}
	}
}

// stop ends srq web and checks that it returned 0; once.
func (w *webRun) stop(t *testing.T) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case c := <-w.code:
		if c != 0 {
			t.Errorf("srq web exited with %d after its context ended: %s", c, w.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Error("srq web did not return after its context ended")
	}
}

// get fetches path, with basic auth when user is set.
func (w *webRun) get(t *testing.T, path, user, password string) (int, http.Header, string) {
	t.Helper()
	return w.getHost(t, path, "", user, password)
}

// getHost fetches path with the Host header host (the address's own when empty), with basic auth
// when user is set.
func (w *webRun) getHost(t *testing.T, path, host, user, password string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, w.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(body)
}

// TestWebServesDashboardAndMetrics: srq web serves the dashboard and /metrics on the address it
// prints, says what it serves, and returns 0 when its context ends.
func TestWebServesDashboardAndMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	w := startWeb(t, f, "--addr", "127.0.0.1:0")
	for path, want := range map[string]string{"/": ">q<", "/queue?q=q": "pending", "/metrics": "srq_queue_"} {
		code, hd, body := w.get(t, path, "", "")
		if code != http.StatusOK || !strings.Contains(body, want) || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, nosniff %q, body without %q:\n%.600s", path, code, hd.Get("X-Content-Type-Options"), want, body)
		}
	}
	w.stop(t)
	for _, want := range []string{"this machine only (loopback)", "read-write: requeue, purge and pause are enabled",
		"no authentication", `queues under prefix "` + f.prefix + `" on Redis ` + f.url} {
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("srq web's start did not say %q:\n%s", want, w.stderr.String())
		}
	}
}

// TestWebListensOnLoopbackByDefault: without --addr, srq web listens on 127.0.0.1 only.
func TestWebListensOnLoopbackByDefault(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"web", "-h"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("web -h: exit %d", code)
	}
	if !strings.Contains(errb.String(), `-addr string`) || !strings.Contains(errb.String(), `(default "127.0.0.1:8080")`) {
		t.Fatalf("web -h does not show the loopback default:\n%s", errb.String())
	}
}

// TestWebRefusesPublicMutations: on an address beyond loopback, srq web refuses to serve the
// mutations without basic auth, unless read-only or told --insecure-public; with basic auth,
// every path asks for the password.
func TestWebRefusesPublicMutations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	code, _, errOut := f.run("", "web", "--addr", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "--insecure-public") || !strings.Contains(errOut, "SRQ_WEB_PASSWORD") {
		t.Fatalf("public and read-write without auth: exit %d, %q; want exit 2 naming the ways out", code, errOut)
	}
	for _, tt := range []struct {
		args []string
		say  string
	}{
		{[]string{"--addr", "0.0.0.0:0", "--read-only"}, "every interface of this machine; read-only; no authentication"},
		{[]string{"--addr", "0.0.0.0:0", "--insecure-public"}, "every interface of this machine; read-write: requeue, purge and pause are enabled; no authentication"},
	} {
		w := startWeb(t, f, tt.args...)
		w.stop(t)
		if !strings.Contains(w.stderr.String(), tt.say) {
			t.Errorf("srq web %v did not say %q:\n%s", tt.args, tt.say, w.stderr.String())
		}
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startWeb(t, f, "--addr", "0.0.0.0:0", "--user", "ops", "--password-file", pwFile)
	for _, path := range []string{"/", "/queue?q=q", "/api/stats", "/metrics"} {
		if code, hd, _ := w.get(t, path, "", ""); code != http.StatusUnauthorized || !strings.HasPrefix(hd.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("GET %s without a password: %d %q, want 401 with a challenge", path, code, hd.Get("WWW-Authenticate"))
		}
		if code, _, _ := w.get(t, path, "ops", "wrong"); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong password: %d, want 401", path, code)
		}
		if code, _, body := w.get(t, path, "ops", "s3cret"); code != http.StatusOK {
			t.Errorf("GET %s with the password: %d\n%.300s", path, code, body)
		}
	}
	w.stop(t)
	if !strings.Contains(w.stderr.String(), `basic auth as user "ops"`) || strings.Contains(w.stderr.String(), "s3cret") {
		t.Errorf("srq web with basic auth said:\n%s", w.stderr.String())
	}
	// Each refusal is logged, one line each.
	for _, want := range []string{`srq web: request refused by basic auth" method=GET path=/metrics`, "status=401 error=\"no credentials\"", `error="wrong user or password"`} {
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("srq web did not log %q:\n%s", want, w.stderr.String())
		}
	}
	if n := strings.Count(w.stderr.String(), "refused by basic auth"); n != 8 {
		t.Errorf("%d refusals logged, want 8 (4 paths, twice each)", n)
	}

	code, _, errOut = f.run("", "web", "--user", "ops")
	if code != 2 || !strings.Contains(errOut, "SRQ_WEB_PASSWORD") {
		t.Errorf("--user without a password: exit %d, %q", code, errOut)
	}
}

// TestWebPasswordFromEnv: SRQ_WEB_USER and SRQ_WEB_PASSWORD set the account as the flags do.
func TestWebPasswordFromEnv(t *testing.T) {
	t.Setenv("SRQ_WEB_USER", "ops")
	t.Setenv("SRQ_WEB_PASSWORD", "fr0m-env")
	f := newFixture(t)
	w := startWeb(t, f, "--addr", "0.0.0.0:0")
	if code, _, _ := w.get(t, "/", "", ""); code != http.StatusUnauthorized {
		t.Errorf("without a password: %d, want 401", code)
	}
	if code, _, _ := w.get(t, "/", "ops", "fr0m-env"); code != http.StatusOK {
		t.Errorf("with the password from the environment: %d, want 200", code)
	}
}

// TestWebRefusesForeignHosts: srq web on its default loopback bind answers 421 Misdirected Request
// on every path, /metrics and static files included, to a request for a host name that is not
// localhost or a loopback address (a page whose DNS name was rebound to 127.0.0.1), and changes
// nothing for one; --allowed-host, repeated or with commas, adds names.
func TestWebRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	paths := []string{"/", "/queue?q=q", "/partitions?q=q", "/partition?q=q&p=big", "/inflight?q=q", "/dead?q=q",
		"/task?q=q&id=d1", "/schedules?q=q", "/flows?q=q", "/flow?q=q&id=x", "/events?q=q", "/api/stats",
		"/api/events?q=q", "/static/app.js", "/static/app.css", "/metrics", "/nope", "/purge"}
	w := startWeb(t, f, "--addr", "127.0.0.1:0")
	for _, path := range paths {
		if code, _, body := w.getHost(t, path, "rebind.evil.example:8481", "", ""); code != http.StatusMisdirectedRequest ||
			strings.Contains(body, "payload") || strings.Contains(body, "srq_queue") {
			t.Errorf("GET %s for rebind.evil.example: %d\n%.300s", path, code, body)
		}
		for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:1"} {
			if code, _, _ := w.getHost(t, path, host, "", ""); code == http.StatusMisdirectedRequest {
				t.Errorf("GET %s for %s: 421, want it answered", path, host)
			}
		}
	}
	form := url.Values{"q": {"q"}, "scope": {"all"}, "token": {"x"}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, w.base+"/purge", strings.NewReader(form.Encode()))
	req.Host = "rebind.evil.example:8481"
	req.Header.Set("Origin", "http://rebind.evil.example:8481")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("POST /purge for rebind.evil.example: %d, want 421", res.StatusCode)
	}
	w.stop(t)
	if !strings.Contains(w.stderr.String(), "answers requests for localhost and loopback addresses only") ||
		!strings.Contains(w.stderr.String(), "Host not allowed") {
		t.Errorf("srq web did not say which hosts it answers, or did not log the refusals:\n%s", w.stderr.String())
	}

	w = startWeb(t, f, "--addr", "127.0.0.1:0", "--allowed-host", "ops.example.com, ops2.example.com:8443", "--allowed-host", "ops3.example.com")
	for host, want := range map[string]int{"ops.example.com": 200, "ops2.example.com:8443": 200, "ops2.example.com": 421,
		"ops3.example.com:1": 200, "localhost": 200, "rebind.evil.example": 421} {
		for _, path := range []string{"/", "/metrics"} {
			if code, _, _ := w.getHost(t, path, host, "", ""); code != want {
				t.Errorf("--allowed-host: GET %s for %s: %d, want %d", path, host, code, want)
			}
		}
	}
	w.stop(t)
	if !strings.Contains(w.stderr.String(), "and ops.example.com, ops2.example.com:8443, ops3.example.com;") {
		t.Errorf("srq web did not list the allowed hosts:\n%s", w.stderr.String())
	}
	// Before basic auth: a refused host is not asked for a password.
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w = startWeb(t, f, "--addr", "127.0.0.1:0", "--user", "ops", "--password-file", pwFile)
	if code, hd, _ := w.getHost(t, "/metrics", "rebind.evil.example", "", ""); code != http.StatusMisdirectedRequest ||
		hd.Get("WWW-Authenticate") != "" {
		t.Errorf("with basic auth, GET /metrics for rebind.evil.example: %d, challenge %q; want 421 without one", code, hd.Get("WWW-Authenticate"))
	}
	if code, _, _ := w.getHost(t, "/metrics", "localhost", "ops", "s3cret"); code != http.StatusOK {
		t.Errorf("with basic auth, GET /metrics for localhost with the password: %d", code)
	}
	w.stop(t)
	if code, _, errOut := f.run("", "web", "--addr", "127.0.0.1:0", "--allowed-host", "http://ops.example.com"); code != 2 ||
		!strings.Contains(errOut, "--allowed-host") {
		t.Errorf("a malformed --allowed-host: exit %d, %q; want a usage error", code, errOut)
	}
}

// TestWebServerTimeouts: srq web's server has the read-header, read, write and idle timeouts
// docs/cli.md gives.
func TestWebServerTimeouts(t *testing.T) {
	t.Parallel()
	srv := newWebServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler), newCLI(t.Context(), nil, nil, nil).webTimeouts)
	for name, got := range map[string][2]time.Duration{
		"ReadHeaderTimeout": {srv.ReadHeaderTimeout, 10 * time.Second}, "ReadTimeout": {srv.ReadTimeout, 30 * time.Second},
		"WriteTimeout": {srv.WriteTimeout, time.Minute}, "IdleTimeout": {srv.IdleTimeout, time.Minute},
	} {
		if got[0] != got[1] {
			t.Errorf("%s = %v, want %v", name, got[0], got[1])
		}
	}
}

// TestWebHosts: srq web's allowed hosts are the --allowed-host entries; without any, the address
// it listens on when that is one address beyond loopback, and none (the default check) on
// loopback or every interface.
func TestWebHosts(t *testing.T) {
	t.Parallel()
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080} }
	for _, tt := range []struct {
		given []string
		addr  net.Addr
		want  []string
	}{
		{nil, tcp("10.0.0.5"), []string{"10.0.0.5"}},
		{nil, tcp("fd00::5"), []string{"fd00::5"}},
		{nil, tcp("127.0.0.1"), nil},
		{nil, tcp("::1"), nil},
		{nil, tcp("0.0.0.0"), nil},
		{nil, tcp("::"), nil},
		{[]string{"ops.example.com"}, tcp("10.0.0.5"), []string{"ops.example.com"}},
		{[]string{"ops.example.com"}, tcp("0.0.0.0"), []string{"ops.example.com"}},
	} {
		if got := webHosts(tt.given, tt.addr); !slices.Equal(got, tt.want) {
			t.Errorf("webHosts(%q, %v) = %q, want %q", tt.given, tt.addr, got, tt.want)
		}
	}
}

// TestWebClosesIdleConnections: srq web closes a kept-alive connection that stays idle after its
// answer, and one that never finishes its request's headers, when their timeouts pass (shortened
// here); the test waits for the server's close, not for a time.
func TestWebClosesIdleConnections(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w := startWebWith(t, f, webTimeouts{readHeader: 300 * time.Millisecond, read: 2 * time.Second, write: 5 * time.Second,
		idle: 300 * time.Millisecond}, "--addr", "127.0.0.1:0")
	addr := strings.TrimPrefix(w.base, "http://")
	closed := func(t *testing.T, conn net.Conn, r io.Reader) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := r.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("read from the idle connection: %d bytes, %v; want the server to close it (EOF)", n, err)
		}
	}
	t.Run("idle after an answer", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Close {
			t.Fatalf("GET /api/stats: %d, close %v; want 200 on a kept-alive connection", res.StatusCode, res.Close)
		}
		closed(t, conn, br)
	})
	t.Run("headers never finished", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
			t.Fatal(err)
		}
		closed(t, conn, conn)
	})
}
