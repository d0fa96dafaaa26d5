package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

// statusOf maps an Inspector error to an HTTP status: 400 for invalid input, 404 for what does
// not exist, 409 for a task no longer in a state the action needs (no longer pending, or ended),
// 500 for the rest (Redis unreachable, a malformed reply).
func statusOf(err error) int {
	var br badRequest
	switch {
	case errors.As(err, &br), errors.Is(err, engine.ErrInvalid), errors.Is(err, partition.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, engine.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrNotPending), errors.Is(err, engine.ErrFinished):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// queueParam returns the q parameter, answering 400 when it is missing.
func (h *handler) queueParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query().Get("q")
	if q == "" {
		h.fail(w, r, http.StatusBadRequest, "Name a queue with the q parameter.")
		return "", false
	}
	return q, true
}

// pageParams reads the q and limit parameters of a page (limitParam), answering 400 when q is
// missing or limit is malformed; ok is false then.
func (h *handler) pageParams(w http.ResponseWriter, r *http.Request, most int) (queue string, limit int, ok bool) {
	if queue, ok = h.queueParam(w, r); !ok {
		return "", 0, false
	}
	limit, err := h.limitParam(r, most)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return "", 0, false
	}
	return queue, limit, true
}

// offsetParams reads the q, limit and offset parameters of a page read by offset: pageParams,
// and an offset that is 0 when absent and at most inspect.MaxOffset-limit, answering 400 for one
// that is not; ok is false then.
func (h *handler) offsetParams(w http.ResponseWriter, r *http.Request, most int) (queue string, limit, offset int, ok bool) {
	if queue, limit, ok = h.pageParams(w, r, most); !ok {
		return "", 0, 0, false
	}
	if s := r.URL.Query().Get("offset"); s != "" {
		var err error
		if offset, err = strconv.Atoi(s); err != nil || offset < 0 || offset+limit > inspect.MaxOffset {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("offset %q must be a number from 0 to %d", s, inspect.MaxOffset-limit))
			return "", 0, 0, false
		}
	}
	return queue, limit, offset, true
}

// limitParam reads the limit parameter: the configured page size when absent, at most most.
func (h *handler) limitParam(r *http.Request, most int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return min(h.cfg.PageSize, most), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("limit %q is not a positive number", s)
	}
	return min(n, most), nil
}

func (h *handler) chart(queue string) *chartView {
	src := "./api/stats"
	if queue != "" {
		src += "?q=" + urlQueryEscape(queue)
	}
	return &chartView{Src: src, Interval: h.cfg.RefreshInterval.Milliseconds()}
}

// queueRow is one line of the overview.
type queueRow struct {
	Name   string
	Shards int
	Stats  inspect.Stats
	Err    string // why the stats could not be read
}

// overviewView is the body of the overview.
type overviewView struct{ Queues []queueRow }

// overview lists every queue with its counts: one registry read, then one Stats per queue.
func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	qs, err := h.in.Queues(r.Context())
	if err != nil {
		h.failErr(w, r, "list queues", err)
		return
	}
	rows := make([]queueRow, len(qs))
	for i, q := range qs {
		rows[i] = queueRow{Name: q.Name, Shards: q.Shards}
		if rows[i].Stats, err = h.in.Stats(r.Context(), q.Name); err != nil {
			rows[i].Err = err.Error()
		}
	}
	p := h.newPage(w, r, "Queues", "overview", "", overviewView{Queues: rows})
	p.Chart, p.Flash = h.chart(""), h.flash(r)
	h.render(w, r, "overview", http.StatusOK, p)
}

// counter is one row of the queue page's counter table.
type counter struct {
	Name  string
	Value int64
}

// queueView is the body of the queue page.
type queueView struct {
	Stats      inspect.Stats
	Counters   []counter
	LiveWindow string // how fresh a live consumer's heartbeat is
}

func (h *handler) queue(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueParam(w, r)
	if !ok {
		return
	}
	st, err := h.in.Stats(r.Context(), q)
	if err != nil {
		h.failErr(w, r, "queue stats", err)
		return
	}
	c := st.Counters
	body := queueView{Stats: st, Counters: []counter{
		{"Published", c.Published}, {"Duplicates refused", c.Duplicates}, {"Acked", c.Acked},
		{"Rejected (sent back)", c.Rejected}, {"Taken back with a rejected task", c.TakenBack},
		{"Handed back by stopping workers", c.HandedBack},
		{"Recovered from expired leases", c.Recovered}, {"Dead-lettered", c.DeadLettered},
		{"Requeued from the dead letters", c.Requeued}, {"Purged", c.Purged}, {"Trimmed by the caps", c.Trimmed},
		{"Cancelled", c.Cancelled}, {"Debounced publishes that replaced a payload", c.Replaced},
		{"Throttled publishes dropped", c.Dropped}, {"Flows started", c.FlowsStarted}, {"Flows completed", c.FlowsCompleted},
		{"Flows failed", c.FlowsFailed}, {"Flows ended and kept", st.EndedFlows},
		{"Consumers seen in the last hour", st.ConsumerCount},
	}, LiveWindow: human(engine.ConsumerLive)}
	p := h.newPage(w, r, q, "queue", q, body)
	p.Chart, p.Flash = h.chart(q), h.flash(r)
	h.render(w, r, "queue", http.StatusOK, p)
}

