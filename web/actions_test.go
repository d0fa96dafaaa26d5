package web

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

func TestRequeueAndPurge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	a := b.kill(q, "!a", 2, "timeout")
	c := b.kill(q, "!c", 2, "refused")
	name := q.Name()

	// One letter, from its row.
	page := b.follow("requeue", b.post("requeue", url.Values{"q": {name}, "scope": {"selected"}, "id": {a[0]}}))
	if !strings.Contains(page, "Requeued 1 dead letter.") {
		t.Errorf("no confirmation after requeueing one:\n%s", page)
	}
	if st := b.stats(name); st.Dead != 3 || st.Pending != 1 {
		t.Errorf("after requeueing one: dead %d pending %d, want 3 and 1", st.Dead, st.Pending)
	}
	if task, err := b.in.Task(b.ctx, name, a[0]); err != nil || task.State != "pending" {
		t.Errorf("requeued task: %v %v", task.State, err)
	}
	// A letter that is no longer dead (requeued meanwhile, from another page) is not counted.
	for _, action := range []string{"requeue", "purge"} {
		r := b.post(action, url.Values{"q": {name}, "scope": {"selected"}, "id": {a[0]}})
		if page := b.follow(action, r); r.status != http.StatusSeeOther || !strings.Contains(page, "d 0 dead letters.") {
			t.Errorf("%s of a letter no longer dead: %d\n%s", action, r.status, page)
		}
	}
	// By filter: the filter stays on the page it sends back to.
	r := b.post("purge", url.Values{"q": {name}, "scope": {"filter"}, "error": {"refused"}})
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "./dead?") || !strings.Contains(loc, "error=refused") {
		t.Errorf("purge by filter redirects to %q", loc)
	}
	if page := b.follow("purge", r); !strings.Contains(page, "Purged 2 dead letters.") {
		t.Errorf("no confirmation after purging by filter")
	}
	for _, id := range c {
		if _, err := b.in.Task(b.ctx, name, id); err == nil {
			t.Errorf("purged task %s still exists", id)
		}
	}
	// All.
	b.follow("requeue", b.post("requeue", url.Values{"q": {name}, "scope": {"all"}}))
	if st := b.stats(name); st.Dead != 0 || st.Pending != 2 {
		t.Errorf("after requeueing all: dead %d pending %d, want 0 and 2", st.Dead, st.Pending)
	}
	// Malformed selections change nothing.
	for _, form := range []url.Values{
		{"q": {name}, "scope": {"selected"}},
		{"q": {name}, "scope": {"filter"}},
		{"q": {name}, "scope": {"everything"}},
		{"scope": {"all"}},
	} {
		if r := b.post("purge", form); r.status != http.StatusBadRequest {
			t.Errorf("purge %v: %d, want 400", form, r.status)
		}
	}
	if !strings.Contains(b.logs.String(), "action=requeue") {
		t.Errorf("mutations are not logged:\n%s", b.logs.String())
	}
}

func TestPauseAndResumePartition(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.publish(q, "!stop", 2, "")
	b.publish(q, "!go", 1, "")
	name := q.Name()

	r := b.post("pause-partition", url.Values{"q": {name}, "partition": {"!stop"}, "back": {"partitions"}, "by": {"age"}})
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "./partitions?") || !strings.Contains(loc, "by=age") {
		t.Errorf("pause from the partitions page redirects to %q", loc)
	}
	page := b.follow("pause-partition", r)
	if !strings.Contains(page, "Paused partition !stop.") || !strings.Contains(page, `data-action="resume" data-partition="!stop"`) {
		t.Errorf("partitions page after pausing:\n%s", page)
	}
	ds, err := q.Engine().Fetch(b.ctx, "c", 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Partition != "!go" {
		t.Fatalf("fetch with !stop paused: %v", ds)
	}
	page = b.follow("resume-partition", b.post("resume-partition", url.Values{"q": {name}, "partition": {"!stop"}}))
	if !strings.Contains(page, "Resumed partition !stop.") || !strings.Contains(page, `id="stat-pending"`) {
		t.Errorf("queue page after resuming (no back field):\n%s", page)
	}
	ds, err = q.Engine().Fetch(b.ctx, "c", 10, time.Minute)
	if err != nil || len(ds) == 0 {
		t.Fatalf("fetch after resuming: %v %v", ds, err)
	}
	for _, d := range ds {
		if d.Partition != "!stop" {
			t.Errorf("fetch after resuming got a task of %q, want only !stop's", d.Partition)
		}
	}
	for _, form := range []url.Values{{"q": {name}}, {"q": {name}, "partition": {"!"}}} {
		if r := b.post("pause-partition", form); r.status != http.StatusBadRequest {
			t.Errorf("pause %v: %d, want 400", form, r.status)
		}
	}
}

func TestPauseAndResumeQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	b.publish(q, "", 1, "")
	page := b.follow("pause-queue", b.post("pause-queue", url.Values{"q": {q.Name()}}))
	if stat(t, page, "queue-state") != "paused" || !strings.Contains(page, `action="./resume-queue"`) {
		t.Errorf("queue page after pausing:\n%s", page)
	}
	if ds, err := q.Engine().Fetch(b.ctx, "c", 10, time.Minute); err != nil || len(ds) != 0 {
		t.Fatalf("fetch from a paused queue: %v %v", ds, err)
	}
	page = b.follow("resume-queue", b.post("resume-queue", url.Values{"q": {q.Name()}}))
	if stat(t, page, "queue-state") != "running" {
		t.Errorf("queue page after resuming:\n%s", page)
	}
	if ds, err := q.Engine().Fetch(b.ctx, "c", 10, time.Minute); err != nil || len(ds) != 1 {
		t.Fatalf("fetch after resuming: %v %v", ds, err)
	}
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{TokenTTL: time.Hour})
	q := b.queue("")
	b.publish(q, "!p", 1, "")
	name := q.Name()
	old := b.h.csrf
	stale := func() string {
		c := *old
		c.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
		return c.token(b.session)
	}()
	sameSite := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.srv.URL}
	otherSession := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.srv.URL, "Cookie": sessionCookie + "=" + rand.Text()}
	badSession := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.srv.URL, "Cookie": sessionCookie + "=x"}
	noSession := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.srv.URL, "Cookie": "other=1"}
	for _, c := range []struct {
		name    string
		token   string
		headers map[string]string
	}{
		{"no token", "", sameSite},
		{"forged token", strconv.FormatInt(time.Now().Unix(), 10) + ".AAAA", sameSite},
		{"expired token", stale, sameSite},
		// A token seen elsewhere, replayed from another browser: refused without its session.
		{"another session's token", b.token(), otherSession},
		{"a malformed session cookie", b.token(), badSession},
		{"no session cookie", b.token(), noSession},
		{"cross-site", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"other origin", "", map[string]string{"Origin": "https://evil.example"}},
	} {
		form := url.Values{"q": {name}, "partition": {"!p"}}
		if c.token != "" || c.name == "no token" {
			form.Set("token", c.token)
		}
		if r := b.postWith("pause-partition", form, c.headers); r.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.name, r.status)
		}
	}
	if st := b.stats(name); st.PausedPartitions != 0 {
		t.Fatalf("a refused request paused the partition")
	}
	// A non-browser client (no Origin, no Sec-Fetch-Site) with a valid token is allowed.
	r := b.postWith("pause-partition", url.Values{"q": {name}, "partition": {"!p"}}, nil)
	if r.status != http.StatusSeeOther {
		t.Errorf("valid token without browser headers: %d, want 303", r.status)
	}
	// Mutations are POST only.
	if r := b.get("pause-partition?q=" + url.QueryEscape(name) + "&partition=%21p"); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET pause-partition: %d, want 405", r.status)
	}
	// A browser without a session gets one with its first page, and that page's token works with
	// that cookie only.
	req, _ := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+"queue?q="+url.QueryEscape(name), nil)
	req.Header.Set("Cookie", "other=1")
	page := b.do(req)
	var session *http.Cookie
	for _, c := range (&http.Response{Header: page.header}).Cookies() {
		if c.Name == sessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || len(session.Value) != 26 || session.Value == b.session {
		t.Fatalf("first page's session cookie: %+v", session)
	}
	token := tokenRE.FindStringSubmatch(page.body)[1]
	form := func() url.Values { return url.Values{"q": {name}, "token": {token}} }
	if r := b.postWith("resume-queue", form(), sameSite); r.status != http.StatusForbidden {
		t.Errorf("the page's token with another session: %d, want 403", r.status)
	}
	withCookie := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.srv.URL, "Cookie": sessionCookie + "=" + session.Value}
	if r := b.postWith("resume-queue", form(), withCookie); r.status != http.StatusSeeOther {
		t.Errorf("the page's token with its session: %d, want 303", r.status)
	}
}

