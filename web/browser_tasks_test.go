package web

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

// TestBrowserTaskLists drives the task lists, the task page and the workers page in headless
// Chromium: the pending and delayed lists show their tasks, a delayed task runs now from its row,
// the selected tasks are cancelled (the confirmation accepted), the search finds a task by id, a
// dead letter's page shows every attempt's error, and the workers page shows the running worker
// with its running handler.
func TestBrowserTaskLists(t *testing.T) {
	ctx := browser(t)
	b := setup(t, Config{RefreshInterval: 300 * time.Millisecond})
	q := b.queue("")
	name := urlQueryEscape(q.Name())
	// A dead letter that failed three times, each with its own error.
	if _, err := q.Publish(b.ctx, event{N: 1}, &srq.PublishOpts{ID: "flaky", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	fw, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, task *srq.Task[event]) error {
		return errors.New("smtp: 451 try again (attempt " + string(rune('0'+task.Attempt)) + ")")
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler), Retry: func(int, error) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	for st := b.stats(q.Name()); st.Dead == 0; st = b.stats(q.Name()) {
		if _, err := fw.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []struct {
		id string
		o  srq.PublishOpts
	}{
		{"a-1", srq.PublishOpts{Partition: "a"}}, {"a-2", srq.PublishOpts{Partition: "a"}},
		{"b-1", srq.PublishOpts{Partition: "b", Delay: time.Hour}}, {"c-1", srq.PublishOpts{Partition: "c", Delay: 2 * time.Hour}},
	} {
		m.o.ID = m.id
		if _, err := q.Publish(b.ctx, event{}, &m.o); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(what string) []string {
		t.Helper()
		return read(t, ctx, what, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#tasks tbody tr")).map(tr => tr.getAttribute("data-id"))`))
	}
	acceptConfirm := func() {
		t.Helper()
		if !read(t, ctx, "accept confirmations", chromedp.Evaluate[bool](`(window.confirm = () => true, true)`)) {
			t.Fatal("could not replace window.confirm")
		}
	}

	step(t, ctx, "open the tasks page from the header", chromedp.Navigate(b.base+"queue?q="+name),
		chromedp.WaitVisible(chromedp.ID("nav-tasks")), chromedp.Click(chromedp.ID("nav-tasks")),
		chromedp.WaitVisible(chromedp.ID("tasks")))
	if got := ids("the pending tasks"); !slices.Equal(got, []string{"a-1", "a-2"}) {
		t.Errorf("pending %v, want a-1, a-2", got)
	}
	step(t, ctx, "the delayed tab", chromedp.Click(chromedp.ID("tab-delayed")), chromedp.WaitVisible(chromedp.CSS("#tab-delayed.current")))
	if got := ids("the delayed tasks"); !slices.Equal(got, []string{"b-1", "c-1"}) {
		t.Errorf("delayed %v, want b-1, c-1", got)
	}
	step(t, ctx, "run b-1 now", chromedp.Click(chromedp.CSS(`button[data-action="run-now"][data-id="b-1"]`)),
		chromedp.WaitVisible(chromedp.ID("flash")))
	if msg := read(t, ctx, "flash", chromedp.Text(chromedp.ID("flash"))); msg != "Made task b-1 available now." {
		t.Errorf("flash after run now: %q", msg)
	}
	if got := ids("the delayed tasks after run now"); !slices.Equal(got, []string{"c-1"}) {
		t.Errorf("delayed after run now %v, want c-1", got)
	}
	step(t, ctx, "back to the pending tab", chromedp.Click(chromedp.ID("tab-pending")), chromedp.WaitVisible(chromedp.CSS("#tab-pending.current")))
	if got := ids("the pending tasks after run now"); !slices.Equal(got, []string{"a-1", "a-2", "b-1"}) {
		t.Errorf("pending after run now %v", got)
	}
	acceptConfirm()
	step(t, ctx, "cancel the selected", chromedp.Click(chromedp.CSS(`tr[data-id="a-1"] input[type=checkbox]`)),
		chromedp.Click(chromedp.CSS(`tr[data-id="b-1"] input[type=checkbox]`)), chromedp.Click(chromedp.ID("cancel-selected")),
		chromedp.WaitVisible(chromedp.ID("flash")))
	if msg := read(t, ctx, "flash", chromedp.Text(chromedp.ID("flash"))); msg != "Cancelled 2 tasks." {
		t.Errorf("flash after the bulk cancel: %q", msg)
	}
	if got := ids("the pending tasks after the cancel"); !slices.Equal(got, []string{"a-2"}) {
		t.Errorf("pending after the cancel %v, want a-2", got)
	}

	// The search by id, to the dead letter's page and its attempts' errors.
	step(t, ctx, "find the dead letter", chromedp.SendKeys(chromedp.CSS(`#task-search input[name="id"]`), "flaky"),
		chromedp.Submit(chromedp.CSS(`#task-search`)), chromedp.WaitVisible(chromedp.ID("attempt-errors")))
	errs := read(t, ctx, "the attempts' errors", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#attempt-errors tbody tr")).map(tr => Array.from(tr.cells).map(td => td.textContent.trim()).join(" | "))`))
	if len(errs) != 3 || !strings.HasPrefix(errs[0], "1 | ") || !strings.HasSuffix(errs[0], " | smtp: 451 try again (attempt 1)") ||
		!strings.HasPrefix(errs[2], "3 | ") || !strings.HasSuffix(errs[2], " | smtp: 451 try again (attempt 3)") {
		t.Errorf("attempts' errors %q", errs)
	}
	if state := read(t, ctx, "state", chromedp.Text(chromedp.ID("task-state"))); state != "dead" {
		t.Errorf("state %q", state)
	}

	// The workers page, with a worker running a task.
	release := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, _ *srq.Task[event]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 2, Lease: 300 * time.Millisecond, ConsumerID: "browser-worker", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(run) })
	defer func() { close(release); stop(); wg.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		step(t, ctx, "open the workers page", chromedp.Navigate(b.base+"workers?q="+name), chromedp.WaitVisible(chromedp.ID("workers")))
		running := read(t, ctx, "running", chromedp.Evaluate[string](
			`(document.querySelector('tr[data-consumer="browser-worker"] [data-field="running"]') || {textContent: ""}).textContent`))
		if running == "1 / 2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workers page shows running %q, want 1 / 2", running)
		}
		time.Sleep(100 * time.Millisecond)
	}
	host, _ := os.Hostname()
	if got := read(t, ctx, "host", chromedp.Text(chromedp.CSS(`tr[data-consumer="browser-worker"] [data-field="host"]`))); got != host {
		t.Errorf("host %q, want %q", got, host)
	}
}

// TestBrowserTasksScreenshot saves a screenshot of the pending tasks list as docs/tasks.png when
// SRQ_SCREENSHOT is set.
func TestBrowserTasksScreenshot(t *testing.T) {
	if os.Getenv("SRQ_SCREENSHOT") == "" {
		t.Skip("set SRQ_SCREENSHOT=1 to write docs/tasks.png")
	}
	ctx := browser(t)
	b := setup(t, Config{})
	q := b.queue("emails")
	b.kill(q, "!tenant-17", 1, "smtp: 554 mailbox unavailable")
	for i, p := range []string{"!user-ada", "!user-ada", "!user-bob", "newsletter", "newsletter", "!user-cy"} {
		o := &srq.PublishOpts{Partition: p, Priority: i % 3, At: time.Now().Add(-time.Duration(10-i) * time.Minute)}
		if _, err := q.Publish(b.ctx, event{N: i}, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Publish(b.ctx, event{N: 9}, &srq.PublishOpts{Partition: "newsletter", Delay: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Engine().Fetch(b.ctx, "screenshot", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatal(err)
	}
	if _, err := q.Engine().Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), Reason: "smtp: 451 greylisted, try again"}}); err != nil {
		t.Fatal(err)
	}
	step(t, ctx, "open the tasks page", chromedp.Navigate(b.base+"tasks?q=emails"), chromedp.WaitVisible(chromedp.ID("tasks")))
	png := read(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	path := filepath.Join("..", "docs", "tasks.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}
