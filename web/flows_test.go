package web

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/inspect"
)

// evilStep is a step name that is markup: every page must show it as text.
const evilStep = `<b>ship&"x"`

// orderFlow publishes the order pipeline as flow id, its first step in q and the e-mail in mail:
// charge; then email, invoice (continue on failure) and ship, named evilStep (ignore); then
// complete. A step whose event's Fail is set dies with that error.
func (b *bundle) orderFlow(q, mail *srq.Queue[event], id, emailFails string) {
	b.orderFlowNamed(q, mail, id, emailFails, evilStep)
}

// orderFlowNamed is orderFlow with the ship step named ship.
func (b *bundle) orderFlowNamed(q, mail *srq.Queue[event], id, emailFails, ship string) {
	b.t.Helper()
	charge := q.Step("charge", event{}, nil)
	f := &srq.Flow{ID: id, Steps: []*srq.Step{
		charge,
		mail.Step("email", event{Fail: emailFails}, nil).After(charge),
		q.Step("invoice", event{}, nil).AfterWith(srq.ContinueDependents, charge),
		q.Step(ship, event{}, nil).AfterWith(srq.IgnoreFailure, charge),
	}}
	f.Steps = append(f.Steps, q.Step("complete", event{}, nil).After(f.Steps[1:]...))
	if _, err := srq.PublishFlow(b.ctx, f); err != nil {
		b.t.Fatal(err)
	}
}

// runAll runs workers over qs until a round finds nothing: a task whose Fail is set dies with it.
func (b *bundle) runAll(qs ...*srq.Queue[event]) {
	b.t.Helper()
	var ws []*srq.Worker
	for _, q := range qs {
		ws = append(ws, b.failingWorker(q))
	}
	for range 20 {
		ran := 0
		for _, w := range ws {
			n, err := w.RunOnce(b.ctx)
			if err != nil {
				b.t.Fatal(err)
			}
			ran += n
		}
		if ran == 0 {
			return
		}
	}
	b.t.Fatal("the workers never ran out of tasks")
}

// nodeRE matches a step's box in the flow page's SVG: its class (with its state) and data-step.
var nodeRE = regexp.MustCompile(`<g class="node state-([a-z]+)" data-step="([^"]*)"`)

func TestFlowPages(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q, mail := b.queue("orders"), b.queue("mail")
	b.orderFlow(q, mail, "order-1", `smtp <script>alert(1)</script>`)
	b.orderFlow(q, mail, "order-2", "")
	b.runAll(q, mail)
	b.orderFlow(q, mail, "order-3", "") // left to run

	list := b.mustGet("flows?q=orders")
	if !strings.Contains(list, `<tr data-flow="order-3">`) || strings.Contains(list, `data-flow="order-1"`) ||
		!strings.Contains(list, `id="show-ended"`) {
		t.Fatalf("running flows:\n%s", list)
	}
	ended := b.mustGet("flows?q=orders&ended=1")
	for _, want := range []string{`<tr data-flow="order-1">`, `<tr data-flow="order-2">`, `class="badge flow-failed"`,
		`class="badge flow-completed"`, `<a href="./flow?q=orders&amp;id=order-1">`} {
		if !strings.Contains(ended, want) {
			t.Errorf("ended flows lack %s", want)
		}
	}

	page := b.mustGet("flow?q=orders&id=order-1")
	states := map[string]string{}
	for _, m := range nodeRE.FindAllStringSubmatch(page, -1) {
		states[m[2]] = m[1]
	}
	want := map[string]string{"charge": "succeeded", "email": "dead", "invoice": "succeeded",
		html.EscapeString(evilStep): "succeeded", "complete": "cancelled"}
	if len(states) != len(want) {
		t.Fatalf("SVG nodes %v, want %v", states, want)
	}
	for step, state := range want {
		if states[step] != state {
			t.Errorf("node %s is %q, want %q", step, states[step], state)
		}
	}
	for _, want := range []string{`<svg id="dag"`, `class="edge policy-fail"`, `class="edge policy-continue"`,
		`class="edge policy-ignore"`, `data-from="charge" data-to="email"`, `id="flow-state">failed<`,
		`smtp &lt;script&gt;alert(1)&lt;/script&gt;`, `href="./task?id=order-1%2Femail&amp;q=mail"`} {
		if !strings.Contains(page, want) {
			t.Errorf("flow page lacks %s", want)
		}
	}
	for _, raw := range []string{"<script>alert", "<b>ship"} {
		if strings.Contains(page, raw) {
			t.Errorf("flow page carries %q unescaped", raw)
		}
	}
	if strings.Contains(page, `data-action="cancel"`) {
		t.Errorf("an ended flow offers to cancel a step")
	}
	if r := b.get("flow?q=orders&id=nope"); r.status != http.StatusNotFound {
		t.Errorf("unknown flow: %d", r.status)
	}
	if r := b.get("flow?q=orders"); r.status != http.StatusBadRequest {
		t.Errorf("flow without an id: %d", r.status)
	}

	// Cancel order-3's pending first step from its page: its dependents are cancelled too.
	running := b.mustGet("flow?q=orders&id=order-3")
	if !strings.Contains(running, `data-action="cancel" data-id="order-3/charge"`) {
		t.Fatalf("the running flow offers no cancel for its pending step:\n%s", running)
	}
	after := b.follow("cancel", b.post("cancel", url.Values{"q": {"orders"}, "id": {"order-3/charge"}, "flow": {"order-3"},
		"home": {"orders"}}))
	if !strings.Contains(after, "Cancelled task order-3/charge.") || !strings.Contains(after, `id="flow-state">failed<`) {
		t.Fatalf("after the cancel:\n%s", after)
	}
	if !strings.Contains(b.logs.String(), "action=cancel") {
		t.Errorf("the cancel is not logged: %s", b.logs.String())
	}
}

func TestCancelReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ReadOnly: true})
	q := b.queue("")
	ids := b.publish(q, "", 1, "")
	if r := b.post("cancel", url.Values{"q": {q.Name()}, "id": {ids[0]}}); r.status != http.StatusForbidden {
		t.Fatalf("cancel on a read-only dashboard: %d", r.status)
	}
	if _, err := b.in.Task(b.ctx, q.Name(), ids[0]); err != nil {
		t.Fatalf("the task is gone: %v", err)
	}
	b.orderFlow(q, b.queue(""), "f", "")
	if page := b.mustGet("flow?q=" + url.QueryEscape(q.Name()) + "&id=f"); strings.Contains(page, `action="./cancel"`) {
		t.Fatal("a read-only flow page offers to cancel")
	}
}

func TestEventsPageAndAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: "ev", Prefix: b.prefix, Events: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ids := b.publish(q, "!a", 2, "")
	page := b.mustGet("events?q=ev")
	m := regexp.MustCompile(`data-next="([^"]*)"`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `<tr data-kind="published" data-id="`+ids[1]+`"`) ||
		strings.Index(page, ids[1]) > strings.Index(page, ids[0]) || strings.Contains(page, `id="no-stream"`) ||
		!strings.Contains(page, `<script src="./static/events.js">`) {
		t.Fatalf("events page:\n%s", page)
	}
	next := m[1]
	if body := b.mustGet("api/events?q=ev&after=" + url.QueryEscape(next)); !strings.Contains(body, `"events":[]`) {
		t.Fatalf("after the newest: %s", body)
	}
	late := b.publish(q, "!a", 1, "")
	var got inspect.EventPage
	if err := json.Unmarshal([]byte(b.mustGet("api/events?q=ev&after="+url.QueryEscape(next))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != 1 || got.Events[0].ID != late[0] || got.Events[0].Kind != "published" || got.Next == next || !got.Stream {
		t.Fatalf("the new event: %+v", got)
	}
	if r := b.get("api/events?q=ev&after=nope"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "error") {
		t.Fatalf("a bad cursor: %d %s", r.status, r.body)
	}
	if r := b.get("api/events"); r.status != http.StatusBadRequest {
		t.Fatalf("no queue: %d", r.status)
	}
	if page := b.mustGet("events?q=" + url.QueryEscape(b.queueWithoutEvents(t).Name())); !strings.Contains(page, `id="no-stream"`) {
		t.Fatal("a queue without a stream is not said to have none")
	}
}

// queueWithoutEvents returns a queue without an event stream that has published one task.
func (b *bundle) queueWithoutEvents(t *testing.T) *srq.Queue[event] {
	t.Helper()
	q := b.queue("")
	b.publish(q, "", 1, "")
	return q
}

func TestHeldPartitionsPage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: "ledger", Prefix: b.prefix, OnDeadLetter: srq.HoldPartition})
	if err != nil {
		t.Fatal(err)
	}
	dead := b.kill(q, "!acct", 1, "balance <i>below</i> zero")
	b.publish(q, "!acct", 2, "")
	page := b.mustGet("partitions?q=ledger&by=held")
	for _, want := range []string{`<span class="badge held" data-held-by="` + dead[0] + `">`, `balance &lt;i&gt;below&lt;/i&gt; zero`,
		`data-action="resume" data-partition="!acct"`, `<option value="held" selected>`, `href="./task?q=ledger&amp;id=` + dead[0]} {
		if !strings.Contains(page, want) {
			t.Errorf("held partitions page lacks %s", want)
		}
	}
	if qp := b.mustGet("queue?q=ledger"); stat(t, qp, "stat-held") != "1" {
		t.Errorf("the queue page shows %s held partitions", stat(t, qp, "stat-held"))
	}
	after := b.follow("resume-partition", b.post("resume-partition", url.Values{"q": {"ledger"}, "partition": {"!acct"},
		"back": {"partitions"}, "by": {"held"}}))
	if !strings.Contains(after, "Resumed partition !acct.") || !strings.Contains(after, "No partition is held by a dead letter.") {
		t.Fatalf("after the resume:\n%s", after)
	}
	if ds, err := q.Engine().Fetch(b.ctx, "probe", 10, time.Minute); err != nil || len(ds) == 0 {
		t.Fatalf("the released partition hands out %d tasks (%v)", len(ds), err)
	}
}

