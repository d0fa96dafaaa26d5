package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// seedFlows publishes to queue q two flows whose first steps are in q: order-1, the order
// pipeline with a second queue "mail" (charge; then email, which dies, and invoice, which runs
// whatever charge did; then complete, cancelled by the failed email), run to its end, and order-2,
// whose one step is left pending.
func (f *fixture) seedFlows() {
	f.t.Helper()
	mail, err := engine.New(f.client, engine.Config{Queue: "mail", Prefix: f.prefix})
	if err != nil {
		f.t.Fatal(err)
	}
	step := func(name string, e *engine.Engine, after ...engine.FlowEdge) engine.FlowStep {
		return engine.FlowStep{Name: name, Engine: e, Message: engine.Message{Payload: []byte(name)}, After: after}
	}
	spec := &engine.FlowSpec{ID: "order-1", Steps: []engine.FlowStep{
		step("charge", f.eng),
		step("email", mail, engine.FlowEdge{Parent: "charge"}),
		step("invoice", f.eng, engine.FlowEdge{Parent: "charge", Policy: engine.ContinueDependents}),
		step("complete", f.eng, engine.FlowEdge{Parent: "email"}, engine.FlowEdge{Parent: "invoice"}),
	}}
	if _, err := engine.PublishFlow(f.ctx, spec); err != nil {
		f.t.Fatal(err)
	}
	for range 5 {
		for _, e := range []*engine.Engine{f.eng, mail} {
			ds, err := e.Fetch(f.ctx, "w", 10, time.Minute)
			if err != nil {
				f.t.Fatal(err)
			}
			for _, d := range ds {
				if string(d.Payload) == "email" {
					if _, err := e.Kill(f.ctx, []engine.Failure{{Receipt: d.Receipt(), Reason: "smtp: 554 rejected"}}); err != nil {
						f.t.Fatal(err)
					}
					continue
				}
				r := d.Receipt()
				r.Result = []byte("ok:" + string(d.Payload))
				if _, err := e.Ack(f.ctx, []engine.Receipt{r}); err != nil {
					f.t.Fatal(err)
				}
			}
			if _, err := e.Relay(f.ctx); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	if _, err := engine.PublishFlow(f.ctx, &engine.FlowSpec{ID: "order-2", Steps: []engine.FlowStep{step("charge", f.eng)}}); err != nil {
		f.t.Fatal(err)
	}
}

// golden compares out, normalized, with testdata/<name>.golden (-update rewrites it).
func (f *fixture) golden(name, out string) {
	f.t.Helper()
	got := strings.NewReplacer(f.url, "<url>", f.prefix, "<prefix>").Replace(normalize(out))
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatalf("%v (run go test ./cmd/srq -update to create it)", err)
	}
	if got != string(want) {
		f.t.Errorf("%s:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// ok runs srq and fails the test unless it exits with 0.
func (f *fixture) ok(stdin string, args ...string) string {
	f.t.Helper()
	code, out, errOut := f.run(stdin, args...)
	if code != 0 {
		f.t.Fatalf("srq %q: exit %d: %s", args, code, errOut)
	}
	return out
}

func TestFlowCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedFlows()
	f.golden("flow", f.ok("", "--queue", "q", "flow", "order-1"))
	f.golden("flows", f.ok("", "--queue", "q", "flows"))
	f.golden("flows_ended", f.ok("", "--queue", "q", "flows", "--ended"))
	f.golden("stats_flows", f.ok("", "--queue", "q", "stats"))
	if out := f.ok("", "--queue", "q", "flows", "--limit", "1", "--ended"); strings.Contains(out, "more:") {
		t.Errorf("a page that holds the last flow offers another:\n%s", out)
	}

	fl := decodeStrict[jsonFlow](t, f.ok("", "--queue", "q", "--json", "flow", "order-1"))
	if fl.State != "failed" || len(fl.Steps) != 4 || fl.Steps[1].Queue != "mail" || fl.Steps[1].Error != "smtp: 554 rejected" ||
		fl.Steps[3].Level != 2 || fl.Steps[2].Parents[0] != (jsonFlowEdge{Parent: "charge", Policy: "continue"}) ||
		fl.Steps[0].ResultBytes != len("ok:charge") {
		t.Fatalf("flow --json: %+v", fl)
	}
	page := decodeStrict[jsonFlowPage](t, f.ok("", "--queue", "q", "--json", "flows"))
	if page.Total != 1 || len(page.Flows) != 1 || page.Flows[0].ID != "order-2" || page.Flows[0].State != "running" {
		t.Fatalf("flows --json: %+v", page)
	}
	st := decodeStrict[jsonStats](t, f.ok("", "--queue", "q", "--json", "stats"))
	if st.FlowsStarted != 2 || st.FlowsFailed != 1 || st.RunningFlows != 1 || st.EndedFlows != 1 || st.Waiting != 1 {
		t.Fatalf("stats --json: %+v", st)
	}

	for _, tt := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"--queue", "q", "flow"}, 2, "exactly one flow id"},
		{[]string{"--queue", "q", "flow", "nope"}, 1, "kept by the queue of its first step"},
		{[]string{"--queue", "mail", "flow", "order-1"}, 1, "check --queue"},
		{[]string{"--queue", "q", "flows", "--limit", "0"}, 2, "outside"},
		{[]string{"--queue", "q", "flows", "--offset", "-1"}, 2, "outside"},
	} {
		if code, _, errOut := f.run("", tt.args...); code != tt.code || !strings.Contains(errOut, tt.say) {
			t.Errorf("srq %q: exit %d, %q; want exit %d saying %q", tt.args, code, errOut, tt.code, tt.say)
		}
	}
}

func TestCancelCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed() // b3, b4, o2 pending; b2, o1, z1 leased; b1, s1 dead
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
		say   string
	}{
		{"unconfirmed", "", []string{"cancel", "b3"}, 1, "", "pass --yes"},
		{"refused", "no\n", []string{"cancel", "b3"}, 1, "", "nothing was changed"},
		{"no id", "", []string{"cancel"}, 2, "", "exactly one task id"},
		{"pending", "yes\n", []string{"cancel", "b3"}, 0, "cancelled task \"b3\" of queue \"q\"\n", "Type 'yes'"},
		{"leased", "", []string{"--yes", "cancel", "o1", "--reason", "wrong order"}, 0,
			"task \"o1\" of queue \"q\" is running: marked; its worker cancels the handler at its next lease extension\n", ""},
		{"dead", "", []string{"--yes", "cancel", "b1"}, 1, "", "ended already"},
		{"unknown", "", []string{"--yes", "cancel", "nope"}, 1, "", "no task \"nope\""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := f.run(tt.stdin, append([]string{"--queue", "q"}, tt.args...)...)
			if code != tt.code || out != tt.out || !strings.Contains(errOut, tt.say) {
				t.Fatalf("exit %d, %q, %q; want exit %d, %q, saying %q", code, out, errOut, tt.code, tt.out, tt.say)
			}
		})
	}
	if _, err := f.eng.Task(f.ctx, "b3"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("b3 after its cancel: %v", err)
	}
	c := decodeStrict[CancelJSON](t, f.ok("", "--queue", "q", "--yes", "--json", "cancel", "b4"))
	if c != (CancelJSON{Action: "cancel", ID: "b4"}) {
		t.Fatalf("cancel --json: %+v", c)
	}
}

