package main

import (
	"fmt"
	"io"

	"github.com/srqueue/srq/inspect"
)

// StatsSummaryJSON is one element of `srq stats --json` without --queue: one registered queue's
// state and sizes.
type StatsSummaryJSON struct {
	Queue  string `json:"queue"`
	Shards int    `json:"shards"`
	// State is "running" (a live consumer), "paused", "no live worker", or "error".
	State         string `json:"state"`
	Pending       int64  `json:"pending"`
	InFlight      int64  `json:"in_flight"`
	Dead          int64  `json:"dead"`
	LiveConsumers int64  `json:"live_consumers"`
	Published     int64  `json:"published"`
	Acked         int64  `json:"acked"`
	// Error says why the queue's stats could not be read (State is then "error").
	Error string `json:"error,omitempty"`
}

// queueState is the state the dashboard and the summary give a queue: paused, running while a
// consumer is live, else no live worker.
func queueState(s inspect.Stats) string {
	switch {
	case s.Paused:
		return "paused"
	case s.LiveConsumers > 0:
		return "running"
	}
	return "no live worker"
}

// statsSummary prints one line per registered queue: `srq stats` without --queue. A queue whose
// stats cannot be read (an unusable shard count) is listed with the error; the others as usual.
// It costs one registry read and two round trips per shard of each queue.
func (c *cli) statsSummary() error {
	if err := c.connect(); err != nil {
		return err
	}
	qs, err := c.in.Queues(c.ctx)
	if err != nil {
		return err
	}
	out := make([]StatsSummaryJSON, len(qs))
	for i, q := range qs {
		out[i] = StatsSummaryJSON{Queue: q.Name, Shards: q.Shards, State: "error"}
		if q.Err != nil {
			out[i].Error = message(q.Err)
			continue
		}
		s, err := c.in.Stats(c.ctx, q.Name)
		if err != nil {
			out[i].Error = message(err)
			continue
		}
		out[i] = StatsSummaryJSON{Queue: q.Name, Shards: s.Shards, State: queueState(s), Pending: s.Pending,
			InFlight: s.InFlight, Dead: s.Dead, LiveConsumers: s.LiveConsumers, Published: s.Published, Acked: s.Acked}
	}
	if c.opts.json {
		return c.emitJSON(out)
	}
	return printStatsSummary(c.stdout, out)
}

func printStatsSummary(w io.Writer, qs []StatsSummaryJSON) error {
	if len(qs) == 0 {
		_, err := fmt.Fprintln(w, "no registered queues (queues register when they first publish or a worker starts)")
		return err
	}
	rows := [][]string{{"QUEUE", "SHARDS", "STATE", "PENDING", "IN FLIGHT", "DEAD", "LIVE CONSUMERS", "PUBLISHED", "ACKED"}}
	for _, q := range qs {
		if q.Error != "" {
			rows = append(rows, []string{q.Queue, "?", "error: " + oneLine(q.Error, 50), "-", "-", "-", "-", "-", "-"})
			continue
		}
		rows = append(rows, []string{q.Queue, fmt.Sprint(q.Shards), q.State, fmt.Sprint(q.Pending), fmt.Sprint(q.InFlight),
			fmt.Sprint(q.Dead), fmt.Sprint(q.LiveConsumers), fmt.Sprint(q.Published), fmt.Sprint(q.Acked)})
	}
	if err := table(w, rows); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "srq --queue NAME stats shows one queue in full")
	return err
}
