package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// chromium returns the browser to drive: $SRQ_CHROMIUM, or chromium / chromium-browser /
// google-chrome on PATH. Without one the test skips, unless CI is set: CI installs Debian's
// chromium (.ci/run), so there a missing browser is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SRQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("browser test: no chromium on PATH, and CI is set: install it (apt-get install -y --no-install-recommends chromium) or set SRQ_CHROMIUM")
	}
	t.Skip("browser test skipped: chromium is not installed (apt-get install -y --no-install-recommends chromium, or set SRQ_CHROMIUM); under CI this fails")
	return ""
}

// browser starts headless Chromium for t, closed (and waited for) when t ends. The flags keep it
// off the network: this machine has none, and Chromium's background connections only slow it.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelTab()
		cancelAlloc()
	})
	// The first Do starts the browser; it must not run under a timeout, which would end it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs actions with a deadline, failing the test with what it was doing.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// read runs one action with a value under a deadline.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// TestBrowser drives the dashboard in headless Chromium against a real Redis holding tasks: the
// page shows the right counts (and the live refresh keeps them right), requeueing a dead letter
// from its page moves it back, and pausing a partition from the partitions page stops its
// deliveries.
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	b := setup(t, Config{RefreshInterval: 300 * time.Millisecond})
	q := b.queue("orders ✓ <b>")
	dead := b.kill(q, "!card-declined", 2, "card declined <script>alert(1)</script>")
	b.publish(q, "!user-1", 3, "")
	b.publish(q, "!user-2", 2, "")
	queueURL := b.base + "queue?q=" + urlQueryEscape(q.Name())

	// The counts.
	step(t, ctx, "open the queue page", chromedp.Navigate(queueURL), chromedp.WaitVisible(chromedp.ID("stat-pending")))
	for id, want := range map[string]string{"stat-pending": "5", "stat-dead": "2", "stat-inflight": "0"} {
		if got := read(t, ctx, "read "+id, chromedp.Text(chromedp.ID(id))); got != want {
			t.Errorf("%s shows %q, want %q", id, got, want)
		}
	}
	if title := read(t, ctx, "title", chromedp.Title()); !strings.Contains(title, "orders ✓ <b>") {
		t.Errorf("title %q lacks the queue name as text", title)
	}
	// The page refreshes its counts from the JSON endpoint.
	b.publish(q, "!user-2", 1, "")
	step(t, ctx, "wait for the live count", chromedp.Poll[chromedp.Void](
		`document.getElementById("stat-pending").textContent === "6"`, chromedp.WithPollingTimeout(10*time.Second)))
	// A field with a snake_case name in the JSON (in_flight) refreshes too: lease a task, then
	// hand it back.
	leased, err := q.Engine().Fetch(b.ctx, "browser-test", 1, time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease a task: %v %d", err, len(leased))
	}
	step(t, ctx, "wait for the live in-flight count", chromedp.Poll[chromedp.Void](
		`document.getElementById("stat-inflight").textContent === "1" && document.getElementById("stat-pending").textContent === "5"`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if res, err := q.Engine().Reject(b.ctx, []engine.Rejection{{Receipt: leased[0].Receipt(), NotAttempt: true}}); err != nil || res[0].Err != nil {
		t.Fatalf("hand the task back: %v %+v", err, res)
	}
	step(t, ctx, "wait for the in-flight count to drop", chromedp.Poll[chromedp.Void](
		`document.getElementById("stat-inflight").textContent === "0"`, chromedp.WithPollingTimeout(10*time.Second)))
	step(t, ctx, "wait for the chart", chromedp.Poll[chromedp.Void](
		`document.querySelectorAll("#chart polyline").length === 4`, chromedp.WithPollingTimeout(10*time.Second)))

	// Requeue one dead letter from the dead-letter page.
	button := `button[data-action="requeue"][data-id="` + dead[0] + `"]`
	step(t, ctx, "requeue a dead letter",
		chromedp.Navigate(b.base+"dead?q="+urlQueryEscape(q.Name())),
		chromedp.WaitVisible(chromedp.CSS(button)),
		chromedp.Click(chromedp.CSS(button)),
		chromedp.WaitVisible(chromedp.ID("flash")))
	if msg := read(t, ctx, "flash", chromedp.Text(chromedp.ID("flash"))); msg != "Requeued 1 dead letter." {
		t.Errorf("flash after requeue: %q", msg)
	}
	if body := read(t, ctx, "page text", chromedp.Text(chromedp.CSS("main"))); !strings.Contains(body, "<script>alert(1)</script>") {
		t.Errorf("the error is not shown as text:\n%s", body)
	}
	task, err := b.in.Task(b.ctx, q.Name(), dead[0])
	if err != nil || task.State != "pending" {
		t.Fatalf("requeued task in Redis: %+v %v", task.State, err)
	}
	if st := b.stats(q.Name()); st.Dead != 1 || st.Pending != 7 {
		t.Errorf("after requeue: dead %d pending %d, want 1 and 7", st.Dead, st.Pending)
	}

	// Pause !user-1 from the partitions page.
	pause := `button[data-action="pause"][data-partition="!user-1"]`
	step(t, ctx, "pause a partition",
		chromedp.Navigate(b.base+"partitions?q="+urlQueryEscape(q.Name())),
		chromedp.WaitVisible(chromedp.CSS(pause)),
		chromedp.Click(chromedp.CSS(pause)),
		chromedp.WaitVisible(chromedp.ID("flash")),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="resume"][data-partition="!user-1"]`)))
	got := map[partition.Key]int{}
	for {
		ds, err := q.Engine().Fetch(b.ctx, "probe", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			got[d.Partition]++
		}
		if _, err := q.Engine().Ack(b.ctx, receipts(ds)); err != nil {
			t.Fatal(err)
		}
	}
	if got["!user-1"] != 0 || got["!user-2"] != 3 || got["!card-declined"] != 1 {
		t.Errorf("deliveries with !user-1 paused: %v, want none of !user-1, 3 of !user-2, 1 of !card-declined", got)
	}
	if st := b.stats(q.Name()); st.Pending != 3 || st.PausedPartitions != 1 {
		t.Errorf("after draining: pending %d paused partitions %d, want 3 and 1", st.Pending, st.PausedPartitions)
	}
}

func receipts(ds []engine.Delivery) []engine.Receipt {
	rs := make([]engine.Receipt, len(ds))
	for i := range ds {
		rs[i] = ds[i].Receipt()
	}
	return rs
}

// TestBrowserScreenshot saves a screenshot of the overview with live traffic as
// docs/dashboard.png when SRQ_SCREENSHOT is set.
func TestBrowserScreenshot(t *testing.T) {
	if os.Getenv("SRQ_SCREENSHOT") == "" {
		t.Skip("set SRQ_SCREENSHOT=1 to write docs/dashboard.png")
	}
	ctx := browser(t)
	b := setup(t, Config{RefreshInterval: 300 * time.Millisecond})
	orders, emails, hooks := b.queue("orders"), b.queue("emails"), b.queue("webhooks")
	b.kill(hooks, "!tenant-17", 4, "POST https://hooks.example/17: 503 Service Unavailable")
	b.publish(emails, "!campaign-7", 150, "") // a backlog held by a pause
	if err := b.in.PausePartition(b.ctx, emails.Name(), "!campaign-7"); err != nil {
		t.Fatal(err)
	}

	// Traffic for the chart: a publisher and a worker per queue until the chart is full enough.
	traffic, stop := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i, q := range []*srq.Queue[event]{orders, emails, hooks} {
		w, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, t *srq.Task[event]) error {
			if t.Value.N%97 == 13 {
				return srq.Permanent(errors.New("validation failed: amount < 0"))
			}
			if t.Value.N%23 == 5 && t.Attempt == 1 {
				return srq.RejectWithDelay(50*time.Millisecond, errors.New("upstream busy"))
			}
			return nil
		}), srq.WorkerConfig{Concurrency: 8, Logger: slog.New(slog.DiscardHandler), PollWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(2)
		go func() { defer wg.Done(); _ = w.Run(traffic) }()
		go func() {
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-traffic.Done():
					return
				case <-tick.C:
				}
				batch := make([]srq.Message[event], 2+(n/4+i*3)%9)
				for j := range batch {
					batch[j] = srq.Message[event]{Value: event{N: n*10 + j}, Opts: srq.PublishOpts{Partition: "!user-" + string(rune('a'+j%12))}}
				}
				_, _ = q.PublishBatch(traffic, batch)
			}
		}()
	}
	step(t, ctx, "open the overview", chromedp.Navigate(b.base), chromedp.WaitVisible(chromedp.ID("queues")))
	fill, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(fill, chromedp.Poll[chromedp.Void](`window.srqChartPoints && window.srqChartPoints() >= 60`,
		chromedp.WithPollingTimeout(60*time.Second))); err != nil {
		t.Fatalf("browser: fill the chart: %v", err)
	}
	png := read(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join("..", "docs", "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestBrowserFlowAndEvents drives the flow page and the events tail in headless Chromium: the
// flow's DAG is drawn as SVG with a box per step, colored by its state, and edges by policy; the
// events page adds an event published after it loaded, without a reload.
func TestBrowserFlowAndEvents(t *testing.T) {
	ctx := browser(t)
	b := setup(t, Config{RefreshInterval: 300 * time.Millisecond})
	newQueue := func(name string) *srq.Queue[event] {
		q, err := srq.NewQueue[event](b.client, srq.QueueConfig{Name: name, Prefix: b.prefix, Events: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	orders, mail := newQueue("orders"), newQueue("mail")
	b.orderFlow(orders, mail, "order-1", "smtp: 554 rejected")
	b.runAll(orders, mail)

	step(t, ctx, "open the flow page", chromedp.Navigate(b.base+"flow?q=orders&id=order-1"),
		chromedp.WaitVisible(chromedp.CSS("#dag g.node")))
	nodes := read(t, ctx, "read the nodes", chromedp.Evaluate[map[string]string](`(() => {
		const out = {};
		document.querySelectorAll("#dag g.node").forEach(g => { out[g.getAttribute("data-step")] = g.getAttribute("class"); });
		return out;
	})()`))
	want := map[string]string{"charge": "node state-succeeded", "email": "node state-dead", "invoice": "node state-succeeded",
		evilStep: "node state-succeeded", "complete": "node state-cancelled"}
	if len(nodes) != len(want) {
		t.Fatalf("SVG nodes %v, want %v", nodes, want)
	}
	for name, class := range want {
		if nodes[name] != class {
			t.Errorf("node %q has class %q, want %q", name, nodes[name], class)
		}
	}
	// The stylesheet colors the boxes by state, and draws a policy's edges apart.
	fills := read(t, ctx, "read the fills", chromedp.Evaluate[[]string](`[
		getComputedStyle(document.querySelector('#dag g.state-dead rect')).fill,
		getComputedStyle(document.querySelector('#dag g.state-succeeded rect')).fill,
		getComputedStyle(document.querySelector('#dag .edge.policy-continue')).strokeDasharray,
		getComputedStyle(document.querySelector('#dag .edge.policy-fail')).strokeDasharray]`))
	if len(fills) != 4 || fills[0] == fills[1] || fills[2] == "none" || fills[3] != "none" {
		t.Errorf("state fills and edge dashes %q: want two fills and a dashed continue edge", fills)
	}
	if n := read(t, ctx, "count the edges", chromedp.Evaluate[int](`document.querySelectorAll("#dag path.edge").length`)); n != 6 {
		t.Errorf("%d edges, want 6", n)
	}

	// The events tail: the page shows the newest events, then adds one published after it loaded.
	step(t, ctx, "open the events page", chromedp.Navigate(b.base+"events?q=orders"),
		chromedp.WaitVisible(chromedp.CSS(`#events tr[data-kind="flow_failed"]`)))
	late := b.publish(orders, "!late", 1, "")
	step(t, ctx, "wait for the new event", chromedp.Poll[chromedp.Void](
		`document.querySelector('#events tbody tr.new[data-kind="published"][data-id="`+late[0]+`"]') !== null`,
		chromedp.WithPollingTimeout(10*time.Second)))
	if first := read(t, ctx, "the first row", chromedp.Evaluate[string](`document.querySelector("#events tbody tr").getAttribute("data-id")`)); first != late[0] {
		t.Errorf("the newest row is %q, want %q", first, late[0])
	}
}

// TestBrowserFlowScreenshot saves a screenshot of a flow's page as docs/flow.png when
// SRQ_SCREENSHOT is set.
func TestBrowserFlowScreenshot(t *testing.T) {
	if os.Getenv("SRQ_SCREENSHOT") == "" {
		t.Skip("set SRQ_SCREENSHOT=1 to write docs/flow.png")
	}
	ctx := browser(t)
	b := setup(t, Config{})
	orders, mail := b.queue("orders"), b.queue("mail")
	b.orderFlowNamed(orders, mail, "order-1001", "smtp: 554 mailbox unavailable", "warehouse")
	b.runAll(orders, mail)
	step(t, ctx, "open the flow page", chromedp.Navigate(b.base+"flow?q=orders&id=order-1001"),
		chromedp.WaitVisible(chromedp.CSS("#dag g.node")))
	png := read(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join("..", "docs", "flow.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestBrowserPartitionAndTask drives the partition and task pages: from the partitions page to
// one partition's due tasks in the order a worker takes them, paged, and its delayed ones; from a
// row to the task's page, which shows the msgpack payload decoded, as JSON; a dead letter's page
// requeues it and purges another; the queue page shows the queue running while its worker's
// heartbeat is fresh.
func TestBrowserPartitionAndTask(t *testing.T) {
	ctx := browser(t)
	b := setup(t, Config{RefreshInterval: 300 * time.Millisecond})
	q := b.queue("")
	dead := b.kill(q, "!acct", 2, "ledger locked") // a worker ran: its heartbeat is fresh
	for i, prio := range []int{0, 0, 3} {
		if _, err := q.Publish(b.ctx, event{N: 10 + i}, &srq.PublishOpts{ID: fmt.Sprint("due-", i), Partition: "!acct", Priority: prio}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Publish(b.ctx, event{N: 99}, &srq.PublishOpts{ID: "later", Partition: "!acct", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ids := func(what string) []string {
		t.Helper()
		return read(t, ctx, what, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#partition-tasks tbody tr")).map(tr => tr.getAttribute("data-id"))`))
	}

	step(t, ctx, "open the partition from the partitions page",
		chromedp.Navigate(b.base+"partitions?q="+urlQueryEscape(q.Name())),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-partition="!acct"] td.key a`)),
		chromedp.Click(chromedp.CSS(`tr[data-partition="!acct"] td.key a`)),
		chromedp.WaitVisible(chromedp.ID("partition-tasks")))
	if got := ids("the due tasks"); !slices.Equal(got, []string{"due-2", "due-0", "due-1"}) {
		t.Errorf("due tasks %v, want due-2 (priority 3), due-0, due-1", got)
	}
	step(t, ctx, "a page of two", chromedp.Navigate(b.base+"partition?q="+urlQueryEscape(q.Name())+"&p=!acct&limit=2"),
		chromedp.WaitVisible(chromedp.ID("next")), chromedp.Click(chromedp.ID("next")), chromedp.WaitVisible(chromedp.ID("prev")))
	if got := ids("the second page"); !slices.Equal(got, []string{"due-1"}) {
		t.Errorf("second page %v, want due-1", got)
	}
	step(t, ctx, "the delayed tasks", chromedp.Click(chromedp.ID("view-delayed")),
		chromedp.WaitVisible(chromedp.CSS("#view-delayed.current")))
	if got := ids("the delayed tasks"); !slices.Equal(got, []string{"later"}) {
		t.Errorf("delayed tasks %v, want later", got)
	}

	step(t, ctx, "open a task from the list",
		chromedp.Click(chromedp.CSS(`tr[data-id="later"] td.id a`)), chromedp.WaitVisible(chromedp.ID("payload")))
	payload := read(t, ctx, "the payload", chromedp.Text(chromedp.ID("payload")))
	if format := read(t, ctx, "the payload's format", chromedp.Evaluate[string](`document.getElementById("payload").dataset.format`)); format != "msgpack" ||
		!strings.Contains(payload, `"n": 99`) {
		t.Errorf("payload %q as %s, want the msgpack decoded as JSON", payload, format)
	}

	// Requeue one dead letter from its page, then purge the other (accepting the confirmation).
	step(t, ctx, "requeue from the task page",
		chromedp.Navigate(b.base+"task?q="+urlQueryEscape(q.Name())+"&id="+dead[0]),
		chromedp.WaitVisible(chromedp.ID("task-requeue")), chromedp.Click(chromedp.ID("task-requeue")),
		chromedp.WaitVisible(chromedp.ID("flash")))
	if msg, state := read(t, ctx, "flash", chromedp.Text(chromedp.ID("flash"))), read(t, ctx, "state", chromedp.Text(chromedp.ID("task-state"))); msg != "Requeued 1 dead letter." || state != "pending" {
		t.Errorf("after requeue: flash %q, state %q", msg, state)
	}
	step(t, ctx, "purge from the task page",
		chromedp.Navigate(b.base+"task?q="+urlQueryEscape(q.Name())+"&id="+dead[1]),
		chromedp.WaitVisible(chromedp.ID("task-purge")))
	if !read(t, ctx, "accept confirmations", chromedp.Evaluate[bool](`(window.confirm = () => true, true)`)) {
		t.Fatal("could not replace window.confirm")
	}
	step(t, ctx, "click purge", chromedp.Click(chromedp.ID("task-purge")), chromedp.WaitVisible(chromedp.ID("flash")))
	if msg := read(t, ctx, "flash", chromedp.Text(chromedp.ID("flash"))); msg != "Purged 1 dead letter." {
		t.Errorf("after purge: flash %q", msg)
	}
	if st := b.stats(q.Name()); st.Dead != 0 || st.Pending != 5 {
		t.Errorf("after requeue and purge: dead %d pending %d, want 0 and 5", st.Dead, st.Pending)
	}

	step(t, ctx, "open the queue page", chromedp.Navigate(b.base+"queue?q="+urlQueryEscape(q.Name())),
		chromedp.WaitVisible(chromedp.ID("queue-state")))
	if state := read(t, ctx, "queue state", chromedp.Text(chromedp.ID("queue-state"))); state != "running" {
		t.Errorf("queue state %q with a fresh heartbeat, want running", state)
	}
	if n := read(t, ctx, "live consumers", chromedp.Evaluate[int](`document.querySelectorAll("#consumers tr[data-consumer] .badge.ok").length`)); n != 1 {
		t.Errorf("%d live consumers listed, want 1", n)
	}
}
