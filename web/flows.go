package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/srqueue/srq/inspect"
)

// The pages of flows and events: a queue's flows (GET /flows), one flow with its DAG (GET
// /flow), the live tail of a queue's events (GET /events, polling GET /api/events), and the
// cancel action (POST /cancel).

// flowPageNames are the templates of this file's pages.
var flowPageNames = []string{"flows", "flow", "events"}

// routeFlows adds this file's pages, JSON and actions to m.
func (h *handler) routeFlows(m *http.ServeMux, actions map[string]action) {
	m.HandleFunc("GET /flows", h.flows)
	m.HandleFunc("GET /flow", h.flow)
	m.HandleFunc("GET /events", h.events)
	m.HandleFunc("GET /api/events", h.apiEvents)
	actions["/cancel"] = h.cancel
}

// flowsView is the body of the flows page.
type flowsView struct {
	Ended                  bool
	Offset, Limit          int
	PrevOffset, NextOffset int
	More                   bool
	Total                  int64
	Now                    time.Time
	Flows                  []inspect.FlowSummary
}

func (h *handler) flows(w http.ResponseWriter, r *http.Request) {
	q, limit, offset, ok := h.offsetParams(w, r, inspect.MaxLimit)
	if !ok {
		return
	}
	ended := r.URL.Query().Get("ended") == "1"
	page, err := h.in.Flows(r.Context(), q, inspect.FlowQuery{Ended: ended, Page: inspect.Page{Offset: offset, Limit: limit}})
	if err != nil {
		h.failErr(w, r, "flows", err)
		return
	}
	body := flowsView{Ended: ended, Offset: offset, Limit: limit, PrevOffset: max(offset-limit, 0), NextOffset: offset + limit,
		Total: page.Total, Now: h.now(r, q), Flows: page.Flows}
	body.More = int64(offset+len(page.Flows)) < page.Total && len(page.Flows) == limit && offset+2*limit <= inspect.MaxOffset
	p := h.newPage(w, r, "Flows · "+q, "flows", q, body)
	h.render(w, r, "flows", http.StatusOK, p)
}

// flowView is the body of the flow page.
type flowView struct {
	ID   string
	Now  time.Time
	Flow *inspect.Flow
	DAG  *dagView
	// TooBig says the flow has more steps than are drawn.
	TooBig bool
	// Cancellable are the step states a cancel acts on.
	Cancellable map[string]bool
}

// cancellable are the step states a cancel acts on.
var cancellable = map[string]bool{"waiting": true, "pending": true, "leased": true}

func (h *handler) flow(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueParam(w, r)
	if !ok {
		return
	}
	body := flowView{ID: r.URL.Query().Get("id"), Cancellable: cancellable}
	if body.ID == "" {
		h.fail(w, r, http.StatusBadRequest, "Name a flow with the id parameter.")
		return
	}
	f, err := h.in.Flow(r.Context(), q, body.ID)
	if err != nil {
		h.failErr(w, r, "flow", err)
		return
	}
	body.Flow, body.DAG, body.Now = &f, layoutDAG(f), h.now(r, q)
	body.TooBig = body.DAG == nil
	p := h.newPage(w, r, "Flow "+f.ID+" · "+q, "flows", q, body)
	p.Flash = h.flash(r)
	h.render(w, r, "flow", http.StatusOK, p)
}

// eventsView is the body of the events page.
type eventsView struct {
	Events   []inspect.Event
	Next     string
	Stream   bool
	Src      string // the JSON endpoint the page polls, relative
	Interval int64  // milliseconds
}

// events shows the newest events of a queue; its script (events.js) adds the ones that follow.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	q, limit, ok := h.pageParams(w, r, inspect.MaxLimit)
	if !ok {
		return
	}
	page, err := h.in.Events(r.Context(), q, inspect.EventQuery{Last: true, Limit: limit})
	if err != nil {
		h.failErr(w, r, "events", err)
		return
	}
	// Newest first, as the script adds them.
	evs := make([]inspect.Event, len(page.Events))
	for i, ev := range page.Events {
		evs[len(evs)-1-i] = ev
	}
	body := eventsView{Events: evs, Next: page.Next, Stream: page.Stream,
		Src: "./api/events?" + url.Values{"q": {q}}.Encode(), Interval: h.cfg.RefreshInterval.Milliseconds()}
	p := h.newPage(w, r, "Events · "+q, "events", q, body)
	h.render(w, r, "events", http.StatusOK, p)
}

// apiEvents answers the events of queue q after the after parameter (an EventPage.Next), at most
// limit of them, as JSON (inspect.EventPage); it does not wait for new ones.
func (h *handler) apiEvents(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := v.Get("q")
	if q == "" {
		h.writeJSON(w, http.StatusBadRequest, map[string]string{"error": "name a queue with the q parameter"})
		return
	}
	limit, err := h.limitParam(r, inspect.MaxLimit)
	if err != nil {
		h.writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	page, err := h.in.Events(r.Context(), q, inspect.EventQuery{After: v.Get("after"), Limit: limit})
	if err != nil {
		h.jsonError(w, r, err)
		return
	}
	h.writeJSON(w, http.StatusOK, page)
}

// cancel cancels the task named by the form's id in the form's queue (a flow step's queue), and
// goes back to the flow page the form came from (flow and home fields) or to the task page.
func (h *handler) cancel(ctx context.Context, queue string, form url.Values) (outcome, error) {
	id := form.Get("id")
	if id == "" {
		return outcome{}, badRequest("Name the task to cancel.")
	}
	res, err := h.in.Cancel(ctx, queue, id, "")
	if err != nil {
		return outcome{}, err
	}
	done := outcome{flash: "Cancelled task " + id + ".", audit: []slog.Attr{slog.String("id", id), slog.Bool("running", res.Running)}}
	if res.Running {
		done.flash = "Task " + id + " is running: its worker cancels its handler at the next lease extension."
	}
	done.to = "./task?" + url.Values{"q": {queue}, "id": {id}}.Encode()
	if fid, home := form.Get("flow"), form.Get("home"); fid != "" && home != "" {
		done.to = "./flow?" + url.Values{"q": {home}, "id": {fid}}.Encode()
	}
	return done, nil
}
