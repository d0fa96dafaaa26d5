package inspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srqueue/srq/engine"
)

// FlowQuery selects the flows Flows lists: those whose home is the queue (their first step's).
type FlowQuery struct {
	// Ended lists the flows whose steps all ended, kept for their retention, most recently ended
	// first (by the end of their retention, so for flows of one Keep). Default: the running ones,
	// newest first (a failed flow is running while some of its steps still run).
	Ended bool
	Page
}

// FlowSummary is one flow of a list.
type FlowSummary struct {
	ID    string `json:"id"`
	Shard int    `json:"shard"` // the shard of the queue that is the flow's home
	// State is running, completed, failed or publishing (see srq.FlowInfo).
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	Ended   time.Time `json:"ended"` // zero while running
	// Expires is when an ended flow is forgotten; zero while running.
	Expires time.Time `json:"expires"`
	// Steps counts its steps; Succeeded those that succeeded, Failed those that failed or were
	// cancelled.
	Steps     int `json:"steps"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
}

// FlowPage is one page of flows.
type FlowPage struct {
	Flows []FlowSummary `json:"flows"`
	// Total counts the flows of the list (running or ended) over every shard.
	Total int64 `json:"total"`
}

// Flows returns one page of the flows whose home is queue, running or ended as q asks, merged
// over the shards. It reads the flow indexes the scripts keep (never a scan): the cost is
// O(shards · (log n + offset + limit)), two round trips per shard. It fails with
// engine.ErrInvalid for a negative offset, a limit above MaxLimit or an offset+limit above
// MaxOffset, with engine.ErrNotFound for an unknown queue, and with Redis's error.
func (in *Inspector) Flows(ctx context.Context, queue string, q FlowQuery) (FlowPage, error) {
	limit := cmp.Or(q.Limit, DefaultPageLimit)
	if q.Offset < 0 || limit < 1 || limit > MaxLimit || q.Offset > MaxOffset-limit {
		return FlowPage{}, fmt.Errorf("inspect: %w: flow page offset %d limit %d (limit at most %d, offset+limit at most %d)",
			engine.ErrInvalid, q.Offset, limit, MaxLimit, MaxOffset)
	}
	list := engine.FlowsRunning
	if q.Ended {
		list = engine.FlowsEnded
	}
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return FlowPage{}, err
	}
	offset, count := q.Offset, limit
	if len(engs) > 1 {
		offset, count = 0, q.Offset+limit
	}
	per := make([][]FlowSummary, len(engs))
	totals := make([]int64, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		fs, total, err := e.FlowsPage(ctx, list, offset, count)
		totals[i] = total
		for _, f := range fs {
			s := FlowSummary{ID: f.ID, Shard: i, State: string(f.State), Created: f.Created, Ended: f.Ended,
				Steps: f.Steps, Succeeded: f.Succeeded, Failed: f.Failed}
			if !f.Ended.IsZero() {
				s.Expires = f.Ended.Add(f.Keep)
			}
			per[i] = append(per[i], s)
		}
		return err
	})
	if err != nil {
		return FlowPage{}, fmt.Errorf("inspect: flows of %q: %w", queue, err)
	}
	page := FlowPage{Flows: slices.Concat(per...)}
	if page.Flows == nil {
		page.Flows = []FlowSummary{} // an empty page, not null, in JSON
	}
	for _, t := range totals {
		page.Total += t
	}
	if len(engs) > 1 {
		// Each index's order: running by creation, ended by the end of the retention, newest first.
		slices.SortStableFunc(page.Flows, func(a, b FlowSummary) int {
			if q.Ended {
				return cmp.Or(b.Expires.Compare(a.Expires), cmp.Compare(a.Shard, b.Shard))
			}
			return cmp.Or(b.Created.Compare(a.Created), cmp.Compare(a.Shard, b.Shard))
		})
		page.Flows = page.Flows[min(len(page.Flows), q.Offset):min(len(page.Flows), q.Offset+limit)]
	}
	if page.Flows == nil {
		page.Flows = []FlowSummary{}
	}
	return page, nil
}

// Flow is one flow with every step, as Flow reads it.
type Flow struct {
	ID    string `json:"id"`
	Queue string `json:"queue"` // its home: the queue of its first step
	Shard int    `json:"shard"` // the home's shard
	// State is running, completed, failed or publishing (see srq.FlowInfo).
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	Ended   time.Time `json:"ended"`   // zero while running
	Expires time.Time `json:"expires"` // when an ended flow is forgotten; zero while running
	// Succeeded counts the steps that succeeded, Failed those that failed or were cancelled, and
	// FailedForGood those of them whose dead letter is gone or that were cancelled for good.
	Succeeded     int `json:"succeeded"`
	Failed        int `json:"failed"`
	FailedForGood int `json:"failed_for_good"`
	// Steps are the flow's steps in the order they were defined.
	Steps []FlowStep `json:"steps"`
}

// FlowStep is one step of a Flow.
type FlowStep struct {
	Name  string `json:"name"`
	Queue string `json:"queue"` // the step's queue
	Shard int    `json:"shard"` // the shard of that queue that holds its task
	ID    string `json:"id"`    // the step's task id: "<flow id>/<name>"
	// State is waiting (for its parents), pending, leased, succeeded, dead or cancelled.
	State string `json:"state"`
	// Parents are the steps it depends on, each with its failure policy.
	Parents []FlowEdge `json:"parents"`
	// Level is the length of the longest path from a step without parents to this one: the
	// column a drawing of the DAG puts it in.
	Level int       `json:"level"`
	Ended time.Time `json:"ended"` // zero while it has not ended
	// ResultBytes is the length of its result, 0 for none.
	ResultBytes int `json:"result_bytes"`
	// Error is why it failed or was cancelled.
	Error string `json:"error"`
}

// FlowEdge is one dependency of a step.
type FlowEdge struct {
	Parent string `json:"parent"`
	// Policy is what the step does when the parent fails: fail, continue or ignore
	// (srq.FailDependents, ContinueDependents, IgnoreFailure).
	Policy string `json:"policy"`
}

// Flow reads flow id, whose home is queue (the queue of its first step), with every step's state,
// result length and error, asking each shard of queue for it (a flow's home is one shard). It
// costs a round trip per shard, and at the home one per queue or shard its steps live in (per
// 1,000 steps). It fails with engine.ErrNotFound when no shard has the flow (never published, past
// its retention, or published with another first queue) or the queue is unknown, with
// engine.ErrInvalid for an invalid id, and with Redis's error.
func (in *Inspector) Flow(ctx context.Context, queue, id string) (Flow, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return Flow{}, err
	}
	found := make([]*engine.FlowInfo, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		f, err := e.Flow(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		if err == nil {
			found[i] = &f
		}
		return err
	})
	if err != nil {
		return Flow{}, fmt.Errorf("inspect: flow %q of %q: %w", id, queue, err)
	}
	for i, f := range found {
		if f != nil {
			return flowOf(*f, queue, i), nil
		}
	}
	return Flow{}, fmt.Errorf("inspect: %w: no flow %q whose first step is in queue %q (flows ended past their retention are gone)",
		engine.ErrNotFound, id, queue)
}

// flowOf turns the engine's FlowInfo of a flow whose home is shard home of queue into a Flow.
func flowOf(f engine.FlowInfo, queue string, home int) Flow {
	out := Flow{ID: f.ID, Queue: queue, Shard: home, State: string(f.State), Created: f.Created, Ended: f.Ended,
		Succeeded: f.Succeeded, Failed: f.Failed, FailedForGood: f.FailedForGood, Steps: make([]FlowStep, len(f.Steps))}
	if !f.Ended.IsZero() {
		out.Expires = f.Ended.Add(f.Keep)
	}
	for i, s := range f.Steps {
		q, shard := splitShardQueue(s.Queue)
		st := FlowStep{Name: s.Name, Queue: q, Shard: shard, ID: s.ID, State: string(s.State), Ended: s.Ended,
			ResultBytes: s.ResultLen, Error: s.Error, Parents: make([]FlowEdge, len(s.After))}
		for j, e := range s.After {
			st.Parents[j] = FlowEdge{Parent: e.Parent, Policy: e.Policy.String()}
		}
		out.Steps[i] = st
	}
	setLevels(out.Steps)
	return out
}

// setLevels sets each step's Level, the length of the longest path to it from a step without
// parents, in O(steps + edges): the steps form a DAG (PublishFlow refused cycles).
func setLevels(steps []FlowStep) {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.Name] = i
	}
	waits := make([]int, len(steps))
	kids := make([][]int, len(steps))
	var ready []int
	for i, s := range steps {
		for _, e := range s.Parents {
			if j, ok := index[e.Parent]; ok {
				kids[j] = append(kids[j], i)
				waits[i]++
			}
		}
		if waits[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		for _, k := range kids[i] {
			steps[k].Level = max(steps[k].Level, steps[i].Level+1)
			if waits[k]--; waits[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
}

// splitShardQueue returns the queue and shard of an engine queue name: "orders#3.17" is shard 3
// of "orders" (engine.ShardQueue); a name without the separator is shard 0 of itself.
func splitShardQueue(name string) (string, int) {
	q, rest, ok := strings.Cut(name, engine.ShardSeparator)
	if !ok {
		return name, 0
	}
	n, _, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(n)
	if err != nil {
		return name, 0
	}
	return q, i
}
