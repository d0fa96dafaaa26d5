package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// The JSON schema of --json (docs/cli.md). stats, partitions, inflight and dead list print the
// inspect package's types (inspect.Stats, []inspect.Partition, []inspect.InFlightTask,
// inspect.DeadPage) with their json tags; the types below are the CLI's own.

// QueueJSON is one element of `srq queues --json`.
type QueueJSON struct {
	Name   string `json:"name"`
	Shards int    `json:"shards"`
	// Error says why the queue's stored shard count is unusable (Shards is then 0).
	Error string `json:"error,omitempty"`
}

// ActionJSON is what requeue, purge, pause and resume print with --json.
type ActionJSON struct {
	Action string `json:"action"` // requeue, purge, pause or resume
	Count  int    `json:"count"`  // letters requeued or purged; 1 for pause and resume
}

// TaskJSON is `srq task --json`.
type TaskJSON struct {
	ID            string            `json:"id"`
	Shard         int               `json:"shard"`
	State         string            `json:"state"` // pending, leased, dead, waiting or cancelled
	Partition     string            `json:"partition"`
	Priority      int               `json:"priority"`
	Attempts      int               `json:"attempts"`
	MaxAttempts   int               `json:"max_attempts"`
	Crashes       int               `json:"crashes"`
	EnqueuedAt    time.Time         `json:"enqueued_at"`
	AvailableAt   time.Time         `json:"available_at"`
	LastError     string            `json:"last_error"`
	Consumer      string            `json:"consumer"`       // when leased
	LeaseDeadline *time.Time        `json:"lease_deadline"` // when leased, else null
	Headers       map[string]string `json:"headers"`
	Payload       []byte            `json:"payload"` // base64
	// Errors are the errors of its last failed deliveries, oldest first (engine.MaxAttemptErrors).
	Errors []AttemptErrorJSON `json:"errors"`
	// Wait is what the task waits for while it waits; null otherwise.
	Wait *inspect.TaskWait `json:"wait"`
	// Children are the children it spawned, by name; empty for none.
	Children []inspect.TaskChild `json:"children"`
	// Parent is the id of the task that spawned it, in ParentQueue; "" for none.
	Parent      string `json:"parent"`
	ParentQueue string `json:"parent_queue"`
	// Flow is the id of the flow it is a step of, kept by FlowQueue; "" for none.
	Flow      string `json:"flow"`
	FlowQueue string `json:"flow_queue"`
	// Progress is the last progress it reported, as its queue's codec encoded it (base64); null
	// for none.
	Progress []byte `json:"progress"`
	// KeptState says it keeps a state for its next run, of KeptStateBytes bytes.
	KeptState      bool `json:"kept_state"`
	KeptStateBytes int  `json:"kept_state_bytes"`
	// Debounce is the key and mode ("debounce" or "throttle") of a task a debounced publish added;
	// null for others.
	Debounce *engine.DebounceInfo `json:"debounce"`
}

// AttemptErrorJSON is the error of one failed delivery of a task.
type AttemptErrorJSON struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

// WatchJSON is one line of `srq watch --json`: the stats and the rates since the previous line.
type WatchJSON struct {
	Stats inspect.Stats `json:"stats"`
	Rates *Rates        `json:"rates"` // null on the first line
}

// Rates are per-second rates from two readings of the counters.
type Rates struct {
	Published    float64 `json:"published"`
	Acked        float64 `json:"acked"`
	Rejected     float64 `json:"rejected"`
	DeadLettered float64 `json:"dead_lettered"`
	Recovered    float64 `json:"recovered"`
}

func taskJSON(t inspect.Task) TaskJSON {
	out := TaskJSON{ID: t.ID, Shard: t.Shard, State: string(t.State), Partition: string(t.Partition), Priority: t.Priority,
		Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, Crashes: t.Crashes, EnqueuedAt: t.EnqueuedAt,
		AvailableAt: t.AvailableAt, LastError: t.LastError, Consumer: t.Consumer, Headers: t.Headers, Payload: t.Payload,
		Debounce: t.Debounce}
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if out.Payload == nil {
		out.Payload = []byte{}
	}
	out.Errors = make([]AttemptErrorJSON, len(t.Errors))
	for i, e := range t.Errors {
		out.Errors[i] = AttemptErrorJSON{Attempt: e.Attempt, At: e.At, Error: e.Error}
	}
	if !t.LeaseEnds.IsZero() {
		d := t.LeaseEnds
		out.LeaseDeadline = &d
	}
	out.Wait, out.Children = t.Wait, t.Children
	if out.Children == nil {
		out.Children = []inspect.TaskChild{}
	}
	out.Parent, out.ParentQueue, out.Flow, out.FlowQueue = t.Parent, t.ParentQueue, t.Flow, t.FlowQueue
	out.Progress = t.Progress
	out.KeptState, out.KeptStateBytes = t.KeptState != nil, len(t.KeptState)
	return out
}