// eventsFixture returns a fixture whose queue "ev" keeps an event stream, with the engine that
// writes it.
func eventsFixture(t *testing.T) (*fixture, *engine.Engine) {
	t.Helper()
	f := newFixture(t)
	if err := engine.RegisterQueue(f.ctx, f.client, f.prefix, "ev", 1); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(f.client, engine.Config{Queue: "ev", Prefix: f.prefix, Events: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.AnnounceEvents(f.ctx); err != nil {
		t.Fatal(err)
	}
	return f, eng
}

func TestEventsCommand(t *testing.T) {
	t.Parallel()
	f, eng := eventsFixture(t)
	var msgs []engine.Message
	for _, id := range []string{"e1", "e2", "e3"} {
		msgs = append(msgs, engine.Message{ID: id, Partition: partition.Key("!" + id)})
	}
	if _, err := eng.Publish(f.ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := eng.Fetch(f.ctx, "w", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if _, err := eng.Kill(f.ctx, []engine.Failure{{Receipt: ds[0].Receipt(), Reason: "bad \x1b[31minput"}}); err != nil {
		t.Fatal(err)
	}

	lines := strings.Split(strings.TrimSpace(f.ok("", "--queue", "ev", "events", "--limit", "2")), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "published") || !strings.Contains(lines[1], "dead") ||
		!strings.Contains(lines[1], `error="bad \x1b[31minput"`) {
		t.Fatalf("the newest two events:\n%s", strings.Join(lines, "\n"))
	}

	// From the oldest, a page at a time, each page's hint running as printed.
	args := []string{"--redis-url", f.url, "--prefix", f.prefix, "--queue", "ev", "events", "--from", "0", "--limit", "3"}
	var all []string
	for page := 0; page < 5; page++ {
		var out, errb bytes.Buffer
		if code := run(f.ctx, args, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("srq %q: exit %d: %s", args, code, errb.String())
		}
		text := strings.TrimSpace(out.String())
		more := ""
		if i := strings.Index(text, "\nmore: "); i >= 0 {
			text, more = text[:i], text[i+len("\nmore: "):]
		}
		if text != "" {
			all = append(all, strings.Split(text, "\n")...)
		}
		if more == "" {
			break
		}
		args = strings.Fields(strings.TrimPrefix(more, "srq "))
	}
	if len(all) != 4 || !strings.Contains(all[3], "dead") {
		t.Fatalf("paged events:\n%s", strings.Join(all, "\n"))
	}

	events := decodeStrict[jsonEvent](t, strings.SplitN(f.ok("", "--queue", "ev", "--json", "events", "--limit", "1"), "\n", 2)[0])
	if events.Kind != "dead" || events.ID != "e1" || events.Error != "bad \x1b[31minput" {
		t.Fatalf("events --json: %+v", events)
	}

	// --follow from the newest event prints what comes, and ends cleanly when interrupted.
	newest, err := eng.LastEvents(f.ctx, 1)
	if err != nil || len(newest) != 1 {
		t.Fatalf("newest event: %v %v", newest, err)
	}
	ctx, interrupt := context.WithCancel(f.ctx)
	defer interrupt()
	out := &lineWaiter{want: "published", seen: make(chan struct{})}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--redis-url", f.url, "--prefix", f.prefix, "--queue", "ev", "events", "--follow", "--from", newest[0].Position},
			strings.NewReader(""), out, &errb)
	}()
	if _, err := eng.Publish(f.ctx, []engine.Message{{ID: "late"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-out.seen:
	case <-f.ctx.Done():
		t.Fatal("--follow printed nothing")
	}
	interrupt()
	if code := <-done; code != 0 || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), "late") || !strings.Contains(errb.String(), "to go on from here") ||
		!strings.Contains(errb.String(), "--follow --from ") {
		t.Fatalf("follow: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}

	// A queue without a stream says so.
	if code, _, errOut := f.run("", "--queue", "q", "events"); code != 0 || !strings.Contains(errOut, "keeps no event stream") {
		t.Fatalf("a queue without events: exit %d, %q", code, errOut)
	}
	if code, _, errOut := f.run("", "--queue", "ev", "events", "--from", "nope"); code != 2 || !strings.Contains(errOut, "not a stream position") {
		t.Fatalf("a bad --from: exit %d, %q", code, errOut)
	}
}

// lineWaiter is a stdout that closes seen once what was written holds want.
type lineWaiter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestPartitionsHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.eng.Publish(f.ctx, []engine.Message{{ID: "l1", Partition: "!ledger", HoldOnDead: true, At: past},
		{ID: "l2", Partition: "!ledger", At: past}}); err != nil {
		t.Fatal(err)
	}
	ds, err := f.eng.Fetch(f.ctx, "w", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if _, err := f.eng.Kill(f.ctx, []engine.Failure{{Receipt: ds[0].Receipt(), Reason: "balance below zero"}}); err != nil {
		t.Fatal(err)
	}
	f.golden("partitions_held", f.ok("", "--queue", "q", "partitions", "--by", "held"))
	ps := decodeStrict[[]jsonPartition](t, f.ok("", "--queue", "q", "--json", "partitions", "--by", "held"))
	if len(ps) != 1 || ps[0].HeldBy != "l1" || ps[0].HeldError != "balance below zero" || ps[0].State != "held_by_dead_letter" {
		t.Fatalf("partitions --by held --json: %+v", ps)
	}
	f.ok("", "--queue", "q", "resume", "--partition", "!ledger")
	if out := f.ok("", "--queue", "q", "partitions", "--by", "held"); out != "no partitions\n" {
		t.Fatalf("after the resume: %q", out)
	}
}

// The JSON of flow, flows and events, as docs/cli.md documents it.
type (
	jsonFlowEdge struct {
		Parent string `json:"parent"`
		Policy string `json:"policy"`
	}
	jsonFlowStep struct {
		Name        string         `json:"name"`
		Queue       string         `json:"queue"`
		Shard       int            `json:"shard"`
		ID          string         `json:"id"`
		State       string         `json:"state"`
		Parents     []jsonFlowEdge `json:"parents"`
		Level       int            `json:"level"`
		Ended       time.Time      `json:"ended"`
		ResultBytes int            `json:"result_bytes"`
		Error       string         `json:"error"`
	}
	jsonFlow struct {
		ID            string         `json:"id"`
		Queue         string         `json:"queue"`
		Shard         int            `json:"shard"`
		State         string         `json:"state"`
		Created       time.Time      `json:"created"`
		Ended         time.Time      `json:"ended"`
		Expires       time.Time      `json:"expires"`
		Succeeded     int            `json:"succeeded"`
		Failed        int            `json:"failed"`
		FailedForGood int            `json:"failed_for_good"`
		Steps         []jsonFlowStep `json:"steps"`
	}
	jsonFlowSummary struct {
		ID        string    `json:"id"`
		Shard     int       `json:"shard"`
		State     string    `json:"state"`
		Created   time.Time `json:"created"`
		Ended     time.Time `json:"ended"`
		Expires   time.Time `json:"expires"`
		Steps     int       `json:"steps"`
		Succeeded int       `json:"succeeded"`
		Failed    int       `json:"failed"`
	}
	jsonFlowPage struct {
		Flows []jsonFlowSummary `json:"flows"`
		Total int64             `json:"total"`
	}
	jsonEvent struct {
		Position  string    `json:"position"`
		Shard     int       `json:"shard"`
		Time      time.Time `json:"time"`
		Kind      string    `json:"kind"`
		ID        string    `json:"id"`
		Partition string    `json:"partition"`
		Error     string    `json:"error"`
		DelayMS   int64     `json:"delay_ms"`
		Step      string    `json:"step"`
		Wait      string    `json:"wait"`
		Signal    string    `json:"signal"`
		// Progress is any JSON value, or null.
		Progress json.RawMessage `json:"progress"`
	}
)

// TestOperatorEvents: docs/cli.md "Operator changes made through srq to tasks (dead requeue, dead
// purge, cancel) write their events (requeued, purged, cancelled) ...; pause and resume write none."
func TestOperatorEvents(t *testing.T) {
	t.Parallel()
	f, eng := eventsFixture(t)
	if _, err := eng.Publish(f.ctx, []engine.Message{{ID: "x", Partition: "p"}, {ID: "y", Partition: "p"}, {ID: "z", Partition: "p"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := eng.Fetch(f.ctx, "c", 2, time.Minute)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %d, %v", len(ds), err)
	}
	var fs []engine.Failure
	for _, d := range ds {
		fs = append(fs, engine.Failure{Receipt: d.Receipt(), Reason: "x"})
	}
	if _, err := eng.Kill(f.ctx, fs); err != nil {
		t.Fatal(err)
	}
	kinds := func() []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(f.ok("", "--queue", "ev", "--json", "events", "--from", "0", "--limit", "500")), "\n") {
			out = append(out, decodeStrict[jsonEvent](t, l).Kind)
		}
		return out
	}
	before := len(kinds())
	f.ok("", "--queue", "ev", "pause", "--partition", "p")
	f.ok("", "--queue", "ev", "resume", "--partition", "p")
	if got := kinds(); len(got) != before {
		t.Errorf("pause and resume wrote events: %v", got[before:])
	}
	f.ok("", "--queue", "ev", "dead", "requeue", ds[0].ID)
	f.ok("", "--queue", "ev", "dead", "purge", ds[1].ID)
	f.ok("y\n", "--queue", "ev", "cancel", "z")
	if got := kinds()[before:]; !slices.Equal(got, []string{"requeued", "purged", "cancelled"}) {
		t.Errorf("requeue, purge and cancel wrote %v", got)
	}
}
