package history

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/srqueue/srq/partition"
)

// Kind is a kind of anomaly Check reports.
type Kind string

// The anomalies Check looks for.
const (
	// Lost: a publish was acknowledged, and no execution of the task completed.
	Lost Kind = "lost"
	// Unexpected: a task was executed that no acknowledged publish names.
	Unexpected Kind = "unexpected"
	// Duplicate: a task completed more than once, and no crash explains it (see Check).
	Duplicate Kind = "duplicate"
	// OutOfOrder: an execution of a task of an ordered partition started before a task its producer
	// published earlier to that partition had completed; in particular, completions out of publish
	// order.
	OutOfOrder Kind = "out-of-order"
	// Overlap: two executions of one ordered partition ran at the same time, one of them with a
	// valid lease.
	Overlap Kind = "overlap"
	// Expired: an execution started without a valid lease: its lease check (LeaseMiddleware) found
	// it past its deadline, or taken back, settled or delivered again.
	Expired Kind = "expired"
	// EarlyStep: an execution of a flow step started before every step it depends on had
	// completed.
	EarlyStep Kind = "early-step"
)

// kinds lists every Kind, in the order reports show them.
var kinds = []Kind{Lost, Unexpected, Duplicate, OutOfOrder, Overlap, Expired, EarlyStep}

// Anomaly is one thing wrong with a history.
type Anomaly struct {
	Kind      Kind
	ID        string // the task
	Partition string
	Detail    string
}

// String describes a in one line: kind, task, partition and what happened.
func (a Anomaly) String() string {
	return fmt.Sprintf("%s: task %q of partition %q: %s", a.Kind, a.ID, a.Partition, a.Detail)
}

// Report is what Check found.
type Report struct {
	Published   int // distinct task ids whose publish was acknowledged
	Executions  int // handler executions started
	Completed   int // published tasks that completed at least once
	Redelivered int // completions after the first that a crash explains: not anomalies
	Late        int // completions whose handler returned after its context ended
	// LeaseChecked counts the executions whose start has a lease check that answered (valid,
	// expired or gone; LeaseMiddleware): those Check can hold to their leases.
	LeaseChecked int
	Anomalies    []Anomaly
}

// Count returns how many anomalies of kind k r holds.
func (r *Report) Count(k Kind) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Kind == k {
			n++
		}
	}
	return n
}