func TestLayoutDAG(t *testing.T) {
	t.Parallel()
	edge := func(p, policy string) inspect.FlowEdge { return inspect.FlowEdge{Parent: p, Policy: policy} }
	f := inspect.Flow{Queue: "q", Steps: []inspect.FlowStep{
		{Name: "a", Queue: "q", State: "succeeded"},
		{Name: "b", Queue: "mail", State: "dead", Level: 1, Parents: []inspect.FlowEdge{edge("a", "fail")}, ID: "f/b"},
		{Name: "c", Queue: "q", State: "pending", Level: 1, Parents: []inspect.FlowEdge{edge("a", "continue")}, ID: "f/c"},
		{Name: "d", Queue: "q", State: "waiting", Level: 2, Parents: []inspect.FlowEdge{edge("b", "ignore"), edge("c", "fail")}, ID: "f/d"},
		{Name: "a-very-long-step-name-indeed", Queue: "q", State: "succeeded"},
	}}
	v := layoutDAG(f)
	if v == nil || len(v.Nodes) != 5 || len(v.Edges) != 4 {
		t.Fatalf("layout %+v", v)
	}
	n := v.Nodes
	// Columns by level; a column's boxes do not overlap; the shorter column is centred.
	if n[0].X != n[4].X || n[1].X != n[2].X || n[1].X <= n[0].X || n[3].X <= n[1].X {
		t.Errorf("columns: %+v", n)
	}
	if n[1].Y == n[2].Y || abs(n[1].Y-n[2].Y) < dagNodeH || n[3].Y != (n[1].Y+n[2].Y)/2 {
		t.Errorf("rows: %+v", n)
	}
	if v.Width != n[3].X+dagNodeW+dagMargin || v.Height < n[2].Y+dagNodeH {
		t.Errorf("size %dx%d for %+v", v.Width, v.Height, n)
	}
	if n[4].Name != "a-very-long-step-name…" || n[4].Step != "a-very-long-step-name-indeed" || n[1].Sub != "dead · mail" {
		t.Errorf("labels %q %q %q", n[4].Name, n[4].Step, n[1].Sub)
	}
	if n[0].Link != "" || n[1].Link != "./task?id=f%2Fb&q=mail" {
		t.Errorf("links %q %q: only a step with a task record links to it", n[0].Link, n[1].Link)
	}
	if e := v.Edges[2]; e.From != "b" || e.To != "d" || e.Policy != "ignore" || !strings.HasPrefix(e.Path, "M") {
		t.Errorf("edge %+v", e)
	}
	big := inspect.Flow{Steps: make([]inspect.FlowStep, dagMaxSteps+1)}
	if layoutDAG(big) != nil {
		t.Error("a flow over dagMaxSteps is drawn")
	}
}

func abs(n int) int { return max(n, -n) }
