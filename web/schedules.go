package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/srqueue/srq/inspect"
)

// schedulesView is the body of the schedules page.
type schedulesView struct {
	After     string
	Next      string // the name to list after for the next page; "" on the last page
	Limit     int
	Now       time.Time
	Schedules []inspect.Schedule
}

// schedules lists a queue's schedules with their next and last ticks, a page at a time by name.
func (h *handler) schedules(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueParam(w, r)
	if !ok {
		return
	}
	limit, err := h.limitParam(r, inspect.MaxSchedules-1)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	after := r.URL.Query().Get("after")
	// One more than the page, to know whether there is a next page.
	list, err := h.in.Schedules(r.Context(), q, after, limit+1)
	if err != nil {
		h.failErr(w, r, "schedules", err)
		return
	}
	body := schedulesView{After: after, Limit: limit, Now: h.now(r, q), Schedules: list}
	if len(list) > limit {
		body.Schedules = list[:limit]
		body.Next = list[limit-1].Name
	}
	p := h.newPage(w, r, "Schedules · "+q, "schedules", q, body)
	p.Flash = scheduleFlash(r)
	h.render(w, r, "schedules", http.StatusOK, p)
}

// scheduleFlash is the message the schedules page shows after an action: a fixed text with the
// schedule's name and, after a trigger, the id published, both from the redirect's URL, which the
// template escapes.
func scheduleFlash(r *http.Request) string {
	v := r.URL.Query()
	name := v.Get("s")
	switch v.Get("done") {
	case "paused":
		return "Paused schedule " + name + ": it publishes nothing until resumed."
	case "resumed":
		return "Resumed schedule " + name + " at its next tick."
	case "triggered":
		return "Triggered schedule " + name + ": published " + v.Get("id") + "."
	case "deleted":
		return "Deleted schedule " + name + "."
	}
	return ""
}

// scheduleAction returns the mutation that pauses, resumes, triggers or deletes the schedule named
// by the form's schedule field, then sends the browser back to the schedules page.
func (h *handler) scheduleAction(verb string) action {
	return func(ctx context.Context, queue string, form url.Values) (string, []slog.Attr, error) {
		name := form.Get("schedule")
		if name == "" {
			return "", nil, badRequest("Name a schedule.")
		}
		back := url.Values{"q": {queue}, "s": {name}, "done": {verb + "d"}}
		var err error
		switch verb {
		case "pause":
			err = h.in.PauseSchedule(ctx, queue, name)
		case "resume":
			err = h.in.ResumeSchedule(ctx, queue, name)
		case "trigger":
			var id string
			id, err = h.in.TriggerSchedule(ctx, queue, name)
			back.Set("done", "triggered")
			back.Set("id", id)
		case "delete":
			_, err = h.in.DeleteSchedule(ctx, queue, name)
		}
		if err != nil {
			return "", nil, err
		}
		return "./schedules?" + back.Encode(), []slog.Attr{slog.String("schedule", name)}, nil
	}
}