// rates computes per-second rates between two readings.
func rates(prev, cur inspect.Stats) *Rates {
	secs := cur.ServerTime.Sub(prev.ServerTime).Seconds()
	if secs <= 0 {
		return &Rates{}
	}
	r := func(a, b int64) float64 { return float64(b-a) / secs }
	return &Rates{Published: r(prev.Published, cur.Published), Acked: r(prev.Acked, cur.Acked),
		Rejected: r(prev.Rejected, cur.Rejected), DeadLettered: r(prev.DeadLettered, cur.DeadLettered),
		Recovered: r(prev.Recovered, cur.Recovered)}
}

// ts formats a time for tables: UTC to the second, "-" for none.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

// table writes rows aligned in columns, each cell through show: every table of the command shows
// values that publishers and handlers chose.
func table(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, cell := range r {
			cells[i] = show(cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func printQueues(w io.Writer, qs []QueueJSON) error {
	if len(qs) == 0 {
		_, err := fmt.Fprintln(w, "no registered queues (queues register when they first publish or a worker starts)")
		return err
	}
	rows := [][]string{{"QUEUE", "SHARDS"}}
	for _, q := range qs {
		shards := fmt.Sprint(q.Shards)
		if q.Error != "" {
			shards = "? (" + q.Error + ")"
		}
		rows = append(rows, []string{q.Name, shards})
	}
	return table(w, rows)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printStats(w io.Writer, s inspect.Stats, r *Rates) error {
	paused := yesNo(s.Paused)
	if !s.Paused && s.PausedShards > 0 {
		paused = fmt.Sprintf("partly (%d of %d shards; run srq pause again)", s.PausedShards, s.Shards)
	}
	rows := [][]string{
		{"queue", s.Queue},
		{"shards", fmt.Sprint(s.Shards)},
		{"paused", paused},
		{"server time", ts(s.ServerTime)},
		{"pending", fmt.Sprint(s.Pending)},
		{"in flight", fmt.Sprint(s.InFlight)},
		{"dead", fmt.Sprint(s.Dead)},
		{"partitions", fmt.Sprintf("%d with pending: %d ready, %d scheduled, %d blocked; %d paused; %d held by a dead letter",
			s.PendingPartitions, s.ReadyPartitions, s.ScheduledPartitions, s.BlockedPartitions, s.PausedPartitions, s.HeldPartitions)},
		{"waiting", fmt.Sprint(s.Waiting)},
		{"flows", fmt.Sprintf("%d running, %d ended (kept)", s.RunningFlows, s.EndedFlows)},
	}
	counter := func(name string, v int64, rate float64) []string {
		if r == nil {
			return []string{name, fmt.Sprint(v)}
		}
		return []string{name, fmt.Sprintf("%d (%.1f/s)", v, rate)}
	}
	var rr Rates
	if r != nil {
		rr = *r
	}
	rows = append(rows,
		counter("published", s.Published, rr.Published),
		counter("acked", s.Acked, rr.Acked),
		counter("rejected", s.Rejected, rr.Rejected),
		counter("dead-lettered", s.DeadLettered, rr.DeadLettered),
		counter("recovered", s.Recovered, rr.Recovered),
		[]string{"handed back", fmt.Sprint(s.HandedBack)},
		[]string{"requeued / purged / trimmed", fmt.Sprintf("%d / %d / %d", s.Requeued, s.Purged, s.Trimmed)},
		[]string{"cancelled", fmt.Sprint(s.Cancelled)},
		[]string{"debounced: replaced / dropped", fmt.Sprintf("%d / %d", s.Replaced, s.Dropped)},
		[]string{"flows started / completed / failed", fmt.Sprintf("%d / %d / %d", s.FlowsStarted, s.FlowsCompleted, s.FlowsFailed)},
		[]string{"consumers", fmt.Sprintf("%d live, %d seen in the last hour", s.LiveConsumers, s.ConsumerCount)},
	)
	if err := table(w, rows); err != nil {
		return err
	}
	if len(s.Consumers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	crows := [][]string{{"CONSUMER", "LAST SEEN", "LIVE"}}
	for _, c := range s.Consumers {
		crows = append(crows, []string{c.ID, ts(c.LastSeen), yesNo(c.Live)})
	}
	return table(w, crows)
}

func printWorkers(w io.Writer, ws []inspect.Worker) error {
	if len(ws) == 0 {
		_, err := fmt.Fprintln(w, "no consumer seen in the last hour: no worker runs on this queue")
		return err
	}
	rows := [][]string{{"CONSUMER", "LIVE", "LAST SEEN", "HOST", "PID", "RUNNING", "BATCHES", "STARTED", "QUEUES"}}
	for _, k := range ws {
		if !k.Known {
			rows = append(rows, []string{k.Consumer, yesNo(k.Live), ts(k.LastSeen), "-", "-", "-", "-", "-", "(no record)"})
			continue
		}
		batches := "-"
		if k.Batches > 0 {
			batches = fmt.Sprintf("%d (%d tasks)", k.Batches, k.BatchTasks)
		}
		rows = append(rows, []string{k.Consumer, yesNo(k.Live), ts(k.LastSeen), k.Host, fmt.Sprint(k.PID),
			fmt.Sprintf("%d / %d", k.Running, k.Concurrency), batches, ts(k.Started), strings.Join(k.Queues, ",")})
	}
	return table(w, rows)
}

func printPartitions(w io.Writer, ps []inspect.Partition) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "no partitions")
		return err
	}
	// A partition held by a dead letter adds the letter's id and error: two more columns.
	held := slices.ContainsFunc(ps, func(p inspect.Partition) bool { return p.HeldBy != "" })
	head := []string{"PARTITION", "SHARD", "PENDING", "STATE", "HEAD AVAILABLE", "LEASED", "LIMIT", "BLOCKED UNTIL", "PAUSED AT"}
	if held {
		head = append(head, "HELD BY", "ERROR")
	}
	rows := [][]string{head}
	for _, p := range ps {
		limit := "-"
		if p.Limit > 0 {
			limit = fmt.Sprint(p.Limit)
		}
		row := []string{partName(string(p.Key)), fmt.Sprint(p.Shard), fmt.Sprint(p.Pending), string(p.State),
			ts(p.HeadAvailableAt), fmt.Sprint(p.Leased), limit, ts(p.BlockedUntil), ts(p.PausedAt)}
		if held {
			row = append(row, cmpStr(p.HeldBy, "-"), cmpStr(oneLine(p.HeldError, 60), "-"))
		}
		rows = append(rows, row)
	}
	if err := table(w, rows); err != nil {
		return err
	}
	if held {
		_, err := fmt.Fprintln(w, "a partition held by a dead letter goes on when the letter is requeued or purged, or the partition resumed")
		return err
	}
	return nil
}

// partName shows the base partition, whose key is empty, as "(base)", and quotes keys with spaces,
// the key "(base)" and, as show does, keys that hold control characters.
func partName(p string) string {
	if p == "" {
		return "(base)"
	}
	if strings.ContainsRune(p, ' ') || p == "(base)" || needsQuote(p) {
		return strconv.Quote(p)
	}
	return p
}

// printInFlight writes the leased tasks, and next, the command for the next page, unless empty.
func printInFlight(w io.Writer, tasks []inspect.InFlightTask, next string) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(w, "no leased tasks")
		return err
	}
	rows := [][]string{{"ID", "PARTITION", "SHARD", "ATTEMPT", "CONSUMER", "LEASE DEADLINE"}}
	for _, t := range tasks {
		attempt := fmt.Sprint(t.Attempt)
		if t.MaxAttempts > 0 {
			attempt += fmt.Sprintf("/%d", t.MaxAttempts)
		}
		rows = append(rows, []string{t.ID, partName(string(t.Partition)), fmt.Sprint(t.Shard), attempt, t.Consumer, ts(t.LeaseDeadline)})
	}
	if err := table(w, rows); err != nil {
		return err
	}
	return printNext(w, next)
}

