package web

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

//go:embed assets
var assets embed.FS

// pageNames are the templates under assets/, each rendered inside layout.html.
var pageNames = []string{"overview", "queue", "partitions", "partition", "inflight", "dead", "task", "schedules", "error",
	"tasks", "workers"}

// handler serves the dashboard; see NewHandler.
type handler struct {
	in    *inspect.Inspector
	cfg   Config
	hosts *hostCheck
	csrf  *csrf
	pages map[string]*template.Template
	mux   *http.ServeMux
	log   *slog.Logger
}

// NewHandler returns the dashboard over in as an http.Handler to mount in your own service, at
// the root or under a path prefix with http.StripPrefix:
//
//	mux.Handle("/ops/srq/", http.StripPrefix("/ops/srq", h))
//
// Every link it writes is relative, so it works under any prefix. Pages: the queues with a live
// throughput chart (GET /), one queue (GET /queue?q=), its top partitions (GET /partitions), one
// partition with its due and delayed tasks, paged (GET /partition), its pending, delayed and
// completed tasks (GET /tasks, with run now and cancel: POST /run-now, POST /cancel-tasks), its
// tasks in flight (GET /inflight), its dead letters (GET /dead), one task with its payload decoded,
// every failed attempt's error, what it waits for, its progress and children, and its actions (GET
// /task), its workers (GET /workers), its
// schedules (GET /schedules, with pause, resume, run now and delete), its flows (GET /flows), one
// flow with its DAG (GET /flow) and the live tail of its events (GET /events), plus the JSON the
// chart and the tail poll (GET /api/stats, GET /api/events). Mutations are POST only, need a same-origin request
// and a CSRF token from a page, bound to the browser's cookie (srq_browser, set by the
// first page), and are refused with 403 in read-only mode. A request for a host that
// Config.AllowedHosts does not allow is refused with 421 on every path. NewHandler fails
// with an error wrapping engine.ErrInvalid (srq.ErrInvalid) for a nil inspector or an invalid cfg.
func NewHandler(in *inspect.Inspector, cfg Config) (http.Handler, error) {
	if in == nil {
		return nil, fmt.Errorf("srq web: %w: nil inspector", engine.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c, err := newCSRF(cfg.CSRFSecret, cfg.TokenTTL, cfg.TrustedOrigins)
	if err != nil {
		return nil, err
	}
	hosts, err := newHostCheck(cfg.AllowedHosts, cfg.Logger)
	if err != nil {
		return nil, err
	}
	h := &handler{in: in, cfg: cfg, hosts: hosts, csrf: c, pages: map[string]*template.Template{}, log: cfg.Logger}
	for _, name := range append(pageNames, flowPageNames...) {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("srq web: template %s: %w", name, err)
		}
		h.pages[name] = t
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("srq web: assets: %w", err)
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.overview)
	m.HandleFunc("GET /queue", h.queue)
	m.HandleFunc("GET /partitions", h.partitions)
	m.HandleFunc("GET /partition", h.partition)
	m.HandleFunc("GET /inflight", h.inflight)
	m.HandleFunc("GET /dead", h.dead)
	m.HandleFunc("GET /task", h.task)
	m.HandleFunc("GET /schedules", h.schedules)
	m.HandleFunc("GET /tasks", h.tasks)
	m.HandleFunc("GET /workers", h.workers)
	m.HandleFunc("GET /api/stats", h.apiStats)
	m.Handle("GET /static/", http.StripPrefix("/static/", staticFiles(static)))
	actions := map[string]action{
		"/requeue": h.requeue, "/purge": h.purge,
		"/pause-partition": h.pausePartition, "/resume-partition": h.resumePartition,
		"/pause-queue": h.pauseQueue, "/resume-queue": h.resumeQueue,
		"/pause-schedule": h.scheduleAction("pause"), "/resume-schedule": h.scheduleAction("resume"),
		"/trigger-schedule": h.scheduleAction("trigger"), "/delete-schedule": h.scheduleAction("delete"),
		"/run-now": h.runNow, "/cancel-tasks": h.cancelTasks,
	}
	h.routeFlows(m, actions)
	for path, act := range actions {
		m.HandleFunc("POST "+path, h.mutation(act))
		m.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", http.MethodPost)
			h.fail(w, r, http.StatusMethodNotAllowed, "This action takes a POST from one of the dashboard's forms.")
		})
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "There is no such page.")
	})
	h.mux = m
	return h, nil
}

