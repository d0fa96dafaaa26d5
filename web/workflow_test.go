package web

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/codec"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// seedWorkflow leaves in q what dynamic workflows keep of tasks (ids prefixed with prefix):
// parent, waiting for its children a (in kids, pending) and b (in q, succeeded), with progress and
// a kept state; sleeper, sleeping an hour; waiter, parked until signal. It returns the engines.
func (b *bundle) seedWorkflow(q, kids *srq.Queue[event], prefix string, progress []byte, signal string) {
	b.t.Helper()
	eng, keng := q.Engine(), kids.Engine()
	parent := prefix + "parent"
	if _, err := eng.Publish(b.ctx, []engine.Message{{ID: parent, Partition: "w"}, {ID: prefix + "sleeper", Partition: "w"},
		{ID: prefix + "waiter", Partition: "w"}}); err != nil {
		b.t.Fatal(err)
	}
	ds, err := eng.Fetch(b.ctx, "w1", 3, time.Hour)
	if err != nil || len(ds) != 3 {
		b.t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if _, err := keng.Spawn(b.ctx, eng, parent, []engine.SpawnChild{{Name: "a" + prefix, Message: engine.Message{Partition: "k"}}}); err != nil {
		b.t.Fatal(err)
	}
	if _, err := eng.Spawn(b.ctx, eng, parent, []engine.SpawnChild{{Name: "b", Message: engine.Message{Partition: "k"},
		Policy: engine.ContinueDependents}}); err != nil {
		b.t.Fatal(err)
	}
	if err := eng.Progress(b.ctx, ds[0].Receipt(), progress); err != nil {
		b.t.Fatal(err)
	}
	res, err := eng.Reject(b.ctx, []engine.Rejection{
		{Receipt: ds[0].Receipt(), Wait: &engine.Wait{Kind: engine.WaitChildren, State: []byte("12345")}},
		{Receipt: ds[1].Receipt(), Delay: time.Hour, Wait: &engine.Wait{Kind: engine.WaitSleep}},
		{Receipt: ds[2].Receipt(), Wait: &engine.Wait{Kind: engine.WaitSignal, Signal: signal}},
	})
	if err != nil {
		b.t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			b.t.Fatalf("wait %d: %v", i, r.Err)
		}
	}
	kb, err := eng.Fetch(b.ctx, "w1", 1, time.Hour)
	if err != nil || len(kb) != 1 || kb[0].ID != parent+"/b" {
		b.t.Fatalf("fetch child b: %v %+v", err, kb)
	}
	if errs, err := eng.Ack(b.ctx, []engine.Receipt{kb[0].Receipt()}); err != nil || errs[0] != nil {
		b.t.Fatalf("ack child b: %v %v", err, errs)
	}
}

