package web

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/srqueue/srq/inspect"
)

// apiQueue is one queue in the JSON the pages poll. The chart turns the counters into rates. Its
// names are snake_case, as inspect.Stats's and the srq command's --json are.
type apiQueue struct {
	Name                string `json:"name"`
	Pending             int64  `json:"pending"`
	InFlight            int64  `json:"in_flight"`
	Dead                int64  `json:"dead"`
	ReadyPartitions     int64  `json:"ready_partitions"`
	ScheduledPartitions int64  `json:"scheduled_partitions"`
	PausedPartitions    int64  `json:"paused_partitions"`
	HeldPartitions      int64  `json:"held_partitions"`
	Waiting             int64  `json:"waiting"`
	RunningFlows        int64  `json:"running_flows"`
	Paused              bool   `json:"paused"`
	LiveConsumers       int64  `json:"live_consumers"` // consumers with a fresh heartbeat
	Published           int64  `json:"published"`
	Acked               int64  `json:"acked"`
	Rejected            int64  `json:"rejected"`
	DeadLettered        int64  `json:"dead_lettered"`
	ServerTime          int64  `json:"server_time"` // Unix milliseconds, the Redis server's clock
}

// apiStats is the JSON of GET /api/stats.
type apiStats struct {
	// ServerTime is the latest server clock of the queues' stats (Unix milliseconds); this
	// process's clock when there are no queues.
	ServerTime int64      `json:"server_time"`
	Queues     []apiQueue `json:"queues"`
}

func newAPIQueue(st inspect.Stats) apiQueue {
	return apiQueue{Name: st.Queue, Pending: st.Pending, InFlight: st.InFlight, Dead: st.Dead,
		ReadyPartitions: st.ReadyPartitions, ScheduledPartitions: st.ScheduledPartitions,
		PausedPartitions: st.PausedPartitions, HeldPartitions: st.HeldPartitions, Waiting: st.Waiting,
		RunningFlows: st.RunningFlows, Paused: st.Paused, LiveConsumers: st.LiveConsumers, Published: st.Published, Acked: st.Acked,
		Rejected: st.Rejected, DeadLettered: st.DeadLettered, ServerTime: st.ServerTime.UnixMilli()}
}

// apiStats answers the counts and counters of the queue q, or of every queue without q, as JSON.
// Every queue's stats leave out a queue whose registered shard count is unusable: the overview
// lists it with its error, and the chart of the others goes on.
func (h *handler) apiStats(w http.ResponseWriter, r *http.Request) {
	var names []string
	if q := r.URL.Query().Get("q"); q != "" {
		names = []string{q}
	} else {
		qs, err := h.in.Queues(r.Context())
		if err != nil {
			h.jsonError(w, r, err)
			return
		}
		for _, q := range qs {
			if q.Err == nil {
				names = append(names, q.Name)
			}
		}
	}
	out := apiStats{Queues: make([]apiQueue, 0, len(names))}
	for _, name := range names {
		st, err := h.in.Stats(r.Context(), name)
		if err != nil {
			h.jsonError(w, r, err)
			return
		}
		out.Queues = append(out.Queues, newAPIQueue(st))
		out.ServerTime = max(out.ServerTime, st.ServerTime.UnixMilli())
	}
	if out.ServerTime == 0 {
		out.ServerTime = time.Now().UnixMilli()
	}
	h.writeJSON(w, http.StatusOK, out)
}

func (h *handler) writeJSON(w http.ResponseWriter, status int, v any) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *handler) jsonError(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if status >= 500 {
		h.log.LogAttrs(r.Context(), slog.LevelError, "srq web: stats", slog.String("error", err.Error()))
	}
	h.writeJSON(w, status, map[string]string{"error": err.Error()})
}
