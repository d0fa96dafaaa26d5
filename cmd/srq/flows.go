package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// The commands of flows, cancellation and events: flow, flows, cancel, events.

// flowCommands are the commands of this file, by name, for dispatch.
func (c *cli) flowCommands() map[string]func([]string) error {
	return map[string]func([]string) error{"flow": c.flow, "flows": c.flows, "cancel": c.cancel, "events": c.events}
}

// CancelJSON is what `srq cancel --json` prints.
type CancelJSON struct {
	Action  string `json:"action"` // "cancel"
	ID      string `json:"id"`
	Shard   int    `json:"shard"`
	Running bool   `json:"running"` // the task was leased: its worker cancels its handler
}

func (c *cli) flow(args []string) error {
	fs := c.flags("flow")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("flow needs exactly one flow id")
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	f, err := c.in.Flow(c.ctx, c.opts.queue, pos[0])
	if err != nil {
		return c.explainFlow(err)
	}
	if c.opts.json {
		return c.emitJSON(f)
	}
	return printFlow(c.stdout, f)
}

// explainFlow adds what to do to an error of Flow: a flow lives with its first step's queue.
func (c *cli) explainFlow(err error) error {
	if errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrQueueNotFound) {
		return fmt.Errorf("%w\nA flow is kept by the queue of its first step: check --queue; 'srq flows' lists the queue's flows", err)
	}
	return c.explain(err)
}

func (c *cli) flows(args []string) error {
	fs := c.flags("flows")
	ended := fs.Bool("ended", false, "list the ended flows (kept for their retention) instead of the running ones")
	offset := fs.Int("offset", 0, "flows to skip")
	var limit int
	limitFlag(fs, &limit, inspect.DefaultPageLimit, "flows")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("flows takes no arguments"))
	}
	if err := checkLimit(limit); err != nil {
		return err
	}
	if *offset < 0 || *offset > inspect.MaxOffset-limit {
		return usagef("--offset %d is outside [0, %d]", *offset, inspect.MaxOffset-limit)
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	page, err := c.in.Flows(c.ctx, c.opts.queue, inspect.FlowQuery{Ended: *ended, Page: inspect.Page{Offset: *offset, Limit: limit}})
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(page)
	}
	next := ""
	if int64(*offset+len(page.Flows)) < page.Total && len(page.Flows) == limit && *offset+2*limit <= inspect.MaxOffset {
		next = c.again(fs, map[string]string{"offset": strconv.Itoa(*offset + limit), "limit": strconv.Itoa(limit)})
	}
	return printFlows(c.stdout, page, *ended, next)
}

func (c *cli) cancel(args []string) error {
	fs := c.flags("cancel")
	reason := fs.String("reason", inspect.DefaultCancelReason, "why, recorded as the task's error")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("cancel needs exactly one task id")
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	id := pos[0]
	if err := c.confirm(fmt.Sprintf("Cancel task %s of queue %s: it will not run, or its running handler is cancelled",
		strconv.Quote(id), strconv.Quote(c.opts.queue))); err != nil {
		return err
	}
	res, err := c.in.Cancel(c.ctx, c.opts.queue, id, *reason)
	if err != nil {
		if errors.Is(err, engine.ErrFinished) {
			return fmt.Errorf("%w\nIt ended already: a dead letter is purged with 'srq dead purge <id>'", err)
		}
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(CancelJSON{Action: "cancel", ID: id, Shard: res.Shard, Running: res.Running})
	}
	if res.Running {
		fmt.Fprintf(c.stdout, "task %s of queue %s is running: marked; its worker cancels the handler at its next lease extension\n",
			show(strconv.Quote(id)), show(strconv.Quote(c.opts.queue)))
		return nil
	}
	fmt.Fprintf(c.stdout, "cancelled task %s of queue %s\n", show(strconv.Quote(id)), show(strconv.Quote(c.opts.queue)))
	return nil
}

// followWait is how long one read of events --follow waits in Redis.
const followWait = time.Second

func (c *cli) events(args []string) error {
	fs := c.flags("events")
	follow := fs.Bool("follow", false, "keep printing events as they come, until interrupted")
	from := fs.String("from", "", "print the events after this position (a 'next' or an event's position; 0: the oldest kept; now: none before)")
	limit := fs.Int("limit", 20, fmt.Sprintf("without --from, the newest events to print first; with it, the most per page (1 to %d)", inspect.MaxLimit))
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("events takes no arguments"))
	}
	if err := checkLimit(*limit); err != nil {
		return err
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	// On a sharded queue every line names its event's shard, shard 0 included. An unknown queue
	// is left to Events, which says so.
	sharded := false
	if n, err := engine.QueueShards(c.ctx, c.client, c.opts.prefix, c.opts.queue); err == nil {
		sharded = n > 1
	} else if !errors.Is(err, engine.ErrNotFound) {
		return c.explain(err)
	}
	q := inspect.EventQuery{Limit: *limit, Last: *from == ""}
	switch *from {
	case "0":
		q.After = inspect.EventsFromOldest
	case "now":
		q.After = inspect.EventsFromNow
	default:
		q.After = *from
	}
	noted := false
	for {
		page, err := c.in.Events(c.ctx, c.opts.queue, q)
		if err != nil {
			if c.ctx.Err() != nil {
				return c.stopFollowing(fs, q.After)
			}
			return c.explain(err)
		}
		if !page.Stream && !noted {
			fmt.Fprintf(c.stderr, "srq: queue %s keeps no event stream (set QueueConfig.Events): no event is written\n",
				show(strconv.Quote(c.opts.queue)))
			noted = true
		}
		for _, ev := range page.Events {
			if err := c.printEvent(ev, sharded); err != nil {
				return err
			}
		}
		q.After, q.Last = page.Next, false
		switch {
		case *follow && c.ctx.Err() != nil:
			return c.stopFollowing(fs, q.After)
		case *follow:
			q.Limit, q.Wait = inspect.MaxLimit, followWait
		case *from != "" && len(page.Events) == *limit && !c.opts.json:
			return printNext(c.stdout, c.again(fs, map[string]string{"from": page.Next}))
		default:
			return nil
		}
	}
}

