package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
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
	Overdue   bool // a schedule of the page is overdue
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
	body.Overdue = slices.ContainsFunc(body.Schedules, func(s inspect.Schedule) bool { return s.Overdue })
	p := h.newPage(w, r, "Schedules · "+q, "schedules", q, body)
	p.Flash = h.flash(r)
	h.render(w, r, "schedules", http.StatusOK, p)
}

// scheduleAction returns the mutation that pauses, resumes, triggers or deletes the schedule named
// by the form's schedule field, then sends the browser back to the schedules page, which says
// what was done: a fixed text with the schedule's name and, after a trigger, the id published.
func (h *handler) scheduleAction(verb string) action {
	return func(ctx context.Context, queue string, form url.Values) (outcome, error) {
		name := form.Get("schedule")
		if name == "" {
			return outcome{}, badRequest("Name a schedule.")
		}
		done := outcome{to: "./schedules?" + url.Values{"q": {queue}}.Encode(), audit: []slog.Attr{slog.String("schedule", name)}}
		var err error
		switch verb {
		case "pause":
			err = h.in.PauseSchedule(ctx, queue, name)
			done.flash = "Paused schedule " + name + ": it publishes nothing until resumed."
		case "resume":
			err = h.in.ResumeSchedule(ctx, queue, name)
			done.flash = "Resumed schedule " + name + " at its next tick."
		case "trigger":
			var id string
			id, err = h.in.TriggerSchedule(ctx, queue, name)
			done.flash = "Triggered schedule " + name + ": published " + id + "."
		case "delete":
			var existed bool
			existed, err = h.in.DeleteSchedule(ctx, queue, name)
			done.flash = "Deleted schedule " + name + "."
			if !existed {
				done.flash = "There was no schedule " + name + " to delete."
			}
		}
		if err != nil {
			return outcome{}, err
		}
		return done, nil
	}
}