// printTasks writes a page of pending tasks (delayed ones when delayed is set), and next, the
// command for the next page, unless empty. RUNS IN counts from the server's clock (ServerTime), so
// a debounced task shows the time left of its window.
func printTasks(w io.Writer, p inspect.TaskPage, delayed bool, next string) error {
	if len(p.Tasks) == 0 {
		what := "no pending task available now"
		if delayed {
			what = "no delayed task"
		}
		_, err := fmt.Fprintln(w, what)
		return err
	}
	rows := [][]string{{"ID", "PARTITION", "SHARD", "PRIORITY", "ATTEMPTS", "RUNS IN", "DEBOUNCE"}}
	for _, t := range p.Tasks {
		attempts := fmt.Sprint(t.Attempts)
		if t.MaxAttempts > 0 {
			attempts += fmt.Sprintf("/%d", t.MaxAttempts)
		}
		runs := "now"
		if left := t.AvailableAt.Sub(p.ServerTime); left > 0 {
			runs = left.Round(100 * time.Millisecond).String()
		}
		debounce := "-"
		if d := t.Debounce; d != nil {
			debounce = d.Mode.String() + " " + d.Key
		}
		rows = append(rows, []string{t.ID, partName(string(t.Partition)), fmt.Sprint(t.Shard),
			fmt.Sprint(t.Priority), attempts, runs, debounce})
	}
	if err := table(w, rows); err != nil {
		return err
	}
	return printNext(w, next)
}

