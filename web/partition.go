package web

import (
	"net/http"
	"time"

	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

// partitionView is the body of the partition page.
type partitionView struct {
	Key                    partition.Key
	Info                   inspect.Partition
	Delayed                bool // the page lists the delayed tasks, not the due ones
	Offset, Limit          int
	PrevOffset, NextOffset int
	More                   bool
	Now                    time.Time
	List                   inspect.PartitionTasks
}

// partition shows one partition (GET /partition?q=&p=): its state and controls, and a page of
// its pending tasks, due (view=due, the default) or delayed (view=delayed), read from the
// partition's own pending sets. The p parameter must be present; empty names the base partition.
func (h *handler) partition(w http.ResponseWriter, r *http.Request) {
	q, limit, offset, ok := h.offsetParams(w, r, inspect.MaxLimit-1)
	if !ok {
		return
	}
	v := r.URL.Query()
	ps, present := v["p"]
	if !present || len(ps) != 1 {
		h.fail(w, r, http.StatusBadRequest, "Name one partition with the p parameter (empty for the base partition).")
		return
	}
	key := partition.Key(ps[0])
	var delayed bool
	switch v.Get("view") {
	case "", "due":
	case "delayed":
		delayed = true
	default:
		h.fail(w, r, http.StatusBadRequest, "Show the due or the delayed tasks: view must be due or delayed.")
		return
	}
	info, err := h.in.Partition(r.Context(), q, key)
	if err != nil {
		h.failErr(w, r, "partition", err)
		return
	}
	// One more than the page, to know whether there is a next page.
	ask := limit + 1
	if offset+ask > inspect.MaxOffset {
		ask = limit
	}
	list, err := h.in.PartitionTasks(r.Context(), q, key, inspect.PartitionTaskQuery{Delayed: delayed,
		Page: inspect.Page{Offset: offset, Limit: ask}})
	if err != nil {
		h.failErr(w, r, "partition tasks", err)
		return
	}
	body := partitionView{Key: key, Info: info, Delayed: delayed, Offset: offset, Limit: limit,
		PrevOffset: max(offset-limit, 0), NextOffset: offset + limit, Now: list.ServerTime, List: list}
	if len(list.Tasks) > limit {
		body.More, body.List.Tasks = true, list.Tasks[:limit]
	}
	name := string(key)
	if name == "" {
		name = "(base)"
	}
	p := h.newPage(w, r, "Partition "+name+" · "+q, "partitions", q, body)
	p.Flash = h.flash(r)
	h.render(w, r, "partition", http.StatusOK, p)
}
