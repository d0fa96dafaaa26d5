package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

var urlQueryEscape = url.QueryEscape

// errReadOnly is why a mutation is refused in read-only mode.
var errReadOnly = errors.New("the dashboard is read-only: mutations are disabled")

// action is one mutation: it acts on the queue named by the form's q field and returns what it did.
type action func(ctx context.Context, queue string, form url.Values) (outcome, error)

// outcome is what a successful action did: where to send the browser (a relative URL), the
// message the page there shows (a fixed text with the values the action acted on or read back
// from Redis), and what to log.
type outcome struct {
	to    string
	flash string
	audit []slog.Attr
}

// mutation guards an action: read-only mode refuses it (403), then a cross-origin request or a
// missing or bad CSRF token (403), then a form without a queue (400). Config.Auth has run before.
// Success answers 303 See Other to the page the action came from, which shows what was done: the
// action's message, signed for the browser's session (flash.go).
func (h *handler) mutation(act action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.ReadOnly {
			h.refuse(w, r, http.StatusForbidden, errReadOnly)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, http.StatusBadRequest, "Malformed form: "+err.Error())
			return
		}
		if err := h.csrf.check(r, r.PostForm.Get("token")); err != nil {
			h.refuse(w, r, http.StatusForbidden, err)
			return
		}
		q := r.PostForm.Get("q")
		if q == "" {
			h.fail(w, r, http.StatusBadRequest, "The form names no queue.")
			return
		}
		done, err := act(r.Context(), q, r.PostForm)
		if err != nil {
			h.failErr(w, r, r.URL.Path[1:], err)
			return
		}
		attrs := append([]slog.Attr{slog.String("action", r.URL.Path[1:]), slog.String("queue", q),
			slog.String("remote", r.RemoteAddr)}, done.audit...)
		h.log.LogAttrs(r.Context(), slog.LevelInfo, "srq web: mutation", attrs...)
		// A relative Location resolves against the action's URL, which sits beside the pages, so
		// it is right under any mount prefix (http.Redirect would make it absolute without the
		// prefix StripPrefix removed).
		session, _ := sessionOf(r) // csrf.check made sure there is one
		w.Header().Set("Location", h.withFlash(done.to, session, done.flash))
		w.WriteHeader(http.StatusSeeOther)
	}
}

// refuse answers a refused mutation and logs it.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, status int, err error) {
	h.log.LogAttrs(r.Context(), slog.LevelWarn, "srq web: mutation refused", slog.String("path", r.URL.Path),
		slog.String("remote", r.RemoteAddr), slog.Int("status", status), slog.String("error", err.Error()))
	h.fail(w, r, status, err.Error())
}

// badRequest is an error the handler answers with 400.
type badRequest string

func (e badRequest) Error() string { return string(e) }

// deadSelector reads which dead letters the form means: scope=selected with id fields, scope=filter
// with partition/base/error fields, or scope=all.
func deadSelector(form url.Values) (inspect.DeadSelector, error) {
	switch form.Get("scope") {
	case "selected":
		ids := form["id"]
		if len(ids) == 0 {
			return inspect.DeadSelector{}, badRequest("Select at least one dead letter.")
		}
		return inspect.DeadSelector{IDs: ids}, nil
	case "filter":
		f := deadFilter(form.Get)
		if f.Partition == "" && !f.BasePartition && f.ErrorContains == "" {
			return inspect.DeadSelector{}, badRequest("The filter is empty: use scope=all to act on every dead letter.")
		}
		return inspect.DeadSelector{Filter: &f}, nil
	case "all":
		return inspect.DeadSelector{All: true}, nil
	}
	return inspect.DeadSelector{}, badRequest("Say which dead letters: scope must be selected, filter or all.")
}

// deadOutcome is the page the form came from and the message it shows: after a requeue from a
// task's page (back=task), that page, which shows the task pending again; else the dead-letter page
// with the form's filter (a purged task has no page left).
func deadOutcome(queue string, form url.Values, done string, sel inspect.DeadSelector, n int) outcome {
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return outcome{to: deadPageURL(queue, form, done), flash: fmt.Sprintf("%s %d dead letter%s.", done, n, plural),
		audit: selectorAttrs(sel, n)}
}