// TestTaskPageWorkflow: a waiting task's page says what it waits for (its children done out of
// total, a signal, a sleep until when) with its state waiting; it shows the progress decoded and
// that a state is kept, lists the children linked to their pages in their queues, and a child's
// page links its parent's; a waiting task can be cancelled, and its children that have not ended
// with it.
func TestTaskPageWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q, kids := b.queue("wf"), b.queue("kids")
	progress, err := codec.MsgPack{}.Marshal(map[string]int{"done": 1, "of": 2})
	if err != nil {
		t.Fatal(err)
	}
	b.seedWorkflow(q, kids, "", progress, "approve")

	page := b.mustGet("task?q=wf&id=parent")
	for _, want := range []string{
		`<dd id="task-state">waiting</dd>`,
		`<dd id="task-wait" data-for="children">its children: <span id="task-children-done">1 of 2</span> ended</dd>`,
		`<pre class="payload" id="progress" data-format="msgpack">{
  &#34;done&#34;: 1,
  &#34;of&#34;: 2
}</pre>`,
		`<dd id="task-kept-state">5 bytes, for its next run</dd>`,
		`<tr data-child="a"><td class="mono">a</td><td class="mono id"><a href="./task?q=kids&amp;id=parent%2fa">parent/a</a></td><td class="mono">kids</td><td><span class="badge state-pending" data-state="not_ended">not ended</span></td><td>fail</td></tr>`,
		`<tr data-child="b"><td class="mono">b</td><td class="mono id"><a href="./task?q=wf&amp;id=parent%2fb">parent/b</a></td><td class="mono">wf</td><td><span class="badge state-succeeded" data-state="succeeded">succeeded</span></td><td>continue</td></tr>`,
		`id="task-cancel"`, `Its children that have not ended are cancelled too.`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the parent's page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("the parent's page:\n%s", page)
	}
	child := b.mustGet("task?q=kids&id=parent%2Fa")
	if !strings.Contains(child, `<a href="./task?q=wf&amp;id=parent" id="task-parent">parent</a> <span class="muted">in wf</span>`) ||
		strings.Contains(child, `id="task-wait"`) || strings.Contains(child, `id="children"`) || strings.Contains(child, `id="progress"`) {
		t.Errorf("the child's page:\n%s", child)
	}
	sleeper := b.mustGet("task?q=wf&id=sleeper")
	if stat(t, sleeper, "task-state") != "waiting" || !strings.Contains(sleeper, `data-for="sleep">a time (sleep), until <span id="task-wakes"`) ||
		!strings.Contains(stat(t, sleeper, "task-wakes"), "in 59m") {
		t.Errorf("the sleeper's page:\n%s", sleeper)
	}
	waiter := b.mustGet("task?q=wf&id=waiter")
	if !strings.Contains(waiter, `data-for="signal">the signal <span class="mono" id="task-signal">approve</span></dd>`) ||
		strings.Contains(waiter, `id="task-wakes"`) || strings.Contains(waiter, `id="task-kept-state"`) {
		t.Errorf("the waiter's page:\n%s", waiter)
	}

	// A flow step waiting for its parents links its flow.
	one := q.Step("one", event{}, nil)
	if _, err := srq.PublishFlow(b.ctx, &srq.Flow{ID: "fl", Steps: []*srq.Step{one, q.Step("two", event{}, nil).After(one)}}); err != nil {
		t.Fatal(err)
	}
	if step := b.mustGet("task?q=wf&id=fl%2Ftwo"); !strings.Contains(step, `<a href="./flow?q=wf&amp;id=fl" id="task-flow">fl</a>`) ||
		!strings.Contains(step, `data-for="parents">its parents in its flow</dd>`) {
		t.Errorf("a waiting flow step's page:\n%s", step)
	}

	if r := b.post("cancel-tasks", url.Values{"q": {"wf"}, "id": {"parent"}, "back": {"task"}}); r.status != 303 {
		t.Fatalf("cancel the parent: %d\n%s", r.status, r.body)
	}
	// Its child a, in another queue, is cancelled once a worker of the parent's queue relays the
	// message.
	if _, err := q.Engine().Relay(b.ctx); err != nil {
		t.Fatal(err)
	}
	if r := b.get("task?q=kids&id=parent%2Fa"); r.status != 404 {
		t.Errorf("the parent's child a after the cancel: %d\n%s", r.status, r.body)
	}
}