// printNext writes the command for the next page, unless there is none.
func printNext(w io.Writer, next string) error {
	if next == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "more: %s\n", next)
	return err
}

// printDead writes a page of dead letters, and next, the command for the next page, unless empty.
func printDead(w io.Writer, p inspect.DeadPage, next string) error {
	if len(p.Letters) == 0 {
		fmt.Fprintf(w, "no dead letters on this page (%d in the queue)\n", p.Total)
	} else {
		rows := [][]string{{"ID", "PARTITION", "SHARD", "ATTEMPTS", "DIED AT", "ERROR"}}
		for _, d := range p.Letters {
			rows = append(rows, []string{d.ID, partName(string(d.Partition)), fmt.Sprint(d.Shard), fmt.Sprint(d.Attempts),
				ts(d.DiedAt), oneLine(d.Error, 60)})
		}
		if err := table(w, rows); err != nil {
			return err
		}
		fmt.Fprintf(w, "%d dead letters in the queue\n", p.Total)
	}
	return printNext(w, next)
}

// oneLine cuts s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func printTask(w io.Writer, t TaskJSON) error {
	lease := "-"
	if t.LeaseDeadline != nil {
		lease = ts(*t.LeaseDeadline)
	}
	attempts := fmt.Sprint(t.Attempts)
	if t.MaxAttempts > 0 {
		attempts += fmt.Sprintf(" of %d", t.MaxAttempts)
	}
	rows := [][]string{{"id", t.ID}, {"shard", fmt.Sprint(t.Shard)}, {"state", t.State}}
	if t.Wait != nil {
		rows = append(rows, []string{"waits for", waitText(t.Wait)})
	}
	if t.Parent != "" {
		rows = append(rows, []string{"parent", t.Parent + " in queue " + t.ParentQueue})
	}
	if t.Flow != "" {
		rows = append(rows, []string{"flow", t.Flow + " of queue " + t.FlowQueue})
	}
	rows = append(rows, [][]string{
		{"partition", partName(t.Partition)},
		{"priority", fmt.Sprint(t.Priority)}, {"attempts", attempts}, {"crashes", fmt.Sprint(t.Crashes)},
		{"enqueued at", ts(t.EnqueuedAt)}, {"available at", ts(t.AvailableAt)},
		{"consumer", cmpStr(t.Consumer, "-")}, {"lease deadline", lease}, {"last error", cmpStr(oneLine(t.LastError, 200), "-")},
	}...)
	if d := t.Debounce; d != nil {
		v := d.Key
		if left := time.Until(t.AvailableAt); t.State == string(engine.StatePending) && left > 0 {
			v += ", runs in " + left.Round(100*time.Millisecond).String() // by this host's clock
		}
		rows = append(rows, []string{d.Mode.String() + " key", v})
	}
	if t.Progress != nil {
		rows = append(rows, []string{"progress", payloadText(t.Progress)})
	}
	if t.KeptState {
		rows = append(rows, []string{"kept state", fmt.Sprintf("%d byte%s", t.KeptStateBytes, plural(t.KeptStateBytes))})
	}
	for _, e := range t.Errors {
		rows = append(rows, []string{fmt.Sprintf("error of attempt %d", e.Attempt), ts(e.At) + " " + oneLine(e.Error, 200)})
	}
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		rows = append(rows, []string{"header " + k, t.Headers[k]})
	}
	rows = append(rows, []string{"payload", payloadText(t.Payload)})
	if err := table(w, rows); err != nil {
		return err
	}
	if len(t.Children) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	crows := [][]string{{"CHILD", "ID", "QUEUE", "SHARD", "STATE", "POLICY"}}
	for _, c := range t.Children {
		crows = append(crows, []string{c.Name, c.ID, c.Queue, fmt.Sprint(c.Shard), c.State, c.Policy})
	}
	return table(w, crows)
}

// waitText says what a waiting task waits for, and until when.
func waitText(w *inspect.TaskWait) string {
	var s string
	switch w.For {
	case inspect.WaitForChildren:
		s = fmt.Sprintf("children: %d of %d ended", w.ChildrenDone, w.ChildrenTotal)
	case inspect.WaitForSignal:
		s = "signal " + strconv.Quote(w.Signal)
	case inspect.WaitForSleep:
		s = "sleep"
	case inspect.WaitForParents:
		s = "parents (flow step)"
	default:
		s = w.For
	}
	if !w.Until.IsZero() {
		s += ", until " + ts(w.Until)
	}
	return s
}

func cmpStr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