// staticFiles serves the embedded CSS and JavaScript (no directory listings).
func staticFiles(root fs.FS) http.Handler {
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".css") && !strings.HasSuffix(r.URL.Path, ".js") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows only the handler's own script, style and requests, and no framing
// (the buttons must not be clickjacked).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// ServeHTTP sets the security headers, refuses a host that is not allowed (Config.AllowedHosts),
// asks Config.Auth, and routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	if !h.hosts.allows(r) {
		h.hosts.refuse(w, r)
		return
	}
	if h.cfg.Auth != nil {
		if err := h.cfg.Auth(r); err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, ErrForbidden) {
				status = http.StatusForbidden
			} else if h.cfg.AuthChallenge != "" {
				hd.Set("WWW-Authenticate", h.cfg.AuthChallenge)
			}
			h.log.LogAttrs(r.Context(), slog.LevelInfo, "srq web: request refused by Auth",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr),
				slog.Int("status", status), slog.String("error", err.Error()))
			http.Error(w, http.StatusText(status), status)
			return
		}
	}
	if r.URL.Path == "" {
		// Mounted with StripPrefix("/ops/srq", …) and asked for "/ops/srq": relative links need
		// the trailing slash, so send the browser to "/ops/srq/".
		h.redirectToDir(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// redirectToDir answers a request for the mount point without its trailing slash with a relative
// redirect to the same name with one; it cannot leave the host.
func (h *handler) redirectToDir(w http.ResponseWriter, r *http.Request) {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Malformed request path.")
		return
	}
	p := u.EscapedPath()
	last := p[strings.LastIndexByte(p, '/')+1:]
	if last == "" || last == "." || last == ".." {
		h.fail(w, r, http.StatusNotFound, "There is no such page.")
		return
	}
	loc := "./" + last + "/"
	if u.RawQuery != "" {
		loc += "?" + u.RawQuery
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusMovedPermanently)
}

// page is what every template gets.
type page struct {
	Title      string
	Nav        string // the current navigation entry
	Tab        string // the current tab of the task lists: pending, delayed, inflight, dead or completed
	Queue      string // the queue the page is about; empty on the overview
	ReadOnly   bool
	Token      string // the CSRF token for the page's forms
	Flash      string
	FlashError bool
	Chart      *chartView
	Body       any
}

// chartView configures the throughput chart.
type chartView struct {
	Src      string // the JSON endpoint, relative
	Interval int64  // milliseconds
}

// newPage starts the page for r; unless read-only, it carries a form token bound to the browser's
// session, whose cookie it sets on w when r has none.
func (h *handler) newPage(w http.ResponseWriter, r *http.Request, title, nav, queue string, body any) *page {
	p := &page{Title: title, Nav: nav, Queue: queue, ReadOnly: h.cfg.ReadOnly, Body: body}
	if !h.cfg.ReadOnly {
		p.Token = h.csrf.token(h.csrf.session(w, r))
	}
	return p
}

// render executes the page template into memory first, so a template error becomes a clean 500.
func (h *handler) render(w http.ResponseWriter, r *http.Request, name string, status int, p *page) {
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.LogAttrs(r.Context(), slog.LevelError, "srq web: render", slog.String("page", name), slog.String("error", err.Error()))
		http.Error(w, "srq web: cannot render the page", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorView is the body of the error page.
type errorView struct {
	Status     int
	StatusText string
	Message    string
}

// fail answers with an HTML error page.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	p := h.newPage(w, r, http.StatusText(status), "", "", errorView{Status: status, StatusText: http.StatusText(status), Message: msg})
	h.render(w, r, "error", status, p)
}

// failErr answers for an error of the Inspector: 400 for invalid input, 404 for an unknown
// queue or task, 500 (logged) for anything else, such as Redis being down.
func (h *handler) failErr(w http.ResponseWriter, r *http.Request, what string, err error) {
	status := statusOf(err)
	if status >= 500 {
		h.log.LogAttrs(r.Context(), slog.LevelError, "srq web: "+what, slog.String("path", r.URL.Path),
			slog.String("error", err.Error()))
	}
	h.fail(w, r, status, what+": "+err.Error())
}