// Err returns nil when r holds no anomaly except of the kinds in allow; otherwise an error that
// counts the anomalies by kind and lists the first 20.
func (r *Report) Err(allow ...Kind) error {
	var shown []string
	counts := map[Kind]int{}
	for _, a := range r.Anomalies {
		allowed := false
		for _, k := range allow {
			allowed = allowed || a.Kind == k
		}
		if allowed {
			continue
		}
		counts[a.Kind]++
		if len(shown) < 20 {
			shown = append(shown, "  "+a.String())
		}
	}
	if len(counts) == 0 {
		return nil
	}
	var head []string
	for _, k := range kinds {
		if counts[k] > 0 {
			head = append(head, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return fmt.Errorf("history: %s (%s)\n%s", strings.Join(head, ", "), r.summary(), strings.Join(shown, "\n"))
}

func (r *Report) summary() string {
	return fmt.Sprintf("%d published, %d completed, %d executions (%d with their lease checked), %d redelivered after a crash, %d late",
		r.Published, r.Completed, r.Executions, r.LeaseChecked, r.Redelivered, r.Late)
}

// String summarises r: its counts and the number of anomalies of each kind.
func (r *Report) String() string {
	s := r.summary()
	for _, k := range kinds {
		s += fmt.Sprintf(", %d %s", r.Count(k), k)
	}
	return s
}

type execution struct {
	key, id, part, process string
	start, end             int64 // end: math.MaxInt64 while unknown
	ended, ok, late        bool
	lease                  LeaseState // what the check at its start found
	left                   int64      // and how long the lease had left, ns
}

// completed says whether x counts as a completion of its task: its handler returned nil.
func (x *execution) completed() bool { return x.ended && x.ok }

// lapsed says whether x started without a valid lease, as its lease check found.
func (x *execution) lapsed() bool { return x.lease == LeaseExpired || x.lease == LeaseGone }

// fenced says whether x ran, at least in part, without a valid lease: it started so, or its
// context had ended (lease lost, shutdown) when it returned.
func (x *execution) fenced() bool { return x.late || x.lapsed() }

type published struct {
	id, part, producer string
	seq                int64
	after              []string // a flow step's parents (OpStep); nil for a task
	step               bool
}

// Check examines a history (the events of every process of one run, in any order) and reports
// its anomalies. How it counts:
//
//   - A completion is an execution whose handler returned nil. It is definite when the handler's
//     context was still live; late when the context had ended (lease lost, shutdown), since the
//     worker's ack of it may have been refused. A late completion keeps its task from being lost,
//     but never makes a duplicate or an overlap.
//   - Lost: a published task without any completion. A task that ended in the dead letters is lost.
//   - Unexpected: an execution of a task no publish names (even if it never completed).
//   - Duplicate: a second definite completion of a task, unless the process of the completion
//     before it crashed between that completion's end and this execution's start: then its ack
//     died with the process, re-delivery is what at-least-once promises, and it is counted in
//     Report.Redelivered instead.
//   - OutOfOrder (ordered partitions, keys starting with "!"): every execution of a task, completed
//     or not, must start after the first completion of every task the same producer published
//     earlier to the same partition.
//   - Overlap (ordered partitions): two executions of one partition whose intervals intersect,
//     one of them valid: neither late nor lapsed (started without a valid lease, below). An
//     execution counts from its start to its end; one with no end to the crash of its process, or
//     for ever when its process did not crash. Two valid executions must not intersect. A late one
//     (its context had ended when it returned) must not start while a valid one runs, but may run
//     on into one that started after it: srq fences a worker whose lease was taken back while its
//     handler ran, it cannot stop it. A lapsed one must not intersect a valid one at all.
//   - Expired: an execution whose start recorded a lease check (LeaseMiddleware) that found the
//     lease past its deadline or no longer the delivery's: it started without a valid lease. Such
//     an execution is lapsed. Report.LeaseChecked counts the executions whose start was checked.
//   - EarlyStep (flow steps, OpStep): every execution of a step must start after the first
//     completion of each step it depends on. A step's own publish order holds nothing: it enters
//     its partition when it is released.
//
// Each task id must be published once per history; a publish recorded twice counts once, at its
// first place.
func Check(events []Event) *Report {
	r := &Report{}
	pubs := map[string]*published{}
	var pubOrder []*published
	crashes := map[string][]int64{}
	execs := map[string]*execution{}
	var execOrder []*execution
	exec := func(e Event) *execution {
		x := execs[e.Exec]
		if x == nil {
			x = &execution{key: e.Exec, id: e.ID, part: e.Partition, process: e.Process, start: e.Time,
				end: math.MaxInt64}
			execs[e.Exec] = x
			execOrder = append(execOrder, x)
		}
		return x
	}
	for _, e := range events {
		switch e.Op {
		case OpPublish, OpStep:
			if pubs[e.ID] == nil {
				p := &published{id: e.ID, part: e.Partition, producer: e.Producer, seq: e.Seq, after: e.After,
					step: e.Op == OpStep}
				pubs[e.ID] = p
				pubOrder = append(pubOrder, p)
			}
		case OpCrash:
			crashes[e.Process] = append(crashes[e.Process], e.Time)
		case OpStart:
			x := exec(e)
			x.start, x.lease, x.left = e.Time, e.Lease, e.LeaseLeft
		case OpEnd:
			x := exec(e) // an end without a start counts as an instant execution
			x.ended, x.ok, x.late, x.end = true, e.OK, e.Late, e.Time
			if x.start > x.end {
				x.start = x.end
			}
		}
	}
	for _, ts := range crashes {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	}
	// crashedBetween says whether process crashed at a time in [from, to].
	crashedBetween := func(process string, from, to int64) bool {
		for _, t := range crashes[process] {
			if t >= from && t <= to {
				return true
			}
		}
		return false
	}
	// crashAfter is the first crash of process at or after t, or MaxInt64.
	crashAfter := func(process string, t int64) int64 {
		for _, c := range crashes[process] {
			if c >= t {
				return c
			}
		}
		return math.MaxInt64
	}

	r.Published = len(pubs)
	r.Executions = len(execOrder)
	byID := map[string][]*execution{}
	for _, x := range execOrder {
		byID[x.id] = append(byID[x.id], x)
	}
	firstDone := map[string]int64{}
	add := func(k Kind, id, part, format string, args ...any) {
		r.Anomalies = append(r.Anomalies, Anomaly{Kind: k, ID: id, Partition: part, Detail: fmt.Sprintf(format, args...)})
	}

	// Lost, unexpected, duplicates.
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		xs := byID[id]
		if pubs[id] == nil {
			add(Unexpected, id, xs[0].part, "executed %d times, never published", len(xs))
		}
		var definite []*execution
		for _, x := range xs {
			if !x.completed() {
				continue
			}
			if t, ok := firstDone[id]; !ok || x.end < t {
				firstDone[id] = x.end
			}
			if x.late {
				r.Late++
			} else {
				definite = append(definite, x)
			}
		}
		sort.Slice(definite, func(i, j int) bool { return definite[i].end < definite[j].end })
		for i := 1; i < len(definite); i++ {
			prev, x := definite[i-1], definite[i]
			if crashedBetween(prev.process, prev.end, x.start) {
				r.Redelivered++
				continue
			}
			add(Duplicate, id, x.part, "completed by %s (%s) and again by %s (%s), with no crash of %s between",
				prev.key, stamp(prev.end), x.key, stamp(x.end), prev.process)
		}
	}
	for _, p := range pubOrder {
		if _, ok := firstDone[p.id]; ok {
			r.Completed++
		} else {
			add(Lost, p.id, p.part, "published by %s (#%d), never completed (%d executions)", p.producer, p.seq, len(byID[p.id]))
		}
	}

	// Starts without a valid lease.
	for _, x := range execOrder {
		switch x.lease {
		case LeaseValid:
			r.LeaseChecked++
		case LeaseExpired:
			r.LeaseChecked++
			add(Expired, x.id, x.part, "execution %s started at %s, %v past its lease's deadline by the server's clock",
				x.key, stamp(x.start), time.Duration(-x.left))
		case LeaseGone:
			r.LeaseChecked++
			add(Expired, x.id, x.part, "execution %s started at %s, its lease taken back, settled or delivered again",
				x.key, stamp(x.start))
		}
	}

	// Order: per producer and ordered partition, in publish order.
	type stream struct{ producer, part string }
	streams := map[stream][]*published{}
	for _, p := range pubOrder {
		if partition.Key(p.part).IsOrdered() && !p.step {
			s := stream{p.producer, p.part}
			streams[s] = append(streams[s], p)
		}
	}
	for _, ps := range streams {
		sort.Slice(ps, func(i, j int) bool { return ps[i].seq < ps[j].seq })
		var need int64 = math.MinInt64 // every earlier task completed by then
		blocker := ""                  // the earlier task that completed last, or never
		for _, p := range ps {
			for _, x := range byID[p.id] {
				if x.start < need {
					if need == math.MaxInt64 {
						add(OutOfOrder, p.id, p.part, "execution %s (#%d of %s) started at %s; earlier task %q never completed",
							x.key, p.seq, p.producer, stamp(x.start), blocker)
					} else {
						add(OutOfOrder, p.id, p.part, "execution %s (#%d of %s) started at %s, before earlier task %q completed at %s",
							x.key, p.seq, p.producer, stamp(x.start), blocker, stamp(need))
					}
				}
			}
			if t, ok := firstDone[p.id]; !ok {
				if need != math.MaxInt64 {
					need, blocker = math.MaxInt64, p.id
				}
			} else if t > need {
				need, blocker = t, p.id
			}
		}
	}

	// Flow steps: every execution starts after a completion of each step it depends on.
	for _, p := range pubOrder {
		for _, parent := range p.after {
			done, ok := firstDone[parent]
			for _, x := range byID[p.id] {
				switch {
				case !ok:
					add(EarlyStep, p.id, p.part, "execution %s started at %s; its parent %q never completed", x.key, stamp(x.start), parent)
				case x.start < done:
					add(EarlyStep, p.id, p.part, "execution %s started at %s, before its parent %q completed at %s",
						x.key, stamp(x.start), parent, stamp(done))
				}
			}
		}
	}

	// Overlaps, per ordered partition: between valid executions, then of fenced ones with valid ones.
	spans := map[string][]*execution{}
	var fenced []*execution
	for _, x := range execOrder {
		if !partition.Key(x.part).IsOrdered() {
			continue
		}
		if !x.ended {
			x.end = crashAfter(x.process, x.start)
		}
		if x.fenced() {
			fenced = append(fenced, x)
			continue
		}
		spans[x.part] = append(spans[x.part], x)
	}
	parts := make([]string, 0, len(spans))
	for p := range spans {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	for _, p := range parts {
		xs := spans[p]
		sort.Slice(xs, func(i, j int) bool { return xs[i].start < xs[j].start })
		var last *execution // the execution reaching furthest so far
		for _, x := range xs {
			if last != nil && x.start < last.end {
				add(Overlap, x.id, p, "execution %s of %q started at %s while execution %s of %q ran (until %s)",
					x.key, x.id, stamp(x.start), last.key, last.id, stamp(last.end))
			}
			if last == nil || x.end > last.end {
				last = x
			}
		}
	}
	for _, x := range fenced {
		for _, v := range spans[x.part] {
			if x.start >= v.start && x.start < v.end {
				add(Overlap, x.id, x.part, "execution %s of %q (fenced) started at %s while execution %s of %q ran with a valid lease (%s until %s)",
					x.key, x.id, stamp(x.start), v.key, v.id, stamp(v.start), stamp(v.end))
				break
			}
			if x.lapsed() && x.start < v.end && v.start < x.end {
				add(Overlap, x.id, x.part, "execution %s of %q, started without a valid lease at %s, ran until %s while execution %s of %q ran with one (%s until %s)",
					x.key, x.id, stamp(x.start), stamp(x.end), v.key, v.id, stamp(v.start), stamp(v.end))
				break
			}
		}
	}
	return r
}

func stamp(ns int64) string {
	if ns == math.MaxInt64 {
		return "never"
	}
	return time.Unix(0, ns).Format("15:04:05.000000")
}