// stopFollowing ends events --follow on an interrupt, a normal end, saying on stderr how to go on
// from where it stopped.
func (c *cli) stopFollowing(fs *flag.FlagSet, after string) error {
	if after != "" && after != inspect.EventsFromNow {
		fmt.Fprintf(c.stderr, "srq: stopped; to go on from here: %s\n", c.again(fs, map[string]string{"from": after}))
	}
	return nil
}

// printEvent writes one event as a line: JSON with --json, else its time, kind, id and details,
// its shard among them when sharded (the queue has more than one).
func (c *cli) printEvent(ev inspect.Event, sharded bool) error {
	if c.opts.json {
		return c.emitJSONLine(ev)
	}
	_, err := fmt.Fprintln(c.stdout, eventLine(ev, sharded))
	return err
}

// eventLine is an event as events prints it: time (ms, UTC), kind, id, then the details it has,
// and shard= when sharded.
func eventLine(ev inspect.Event, sharded bool) string {
	parts := []string{ev.Time.UTC().Format("2006-01-02T15:04:05.000Z"), fmt.Sprintf("%-14s", show(ev.Kind)), show(ev.ID)}
	if ev.Partition != "" {
		parts = append(parts, "partition="+partName(ev.Partition))
	}
	if ev.Step != "" {
		parts = append(parts, "step="+show(ev.Step))
	}
	if ev.DelayMS > 0 {
		parts = append(parts, "delay="+(time.Duration(ev.DelayMS)*time.Millisecond).String())
	}
	if ev.Wait != "" {
		parts = append(parts, "wait="+show(ev.Wait))
	}
	if ev.Signal != "" {
		parts = append(parts, "signal="+strconv.Quote(oneLine(ev.Signal, 200)))
	}
	if ev.Progress != "" {
		parts = append(parts, "progress="+escapeText(oneLine(string(ev.Progress), 200)))
	}
	if sharded {
		parts = append(parts, "shard="+strconv.Itoa(ev.Shard))
	}
	if ev.Error != "" {
		parts = append(parts, "error="+strconv.Quote(oneLine(ev.Error, 200)))
	}
	return strings.Join(parts, "  ")
}

// printFlow writes a flow: its summary, then its steps by level (the DAG's columns), each with
// its parents and their policies, result and error.
func printFlow(w io.Writer, f inspect.Flow) error {
	rows := [][]string{
		{"flow", f.ID},
		{"queue", fmt.Sprintf("%s (shard %d)", f.Queue, f.Shard)},
		{"state", f.State},
		{"created", ts(f.Created)},
		{"ended", ts(f.Ended)},
		{"expires", ts(f.Expires)},
		{"steps", fmt.Sprintf("%d: %d succeeded, %d failed or cancelled (%d for good)", len(f.Steps), f.Succeeded, f.Failed, f.FailedForGood)},
	}
	if err := table(w, rows); err != nil {
		return err
	}
	fmt.Fprintln(w)
	steps := slices.Clone(f.Steps)
	slices.SortStableFunc(steps, func(a, b inspect.FlowStep) int { return cmp.Compare(a.Level, b.Level) })
	srows := [][]string{{"LEVEL", "STEP", "QUEUE", "SHARD", "STATE", "AFTER", "RESULT", "ENDED", "ERROR"}}
	for _, s := range steps {
		var after []string
		for _, e := range s.Parents {
			p := e.Parent
			if e.Policy != engine.FailDependents.String() {
				p += " (" + e.Policy + ")"
			}
			after = append(after, p)
		}
		result := "-"
		if s.ResultBytes > 0 {
			result = fmt.Sprintf("%d B", s.ResultBytes)
		}
		srows = append(srows, []string{strconv.Itoa(s.Level), s.Name, s.Queue, strconv.Itoa(s.Shard), s.State,
			cmpStr(strings.Join(after, ", "), "-"), result, ts(s.Ended), cmpStr(oneLine(s.Error, 60), "-")})
	}
	return table(w, srows)
}

// printFlows writes a page of flows, and next, the command for the next page, unless empty.
func printFlows(w io.Writer, p inspect.FlowPage, ended bool, next string) error {
	which := "running"
	if ended {
		which = "ended"
	}
	if len(p.Flows) == 0 {
		_, err := fmt.Fprintf(w, "no %s flows on this page (%d in the queue)\n", which, p.Total)
		return err
	}
	rows := [][]string{{"FLOW", "SHARD", "STATE", "STEPS", "SUCCEEDED", "FAILED", "CREATED", "ENDED"}}
	for _, f := range p.Flows {
		rows = append(rows, []string{f.ID, strconv.Itoa(f.Shard), f.State, strconv.Itoa(f.Steps), strconv.Itoa(f.Succeeded),
			strconv.Itoa(f.Failed), ts(f.Created), ts(f.Ended)})
	}
	if err := table(w, rows); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d %s flow%s in the queue\n", p.Total, which, plural(int(p.Total)))
	return printNext(w, next)
}
