package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// event is the payload of the tests' queues.
type event struct {
	N    int    `msgpack:"n"`
	Fail string `msgpack:"fail"` // a worker in tests dead-letters a task whose Fail is set, with this error
}

// bundle is what the handler tests need: a key prefix of their own on the shared Redis (so the
// overview lists only their queues), an Inspector on it, and the handler served by httptest.
type bundle struct {
	t      *testing.T
	ctx    context.Context
	client *redis.Client
	prefix string
	in     *inspect.Inspector
	srv    *httptest.Server
	base   string // the URL the handler is mounted at, with a trailing slash
	logs   *syncBuffer
	h      *handler
	// session is the session id the bundle's requests carry in their cookie, as a browser's
	// would after its first page.
	session string
}

// syncBuffer is a log sink safe for the handler's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// setup serves NewHandler(cfg) under /ops/srq/ on a fresh prefix.
func setup(t *testing.T, cfg Config) *bundle {
	t.Helper()
	c := redistest.Client(t)
	var r [6]byte
	_, _ = rand.Read(r[:])
	b := &bundle{t: t, client: c, prefix: "srqweb-" + hex.EncodeToString(r[:]), logs: &syncBuffer{}, session: rand.Text()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	b.ctx = ctx
	t.Cleanup(func() { _ = redistest.DropKeys(context.Background(), c, b.prefix+":") })
	in, err := inspect.New(c, inspect.Config{Prefix: b.prefix})
	if err != nil {
		t.Fatal(err)
	}
	b.in = in
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(b.logs, nil))
	}
	h, err := NewHandler(in, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.h = h.(*handler)
	mux := http.NewServeMux()
	mux.Handle("/ops/srq/", http.StripPrefix("/ops/srq", h))
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	b.base = b.srv.URL + "/ops/srq/"
	return b
}

// queue returns a new queue of the bundle's prefix named name (a unique name when empty).
func (b *bundle) queue(name string) *srq.Queue[event] {
	b.t.Helper()
	if name == "" {
		name = redistest.Queue(b.t)
	}
	q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: name, Prefix: b.prefix})
	if err != nil {
		b.t.Fatal(err)
	}
	return q
}

// publish publishes n events to partition p of q and returns their ids.
func (b *bundle) publish(q *srq.Queue[event], p partition.Key, n int, fail string) []string {
	b.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		res, err := q.Publish(b.ctx, event{N: i, Fail: fail}, &srq.PublishOpts{Partition: string(p)})
		if err != nil {
			b.t.Fatal(err)
		}
		ids[i] = res.ID
	}
	return ids
}

// kill publishes n events to partition p whose handler fails for good with errMsg, runs a worker
// over q until they are dead letters, and returns their ids. Run it before publishing other
// tasks to q: the worker acks whatever else it finds.
func (b *bundle) kill(q *srq.Queue[event], p partition.Key, n int, errMsg string) []string {
	b.t.Helper()
	ids := b.publish(q, p, n, errMsg)
	w := b.failingWorker(q)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := b.stats(q.Name())
		if st.Dead >= int64(n) && st.Pending == 0 && st.InFlight == 0 {
			return ids
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("tasks did not die: %+v", st)
		}
		if _, err := w.RunOnce(b.ctx); err != nil {
			b.t.Fatal(err)
		}
	}
}

// failingWorker returns a worker over q that dead-letters a task whose Fail is set, with that
// error, and acks the others.
func (b *bundle) failingWorker(q *srq.Queue[event]) *srq.Worker {
	b.t.Helper()
	w, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, t *srq.Task[event]) error {
		if t.Value.Fail != "" {
			return srq.Permanent(errors.New(t.Value.Fail))
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.t.Fatal(err)
	}
	return w
}

func (b *bundle) stats(queue string) inspect.Stats {
	b.t.Helper()
	st, err := b.in.Stats(b.ctx, queue)
	if err != nil {
		b.t.Fatal(err)
	}
	return st
}

// response is a finished request.
type response struct {
	status int
	header http.Header
	body   string
}

// do sends req with the bundle's client, which never follows redirects, with the bundle's session
// cookie unless req has a Cookie header.
func (b *bundle) do(req *http.Request) response {
	b.t.Helper()
	if req.Header.Get("Cookie") == "" {
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: b.session})
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: string(body)}
}

// get fetches path (relative to the mount point).
func (b *bundle) get(path string) response {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// mustGet fetches path and fails the test unless it answers 200.
func (b *bundle) mustGet(path string) string {
	b.t.Helper()
	r := b.get(path)
	if r.status != http.StatusOK {
		b.t.Fatalf("GET %s: %d\n%s", path, r.status, r.body)
	}
	return r.body
}

var tokenRE = regexp.MustCompile(`name="token" value="([^"]+)"`)

// token returns a valid CSRF token for the bundle's session (TestQueuePage checks that pages carry
// valid ones).
func (b *bundle) token() string { return b.h.csrf.token(b.session) }

// post sends form to path as a same-origin browser would (Origin and Sec-Fetch-Site set), with a
// valid token unless form has one.
func (b *bundle) post(path string, form url.Values) response {
	b.t.Helper()
	return b.postWith(path, form, map[string]string{"Origin": b.srv.URL, "Sec-Fetch-Site": "same-origin"})
}

func (b *bundle) postWith(path string, form url.Values, headers map[string]string) response {
	b.t.Helper()
	if _, ok := form["token"]; !ok {
		form.Set("token", b.token())
	}
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return b.do(req)
}

// follow resolves a redirect's Location against the URL of path and fetches it.
func (b *bundle) follow(path string, r response) string {
	b.t.Helper()
	if r.status != http.StatusSeeOther {
		b.t.Fatalf("POST %s: %d, want 303\n%s", path, r.status, r.body)
	}
	from, _ := url.Parse(b.base + path)
	to, err := from.Parse(r.header.Get("Location"))
	if err != nil {
		b.t.Fatal(err)
	}
	if !strings.HasPrefix(to.String(), b.base) {
		b.t.Fatalf("redirect to %s leaves the mount point %s", to, b.base)
	}
	return b.mustGet(strings.TrimPrefix(to.String(), b.base))
}
