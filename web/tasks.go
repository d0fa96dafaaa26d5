package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// The tasks page lists a queue's tasks by state: pending (in partitions with a task available
// now), delayed (in partitions whose every task is delayed) and completed (kept outcomes) here;
// in flight and dead on their own pages, which share its tabs. Each list is read from the indexes
// the scripts keep, a page at a time with a cursor.

// taskLists are the lists of the tasks page (its state parameter).
var taskLists = map[string]bool{"pending": true, "delayed": true, "completed": true}

// tasksView is the body of the tasks page.
type tasksView struct {
	State          string
	Cursor, Next   string
	Limit          int
	MaxLimit       int
	Now            time.Time
	Partitions     int64 // partitions of the pending or delayed list
	Total          int64 // kept outcomes
	Tasks          []inspect.ListedTask
	Outcomes       []inspect.Outcome
	AnyDelayedTask bool // a task of the page is delayed: the bulk form offers "run now"
}

// tasks serves GET /tasks?q=&state=pending|delayed|completed&cursor=&limit=.
func (h *handler) tasks(w http.ResponseWriter, r *http.Request) {
	q, limit, ok := h.pageParams(w, r, inspect.MaxLimit)
	if !ok {
		return
	}
	v := r.URL.Query()
	state := v.Get("state")
	if state == "" {
		state = "pending"
	}
	if !taskLists[state] {
		h.fail(w, r, http.StatusBadRequest, "List the tasks that are pending, delayed or completed (state=); "+
			"the tasks in flight and the dead letters have pages of their own.")
		return
	}
	body := tasksView{State: state, Cursor: v.Get("cursor"), Limit: limit, MaxLimit: inspect.MaxLimit}
	if state == "completed" {
		pg, err := h.in.Outcomes(r.Context(), q, body.Cursor, limit)
		if err != nil {
			h.failErr(w, r, "completed tasks", err)
			return
		}
		body.Outcomes, body.Next, body.Total, body.Now = pg.Outcomes, pg.Next, pg.Total, h.now(r, q)
	} else {
		pg, err := h.in.PendingTasks(r.Context(), q, inspect.TaskQuery{Delayed: state == "delayed", Cursor: body.Cursor, Limit: limit})
		if err != nil {
			h.failErr(w, r, "pending tasks", err)
			return
		}
		body.Tasks, body.Next, body.Partitions, body.Now = pg.Tasks, pg.Next, pg.Partitions, pg.ServerTime
		for _, t := range pg.Tasks {
			body.AnyDelayedTask = body.AnyDelayedTask || t.AvailableAt.After(pg.ServerTime)
		}
	}
	p := h.newPage(w, r, "Tasks · "+q, "tasks", q, body)
	p.Tab, p.Flash = state, h.flash(r)
	h.render(w, r, "tasks", http.StatusOK, p)
}

// maxBulk is the most tasks one bulk action acts on: a page.
const maxBulk = inspect.MaxLimit

// taskIDs reads the id fields of a task action's form: one, or the selected of a page.
func taskIDs(form url.Values) ([]string, error) {
	ids := form["id"]
	switch {
	case len(ids) == 0:
		return nil, badRequest("Select at least one task.")
	case len(ids) > maxBulk:
		return nil, badRequest(fmt.Sprintf("Select at most %d tasks.", maxBulk))
	}
	return ids, nil
}

// taskPageURL is the page a task action sends the browser back to: the task's own page
// (back=task), the in-flight page, or the tasks page with the list, cursor and page size the form
// came from.
func taskPageURL(queue string, form url.Values, ids []string) string {
	v := url.Values{"q": {queue}}
	switch form.Get("back") {
	case "task":
		v.Set("id", ids[0])
		return "./task?" + v.Encode()
	case "inflight":
		for _, k := range []string{"offset", "limit"} {
			if s := form.Get(k); s != "" {
				v.Set(k, s)
			}
		}
		return "./inflight?" + v.Encode()
	}
	for _, k := range []string{"state", "cursor", "limit"} {
		if s := form.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	return "./tasks?" + v.Encode()
}

// tasksWord is "task x" for one id, else "n tasks".
func tasksWord(ids []string, n int) string {
	if len(ids) == 1 {
		return "task " + ids[0]
	}
	if n == 1 {
		return "1 task"
	}
	return fmt.Sprintf("%d tasks", n)
}

// runNow makes the selected pending tasks available now (POST /run-now). One task that cannot be
// run now is an error (409 when it is no longer pending); of several, those are counted.
func (h *handler) runNow(ctx context.Context, queue string, form url.Values) (outcome, error) {
	ids, err := taskIDs(form)
	if err != nil {
		return outcome{}, err
	}
	done, skipped := 0, 0
	for _, id := range ids {
		_, err := h.in.RunNow(ctx, queue, id)
		switch {
		case err == nil:
			done++
		case len(ids) == 1:
			return outcome{}, err
		case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrNotPending):
			skipped++
		default:
			return outcome{}, err
		}
	}
	flash := "Made " + tasksWord(ids, done) + " available now."
	if skipped > 0 {
		flash += fmt.Sprintf(" %d no longer pending.", skipped)
	}
	return outcome{to: taskPageURL(queue, form, ids), flash: flash,
		audit: []slog.Attr{slog.Any("ids", ids), slog.Int("count", done)}}, nil
}

// cancelTasks cancels the selected tasks (POST /cancel-tasks): a pending or delayed one never
// runs, a running one's worker cancels its handler at its next lease extension. One task that
// cannot be cancelled is an error; of several, those are counted.
func (h *handler) cancelTasks(ctx context.Context, queue string, form url.Values) (outcome, error) {
	ids, err := taskIDs(form)
	if err != nil {
		return outcome{}, err
	}
	done, running, skipped := 0, 0, 0
	for _, id := range ids {
		res, err := h.in.Cancel(ctx, queue, id, "")
		switch {
		case err == nil && res.Running:
			running++
		case err == nil:
			done++
		case len(ids) == 1:
			return outcome{}, err
		case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrFinished):
			skipped++
		default:
			return outcome{}, err
		}
	}
	var flash string
	switch {
	case len(ids) == 1 && running == 1:
		flash = "Task " + ids[0] + " is running: its worker cancels its handler at the next lease extension."
	case len(ids) == 1:
		flash = "Cancelled task " + ids[0] + "."
	default:
		flash = fmt.Sprintf("Cancelled %s.", tasksWord(ids, done))
		if running > 0 {
			flash += fmt.Sprintf(" %d running: their workers cancel them at the next lease extension.", running)
		}
		if skipped > 0 {
			flash += fmt.Sprintf(" %d had ended.", skipped)
		}
	}
	return outcome{to: taskPageURL(queue, form, ids), flash: flash,
		audit: []slog.Attr{slog.Any("ids", ids), slog.Int("count", done), slog.Int("running", running)}}, nil
}

// workersView is the body of the workers page.
type workersView struct {
	Now        time.Time
	LiveWindow string
	Workers    []inspect.Worker
}

// workers serves GET /workers?q=: the queue's consumers seen in the last hour with the record
// each running worker keeps of itself.
func (h *handler) workers(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueParam(w, r)
	if !ok {
		return
	}
	ws, now, err := h.in.Workers(r.Context(), q)
	if err != nil {
		h.failErr(w, r, "workers", err)
		return
	}
	p := h.newPage(w, r, "Workers · "+q, "workers", q, workersView{Now: now, LiveWindow: human(engine.ConsumerLive), Workers: ws})
	h.render(w, r, "workers", http.StatusOK, p)
}