// TestTaskPageWorkflowEscapes: a child's name, a signal's name and a progress that are markup
// show as text on the task pages, and the child's id goes through its link unchanged.
func TestTaskPageWorkflowEscapes(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	const evil = `<img src=x onerror="alert('x')">` + "\u202e" // no '/': a child's name may not hold one
	q, kids := b.queue("wf"), b.queue("kids")
	progress, err := codec.MsgPack{}.Marshal(evil)
	if err != nil {
		t.Fatal(err)
	}
	b.seedWorkflow(q, kids, evil, progress, "s"+evil)
	// A progress that is neither JSON nor msgpack is shown as a hex dump.
	if _, err := q.Publish(b.ctx, event{}, &srq.PublishOpts{ID: "bin", Partition: "bin"}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Engine().Fetch(b.ctx, "w1", 1, time.Hour)
	if err != nil || len(ds) != 1 {
		t.Fatalf("fetch bin: %v %d", err, len(ds))
	}
	if err := q.Engine().Progress(b.ctx, ds[0].Receipt(), []byte("\xc1<script>\x00")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{evil + "parent", evil + "waiter", evil + "parent/a" + evil, "bin"} {
		queue := "wf"
		if strings.Contains(id, "/") {
			queue = "kids"
		}
		page := b.mustGet("task?q=" + queue + "&id=" + url.QueryEscape(id))
		if strings.Contains(page, "<img") || strings.Contains(page, "<script>") {
			t.Errorf("the page of %q carries markup:\n%s", id, page)
		}
		if id != "bin" && !strings.Contains(page, "&lt;img src=x onerror=&#34;alert(&#39;x&#39;)&#34;&gt;\u202e") {
			t.Errorf("the page of %q does not show the text escaped:\n%s", id, page)
		}
	}
	page := b.mustGet("task?q=wf&id=" + url.QueryEscape(evil+"parent"))
	m := regexp.MustCompile(`<a href="\./task\?q=kids&amp;id=([^"]*)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no link to the child in kids:\n%s", page)
	}
	if id, err := url.QueryUnescape(m[1]); err != nil || id != evil+"parent/a"+evil {
		t.Errorf("the child's link carries the id %q (%v), want %q", id, err, evil+"parent/a"+evil)
	}
	if page := b.mustGet("task?q=wf&id=bin"); !strings.Contains(page, `id="progress" data-format="hex">00000000  c1 3c 73 63`) {
		t.Errorf("a binary progress:\n%s", page)
	}
}

// TestEventsPageWorkflowKinds: the events page and api/events show what the events of dynamic
// workflows carry: a waiting task what it waits for, a signal its name, a progress its value as
// JSON; markup in a signal's name or a progress shows as text.
func TestEventsPageWorkflowKinds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: "ev", Prefix: b.prefix, Events: 1000})
	if err != nil {
		t.Fatal(err)
	}
	const evil = `<img src=x onerror="alert('x')">`
	progress, err := codec.MsgPack{}.Marshal(map[string]string{"step": evil})
	if err != nil {
		t.Fatal(err)
	}
	b.seedWorkflow(q, b.queue("kids"), "", progress, "approve "+evil)
	if taken, err := q.Engine().Signal(b.ctx, "waiter", "approve "+evil, []byte("y")); err != nil || !taken {
		t.Fatalf("signal: %v %v", taken, err)
	}
	page := b.mustGet("events?q=ev")
	if strings.Contains(page, "<img") {
		t.Errorf("the events page carries markup:\n%s", page)
	}
	rowRE := regexp.MustCompile(`(?s)<tr data-kind="([a-z_]+)" data-id="([^"]*)"[^>]*>.*?<td class="err">([^<]*)</td>`)
	rows := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(page, -1) {
		rows[m[1]+" "+m[2]] = m[3]
	}
	escaped := `&lt;img src=x onerror=&#34;alert(&#39;x&#39;)&#34;&gt;`
	for key, want := range map[string]string{
		"progress parent": `progress {&#34;step&#34;:&#34;` + strings.ReplaceAll(escaped, `&#34;`, `\&#34;`) + `&#34;} `,
		"waiting parent":  "waits for its children ",
		"waiting waiter":  "waits for signal approve " + escaped + " ",
		"signal waiter":   "signal approve " + escaped + " ",
		"resumed waiter":  "",
	} {
		if got, ok := rows[key]; !ok || got != want {
			t.Errorf("%s: details %q, want %q", key, got, want)
		}
	}
	var api inspect.EventPage
	if err := json.Unmarshal([]byte(b.mustGet("api/events?q=ev&limit=100")), &api); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, ev := range api.Events {
		switch {
		case ev.Kind == "progress" && ev.ID == "parent":
			var v struct{ Step string }
			if err := json.Unmarshal([]byte(ev.Progress), &v); err != nil || v.Step != evil {
				t.Errorf("api progress %q: %v", ev.Progress, err)
			}
			found++
		case ev.Kind == "waiting" && ev.ID == "waiter":
			if ev.Wait != "signal" || ev.Signal != "approve "+evil {
				t.Errorf("api waiting: %+v", ev)
			}
			found++
		}
	}
	if found != 2 {
		t.Errorf("api/events has %d of the progress and waiting events:\n%+v", found, api.Events)
	}
}