func TestTrustedOrigin(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{TrustedOrigins: []string{"https://ops.example"}})
	q := b.queue("")
	b.publish(q, "", 1, "")
	r := b.postWith("pause-queue", url.Values{"q": {q.Name()}}, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://ops.example"})
	if r.status != http.StatusSeeOther {
		t.Errorf("trusted origin: %d, want 303", r.status)
	}
	if _, err := NewHandler(b.in, Config{TrustedOrigins: []string{"not a url"}}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("a malformed trusted origin: %v, want an error wrapping ErrInvalid", err)
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ReadOnly: true})
	q := b.queue("")
	dead := b.kill(q, "!p", 1, "boom")
	b.publish(q, "!p", 1, "")
	name := url.QueryEscape(q.Name())
	for _, p := range []string{"queue?q=" + name, "partitions?q=" + name, "dead?q=" + name} {
		body := b.mustGet(p)
		if strings.Contains(body, `method="post"`) || strings.Contains(body, `name="token"`) || !strings.Contains(body, "read-only") {
			t.Errorf("%s: read-only page offers mutations", p)
		}
	}
	form := url.Values{"q": {q.Name()}, "scope": {"selected"}, "id": {dead[0]}, "token": {"x"}}
	for _, action := range []string{"requeue", "purge", "pause-queue"} {
		if r := b.postWith(action, form, nil); r.status != http.StatusForbidden || !strings.Contains(r.body, "read-only") {
			t.Errorf("POST %s in read-only mode: %d", action, r.status)
		}
	}
	if st := b.stats(q.Name()); st.Dead != 1 || st.Paused {
		t.Errorf("read-only mode changed the queue: %+v", st)
	}
}

func TestAuthHook(t *testing.T) {
	t.Parallel()
	errNoKey := errors.New("no key")
	b := setup(t, Config{AuthChallenge: `Basic realm="srq"`, Auth: func(r *http.Request) error {
		switch {
		case r.Header.Get("X-Key") == "":
			return errNoKey
		case r.Method == http.MethodPost && r.Header.Get("X-Key") != "admin":
			return ErrForbidden
		}
		return nil
	}})
	q := b.queue("")
	b.publish(q, "", 1, "")

	r := b.get("")
	if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") != `Basic realm="srq"` {
		t.Errorf("no key: %d %q", r.status, r.header.Get("WWW-Authenticate"))
	}
	for _, p := range []string{"static/app.js", "api/stats"} {
		if r := b.get(p); r.status != http.StatusUnauthorized {
			t.Errorf("%s without key: %d", p, r.status)
		}
	}
	viewer := map[string]string{"X-Key": "viewer", "Sec-Fetch-Site": "same-origin"}
	req, _ := http.NewRequestWithContext(b.ctx, http.MethodGet, b.base+"queue?q="+url.QueryEscape(q.Name()), nil)
	req.Header.Set("X-Key", "viewer")
	page := b.do(req)
	if page.status != http.StatusOK {
		t.Fatalf("viewer GET: %d", page.status)
	}
	token := tokenRE.FindStringSubmatch(page.body)[1]
	form := url.Values{"q": {q.Name()}, "token": {token}}
	if r := b.postWith("pause-queue", form, viewer); r.status != http.StatusForbidden || r.header.Get("WWW-Authenticate") != "" {
		t.Errorf("viewer POST: %d, want 403 without a challenge", r.status)
	}
	if b.stats(q.Name()).Paused {
		t.Fatal("a refused viewer paused the queue")
	}
	admin := map[string]string{"X-Key": "admin", "Sec-Fetch-Site": "same-origin"}
	if r := b.postWith("pause-queue", form, admin); r.status != http.StatusSeeOther {
		t.Errorf("admin POST: %d, want 303", r.status)
	}
	if !b.stats(q.Name()).Paused {
		t.Error("admin POST did not pause the queue")
	}
}

// TestConfigChecks: NewHandler and NewMetrics refuse bad arguments with errors that match
// ErrInvalid, as every constructor of the library does.
func TestConfigChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for _, cfg := range []Config{{RefreshInterval: -1}, {PageSize: -1}, {CSRFSecret: []byte("short")}} {
		if _, err := NewHandler(b.in, cfg); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("NewHandler(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
	if _, err := NewHandler(nil, Config{}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("NewHandler(nil): %v, want ErrInvalid", err)
	}
	if _, err := NewMetrics(nil, MetricsConfig{}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("NewMetrics(nil): %v, want ErrInvalid", err)
	}
	if _, err := NewMetrics(b.in, MetricsConfig{ScrapeTimeout: -1}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("NewMetrics with a negative ScrapeTimeout: %v, want ErrInvalid", err)
	}
	cfg, err := Config{RefreshInterval: time.Millisecond}.withDefaults()
	if err != nil || cfg.RefreshInterval != minRefreshInterval || cfg.PageSize != DefaultPageSize || cfg.TokenTTL != DefaultTokenTTL {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
	if cfg, err := (Config{PageSize: 1000}).withDefaults(); err != nil || cfg.PageSize != inspect.MaxLimit {
		t.Errorf("PageSize 1000: %d, %v; want it lowered to %d", cfg.PageSize, err, inspect.MaxLimit)
	}
}
