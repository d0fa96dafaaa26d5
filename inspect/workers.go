package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/srqueue/srq/engine"
)

// Worker is a consumer of a queue, with the record a running srq.Worker keeps of itself
// (engine.WorkerRecord), as Workers lists it.
type Worker struct {
	Consumer string `json:"consumer"`
	// LastSeen is its last fetch or lease extension on any shard, server clock; Live says it is
	// within engine.ConsumerLive (30s) of the server's clock, as for Stats.Consumers.
	LastSeen time.Time `json:"last_seen"`
	Live     bool      `json:"live"`
	// Known says the consumer has a record: an srq.Worker that runs, or stopped without removing
	// it and was seen within the last hour. The fields below are set only then. A consumer without
	// one is a caller of package engine, a worker's RunOnce, or a worker that has stopped.
	Known       bool     `json:"known"`
	Host        string   `json:"host"`
	PID         int      `json:"pid"`
	Queues      []string `json:"queues"` // every queue the worker serves
	Concurrency int      `json:"concurrency"`
	// Running counts its handlers running when it last wrote its record (it does when the count
	// changes, at most once per a third of its lease, and every few minutes).
	Running int `json:"running"`
	// Batches counts its batch handlers running then (each counted in Running too), and BatchTasks
	// the tasks in them.
	Batches    int `json:"batches"`
	BatchTasks int `json:"batch_tasks"`
	// Started is when its Run started, and Updated when it last wrote its record, on its own clock.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
}

// Workers lists the consumers of queue seen in the last hour (at most 100 per shard, most
// recently seen first, each once over the shards), with the record each running srq.Worker keeps
// of itself, and returns the server's clock. It costs per shard the overview's round trip and one
// MGET of the consumers' records: O(consumers). It fails with engine.ErrNotFound for an unknown
// queue, with engine.ErrInvalid for a bad name, and with Redis's error.
func (in *Inspector) Workers(ctx context.Context, queue string) ([]Worker, time.Time, error) {
	engs, err := in.shards(ctx, queue)
	if err != nil {
		return nil, time.Time{}, err
	}
	ovs := make([]engine.Overview, len(engs))
	recs := make([][]*engine.WorkerRecord, len(engs))
	err = each(ctx, engs, func(ctx context.Context, i int, e *engine.Engine) error {
		var err error
		if ovs[i], err = e.Overview(ctx, consumersPerShard); err != nil {
			return err
		}
		ids := make([]string, len(ovs[i].Consumers))
		for j, c := range ovs[i].Consumers {
			ids[j] = c.ID
		}
		recs[i], err = e.Workers(ctx, ids)
		return err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("inspect: workers of %q: %w", queue, err)
	}
	var now time.Time
	byID := map[string]*Worker{}
	var out []*Worker
	for i, o := range ovs {
		if o.ServerTime.After(now) {
			now = o.ServerTime
		}
		for j, c := range o.Consumers {
			w := byID[c.ID]
			if w == nil {
				w = &Worker{Consumer: c.ID}
				byID[c.ID] = w
				out = append(out, w)
			}
			if c.LastSeen.After(w.LastSeen) {
				w.LastSeen = c.LastSeen
				w.Live = o.ServerTime.Sub(c.LastSeen) <= engine.ConsumerLive
			}
			if r := recs[i][j]; r != nil && (!w.Known || r.Updated.After(w.Updated)) {
				w.Known, w.Host, w.PID, w.Queues, w.Concurrency = true, r.Host, r.PID, r.Queues, r.Concurrency
				w.Running, w.Started, w.Updated = r.Running, r.Started, r.Updated
				w.Batches, w.BatchTasks = r.Batches, r.BatchTasks
			}
		}
	}
	slices.SortFunc(out, func(a, b *Worker) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.Consumer, b.Consumer))
	})
	list := make([]Worker, len(out))
	for i, w := range out {
		list[i] = *w
	}
	return list, now, nil
}