// partitionsView is the body of the partitions page.
type partitionsView struct {
	By         string
	Limit      int
	MaxLimit   int
	Now        time.Time
	Partitions []inspect.Partition
}

var partitionOrders = map[string]inspect.PartitionOrder{
	"": inspect.ByDepth, "depth": inspect.ByDepth, "age": inspect.ByAge, "paused": inspect.ByPaused, "held": inspect.ByHeld,
}

func (h *handler) partitions(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueParam(w, r)
	if !ok {
		return
	}
	by, ok := partitionOrders[r.URL.Query().Get("by")]
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "Order partitions by depth, age, paused or held.")
		return
	}
	limit, err := h.limitParam(r, inspect.MaxLimit)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ps, err := h.in.Partitions(r.Context(), q, inspect.PartitionQuery{By: by, Limit: limit})
	if err != nil {
		h.failErr(w, r, "partitions", err)
		return
	}
	body := partitionsView{By: by.String(), Limit: limit, MaxLimit: inspect.MaxLimit, Now: h.now(r, q), Partitions: ps}
	p := h.newPage(w, r, "Partitions · "+q, "partitions", q, body)
	p.Flash = h.flash(r)
	h.render(w, r, "partitions", http.StatusOK, p)
}

// now is the Redis server's clock as the queue's stats last read it, so that "12s ago" on a page
// compares server times with the server's clock; this process's clock when the stats fail.
func (h *handler) now(r *http.Request, queue string) time.Time {
	st, err := h.in.Stats(r.Context(), queue)
	if err != nil || st.ServerTime.IsZero() {
		return time.Now()
	}
	return st.ServerTime
}

// inflightView is the body of the in-flight page.
type inflightView struct {
	Offset, Limit          int
	PrevOffset, NextOffset int
	More                   bool
	Now                    time.Time
	Tasks                  []inspect.InFlightTask
}

func (h *handler) inflight(w http.ResponseWriter, r *http.Request) {
	q, limit, offset, ok := h.offsetParams(w, r, inspect.MaxLimit-1)
	if !ok {
		return
	}
	// One more than the page, to know whether there is a next page.
	ask := limit + 1
	if offset+ask > inspect.MaxOffset {
		ask = limit
	}
	ts, err := h.in.InFlight(r.Context(), q, inspect.Page{Offset: offset, Limit: ask})
	if err != nil {
		h.failErr(w, r, "tasks in flight", err)
		return
	}
	body := inflightView{Offset: offset, Limit: limit, PrevOffset: max(offset-limit, 0), NextOffset: offset + limit,
		Now: h.now(r, q), Tasks: ts}
	if len(ts) > limit {
		body.More, body.Tasks = true, ts[:limit]
	}
	p := h.newPage(w, r, "In flight · "+q, "inflight", q, body)
	p.Tab, p.Flash = "inflight", h.flash(r)
	h.render(w, r, "inflight", http.StatusOK, p)
}

// deadView is the body of the dead-letter page.
type deadView struct {
	Partition     string
	Base          bool // only the base partition
	ErrorContains string
	Filtered      bool
	Cursor, Next  string
	Limit         int
	MaxLimit      int
	Total         int64
	Now           time.Time
	Letters       []inspect.DeadLetter
}

// deadFilter reads the partition, base and error fields of a query or form.
func deadFilter(get func(string) string) inspect.DeadQuery {
	return inspect.DeadQuery{Partition: get("partition"), BasePartition: get("base") == "1", ErrorContains: get("error")}
}

func (h *handler) dead(w http.ResponseWriter, r *http.Request) {
	q, limit, ok := h.pageParams(w, r, inspect.MaxLimit)
	if !ok {
		return
	}
	v := r.URL.Query()
	dq := deadFilter(v.Get)
	dq.Cursor, dq.Limit = v.Get("cursor"), limit
	pg, err := h.in.DeadLetters(r.Context(), q, dq)
	if err != nil {
		h.failErr(w, r, "dead letters", err)
		return
	}
	body := deadView{Partition: dq.Partition, Base: dq.BasePartition, ErrorContains: dq.ErrorContains,
		Filtered: dq.Partition != "" || dq.BasePartition || dq.ErrorContains != "",
		Cursor:   dq.Cursor, Next: pg.Next, Limit: limit, MaxLimit: inspect.MaxLimit, Total: pg.Total,
		Now: h.now(r, q), Letters: pg.Letters}
	p := h.newPage(w, r, "Dead letters · "+q, "dead", q, body)
	p.Tab, p.Flash = "dead", h.flash(r)
	h.render(w, r, "dead", http.StatusOK, p)
}

// taskView is the body of the task page.
type taskView struct {
	ID   string
	Now  time.Time
	Task *inspect.Task
}

func (h *handler) task(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueParam(w, r)
	if !ok {
		return
	}
	body := taskView{ID: r.URL.Query().Get("id")}
	status := http.StatusOK
	if body.ID != "" {
		t, err := h.in.Task(r.Context(), q, body.ID)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			status = http.StatusNotFound
		case err != nil:
			h.failErr(w, r, "task", err)
			return
		default:
			body.Task = &t
		}
		body.Now = h.now(r, q)
	}
	p := h.newPage(w, r, "Task · "+q, "task", q, body)
	p.Flash = h.flash(r)
	h.render(w, r, "task", status, p)
}