// deadPageURL is the page a dead-letter action sends the browser back to (deadOutcome).
func deadPageURL(queue string, form url.Values, done string) string {
	v := url.Values{"q": {queue}}
	if form.Get("back") == "task" && done == "Requeued" && len(form["id"]) == 1 {
		v.Set("id", form.Get("id"))
		return "./task?" + v.Encode()
	}
	for _, k := range []string{"partition", "base", "error", "limit"} {
		if s := form.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	return "./dead?" + v.Encode()
}

func (h *handler) requeue(ctx context.Context, queue string, form url.Values) (outcome, error) {
	sel, err := deadSelector(form)
	if err != nil {
		return outcome{}, err
	}
	n, err := h.in.RequeueDead(ctx, queue, sel)
	if err != nil {
		return outcome{}, err
	}
	return deadOutcome(queue, form, "Requeued", sel, n), nil
}

func (h *handler) purge(ctx context.Context, queue string, form url.Values) (outcome, error) {
	sel, err := deadSelector(form)
	if err != nil {
		return outcome{}, err
	}
	n, err := h.in.PurgeDead(ctx, queue, sel)
	if err != nil {
		return outcome{}, err
	}
	return deadOutcome(queue, form, "Purged", sel, n), nil
}

func selectorAttrs(sel inspect.DeadSelector, n int) []slog.Attr {
	attrs := []slog.Attr{slog.Int("count", n)}
	switch {
	case sel.All:
		attrs = append(attrs, slog.Bool("all", true))
	case sel.Filter != nil:
		attrs = append(attrs, slog.String("partition", sel.Filter.Partition), slog.Bool("base", sel.Filter.BasePartition),
			slog.String("error_contains", sel.Filter.ErrorContains))
	default:
		attrs = append(attrs, slog.Any("ids", sel.IDs))
	}
	return attrs
}

// partitionField reads the partition field, which must be present (empty names the base
// partition) and a valid key.
func partitionField(form url.Values) (partition.Key, error) {
	vs, ok := form["partition"]
	if !ok || len(vs) != 1 {
		return "", badRequest("Name one partition.")
	}
	p := partition.Key(vs[0])
	if err := p.Validate(); err != nil {
		return "", err
	}
	return p, nil
}

// partitionOutcome is the page a partition action came from (partitions, partition or queue) and
// the message it shows: "Paused partition !42.".
func partitionOutcome(queue string, form url.Values, done string, p partition.Key) outcome {
	key := string(p)
	if key == "" {
		key = "(base)"
	}
	return outcome{to: partitionPageURL(queue, form, p), flash: done + " partition " + key + ".",
		audit: []slog.Attr{slog.String("partition", string(p))}}
}

// partitionPageURL is the page a partition action sends the browser back to (partitionOutcome).
func partitionPageURL(queue string, form url.Values, p partition.Key) string {
	v := url.Values{"q": {queue}}
	switch form.Get("back") {
	case "partition":
		v.Set("p", string(p))
		return "./partition?" + v.Encode()
	case "partitions":
		for _, k := range []string{"by", "limit"} {
			if s := form.Get(k); s != "" {
				v.Set(k, s)
			}
		}
		return "./partitions?" + v.Encode()
	}
	return "./queue?" + v.Encode()
}

func (h *handler) pausePartition(ctx context.Context, queue string, form url.Values) (outcome, error) {
	p, err := partitionField(form)
	if err != nil {
		return outcome{}, err
	}
	if err := h.in.PausePartition(ctx, queue, p); err != nil {
		return outcome{}, err
	}
	return partitionOutcome(queue, form, "Paused", p), nil
}

func (h *handler) resumePartition(ctx context.Context, queue string, form url.Values) (outcome, error) {
	p, err := partitionField(form)
	if err != nil {
		return outcome{}, err
	}
	if err := h.in.ResumePartition(ctx, queue, p); err != nil {
		return outcome{}, err
	}
	return partitionOutcome(queue, form, "Resumed", p), nil
}

func (h *handler) pauseQueue(ctx context.Context, queue string, _ url.Values) (outcome, error) {
	if err := h.in.PauseQueue(ctx, queue); err != nil {
		return outcome{}, err
	}
	return outcome{to: "./queue?" + url.Values{"q": {queue}}.Encode(),
		flash: "Paused the queue: no task is handed out until it is resumed."}, nil
}

func (h *handler) resumeQueue(ctx context.Context, queue string, _ url.Values) (outcome, error) {
	if err := h.in.ResumeQueue(ctx, queue); err != nil {
		return outcome{}, err
	}
	return outcome{to: "./queue?" + url.Values{"q": {queue}}.Encode(), flash: "Resumed the queue."}, nil
}
