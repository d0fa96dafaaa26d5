package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
)

var rowRE = regexp.MustCompile(`<tr data-id="([^"]+)"`)

// listIDs returns the ids of the rows of a task list, in order.
func listIDs(page string) []string {
	var ids []string
	for _, m := range rowRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// rowOf returns the row of task id in page.
func rowOf(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<tr data-id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no row for %s:\n%s", id, page)
	}
	return page[i : i+strings.Index(page[i:], "</tr>")]
}

// TestTasksPage: the task lists by state (pending, delayed, completed) list the right tasks in
// order, show a retrying task's attempts and error, page with a cursor, and run a delayed task now
// or cancel tasks, one or the selected, with a message; the tabs lead to in flight and dead.
func TestTasksPage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	name := url.QueryEscape(q.Name())
	pub := func(id string, o srq.PublishOpts) {
		t.Helper()
		o.ID = id
		if _, err := q.Publish(b.ctx, event{}, &o); err != nil {
			t.Fatal(err)
		}
	}
	pub("old-1", srq.PublishOpts{Partition: "old", At: time.Now().Add(-time.Hour)})
	pub("old-2", srq.PublishOpts{Partition: "old", At: time.Now().Add(-time.Hour)})
	pub("new-1", srq.PublishOpts{Partition: "new", Priority: 2})
	pub("new-later", srq.PublishOpts{Partition: "new", Delay: time.Hour})
	pub("soon", srq.PublishOpts{Partition: "wait", Delay: 30 * time.Minute})
	pub("late", srq.PublishOpts{Partition: "wait2", Delay: 2 * time.Hour})
	// old-1 fails once: it is retrying.
	ds, err := q.Engine().Fetch(b.ctx, "w", 1, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].ID != "old-1" {
		t.Fatalf("fetch: %v %v", err, ds)
	}
	if _, err := q.Engine().Reject(b.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), Reason: "upstream 503"}}); err != nil {
		t.Fatal(err)
	}

	page := b.mustGet("tasks?q=" + name)
	// old-1, sent back, is available from its reject on: behind old-2.
	if got := listIDs(page); !slices.Equal(got, []string{"old-2", "old-1", "new-1", "new-later"}) {
		t.Errorf("pending list %v", got)
	}
	if r := rowOf(t, page, "old-1"); !strings.Contains(r, "retrying") || !strings.Contains(r, "upstream 503") {
		t.Errorf("the retrying task's row:\n%s", r)
	}
	if r := rowOf(t, page, "new-later"); !strings.Contains(r, `data-delayed="1"`) || !strings.Contains(r, `data-action="run-now"`) {
		t.Errorf("the delayed task of a due partition:\n%s", r)
	}
	if r := rowOf(t, page, "old-2"); strings.Contains(r, "run-now") || strings.Contains(r, "retrying") {
		t.Errorf("a due task offers run now, or shows as retrying:\n%s", r)
	}
	for _, want := range []string{`id="tab-pending" href="./tasks?q=` + name + `&amp;state=pending" class="current"`, `id="tab-inflight"`,
		`id="tab-dead"`, `id="task-search"`, `2 partitions.`} {
		if !strings.Contains(page, want) {
			t.Errorf("pending page lacks %q", want)
		}
	}
	if got := listIDs(b.mustGet("tasks?state=delayed&q=" + name)); !slices.Equal(got, []string{"soon", "late"}) {
		t.Errorf("delayed list %v", got)
	}

	// Pages of one, by the next link.
	var walked []string
	path := "tasks?limit=1&q=" + name
	for range 10 {
		page := b.mustGet(path)
		walked = append(walked, listIDs(page)...)
		m := regexp.MustCompile(`id="next" href="\./([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			break
		}
		path = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if !slices.Equal(walked, []string{"old-2", "old-1", "new-1", "new-later"}) {
		t.Errorf("pages of one: %v", walked)
	}

	// Run a delayed task now: it leaves the delayed list, its partition is due.
	page = b.follow("run-now", b.post("run-now", url.Values{"q": {q.Name()}, "id": {"soon"}, "state": {"delayed"}}))
	if !strings.Contains(page, "Made task soon available now.") || slices.Contains(listIDs(page), "soon") {
		t.Errorf("after run now:\n%s", page)
	}
	if got := listIDs(b.mustGet("tasks?q=" + name)); !slices.Contains(got, "soon") {
		t.Errorf("pending after run now: %v", got)
	}
	// Cancel the selected.
	page = b.follow("cancel-tasks", b.post("cancel-tasks", url.Values{"q": {q.Name()}, "id": {"old-2", "late"}, "state": {"pending"}}))
	if !strings.Contains(page, "Cancelled 2 tasks.") || slices.Contains(listIDs(page), "old-2") {
		t.Errorf("after a bulk cancel:\n%s", page)
	}
	if st := b.stats(q.Name()); st.Pending != 4 || st.Cancelled != 2 {
		t.Errorf("after the cancels: pending %d, cancelled %d; want 4 and 2", st.Pending, st.Cancelled)
	}
	// A leased task cannot be run now: 409.
	ds, err = q.Engine().Fetch(b.ctx, "w", 1, time.Minute)
	if err != nil || len(ds) != 1 {
		t.Fatal(err)
	}
	if r := b.post("run-now", url.Values{"q": {q.Name()}, "id": {ds[0].ID}}); r.status != http.StatusConflict {
		t.Errorf("run now of a leased task: %d, want 409", r.status)
	}
	// Among several, a task no longer pending is counted in the message.
	pub("more", srq.PublishOpts{Partition: "more", Delay: time.Hour})
	page = b.follow("run-now", b.post("run-now", url.Values{"q": {q.Name()}, "id": {"more", ds[0].ID}}))
	if !strings.Contains(page, "Made 1 task available now. 1 no longer pending.") {
		t.Errorf("after a run now of a delayed and a leased task:\n%s", page)
	}
	// Cancel from the in-flight page marks the running task, and comes back to that page.
	page = b.follow("cancel-tasks", b.post("cancel-tasks", url.Values{"q": {q.Name()}, "id": {ds[0].ID}, "back": {"inflight"}}))
	if !strings.Contains(page, "is running: its worker cancels its handler") || !strings.Contains(page, `id="tab-inflight" href="./inflight?q=`+name+`" class="current"`) {
		t.Errorf("after a cancel of a running task:\n%s", page)
	}
	// A task that ended with its outcome kept: cancelled, a second cancel finds it ended (409).
	pub("kept", srq.PublishOpts{Partition: "kept", Delay: time.Hour, KeepResult: time.Hour})
	if r := b.post("cancel-tasks", url.Values{"q": {q.Name()}, "id": {"kept"}}); r.status != http.StatusSeeOther {
		t.Fatalf("cancel of a pending task: %d", r.status)
	}
	for _, bad := range []struct {
		path string
		form url.Values
		want int
	}{
		{"cancel-tasks", url.Values{"q": {q.Name()}}, http.StatusBadRequest},
		{"run-now", url.Values{"q": {q.Name()}, "id": {"nope"}}, http.StatusNotFound},
		{"cancel-tasks", url.Values{"q": {q.Name()}, "id": {"nope"}}, http.StatusNotFound},
		{"cancel-tasks", url.Values{"q": {q.Name()}, "id": {"kept"}}, http.StatusConflict}, // ended, its outcome kept
		{"run-now", url.Values{"q": {q.Name()}, "id": {"kept"}}, http.StatusConflict},      // ended, its outcome kept
	} {
		if r := b.post(bad.path, bad.form); r.status != bad.want {
			t.Errorf("POST %s %v: %d, want %d", bad.path, bad.form, r.status, bad.want)
		}
	}
	if r := b.get("tasks?state=frobnicated&q=" + name); r.status != http.StatusBadRequest {
		t.Errorf("unknown state: %d", r.status)
	}
	if r := b.get("run-now?q=" + name); r.status != http.StatusMethodNotAllowed {
		t.Errorf("GET run-now: %d", r.status)
	}
	if !strings.Contains(b.logs.String(), "action=run-now") || !strings.Contains(b.logs.String(), "action=cancel-tasks") {
		t.Errorf("the mutations are not logged:\n%s", b.logs.String())
	}
}

// TestCompletedTasks: the completed list shows the tasks whose outcome is kept, newest first, with
// their outcome, result size and error.
func TestCompletedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	for i, fail := range []string{"", "card declined", ""} {
		o := &srq.PublishOpts{ID: "kept-" + strconv.Itoa(i), KeepResult: time.Duration(i+1) * time.Hour}
		if _, err := q.Publish(b.ctx, event{N: i, Fail: fail}, o); err != nil {
			t.Fatal(err)
		}
	}
	b.publish(q, "", 1, "") // its outcome is not kept
	w := b.failingWorker(q)
	for st := b.stats(q.Name()); st.Pending+st.InFlight > 0; st = b.stats(q.Name()) {
		if _, err := w.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	page := b.mustGet("tasks?state=completed&q=" + url.QueryEscape(q.Name()))
	if got := listIDs(page); !slices.Equal(got, []string{"kept-2", "kept-1", "kept-0"}) {
		t.Errorf("completed %v", got)
	}
	if r := rowOf(t, page, "kept-1"); !strings.Contains(r, `data-state="dead"`) || !strings.Contains(r, "card declined") {
		t.Errorf("a dead task's row:\n%s", r)
	}
	if r := rowOf(t, page, "kept-2"); !strings.Contains(r, `data-state="succeeded"`) {
		t.Errorf("a succeeded task's row:\n%s", r)
	}
	if !strings.Contains(page, "3 kept.") {
		t.Errorf("no count:\n%s", page)
	}
}

// TestTaskPageAttemptsAndActions: a dead letter's page shows its payload decoded and the error of
// every failed attempt, oldest first; a delayed task's page runs it now, and cancels it.
func TestTaskPageAttemptsAndActions(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	if _, err := q.Publish(b.ctx, event{N: 7}, &srq.PublishOpts{ID: "flaky", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	attempts := 0
	w, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, task *srq.Task[event]) error {
		attempts++
		return errors.New("attempt " + strconv.Itoa(task.Attempt) + " failed: <b>timeout</b>")
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler), Retry: func(int, error) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	for st := b.stats(q.Name()); st.Dead == 0; st = b.stats(q.Name()) {
		if _, err := w.RunOnce(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	page := b.mustGet("task?q=" + url.QueryEscape(q.Name()) + "&id=flaky")
	i := strings.Index(page, `id="attempt-errors"`)
	if i < 0 {
		t.Fatalf("no attempts' errors:\n%s", page)
	}
	table := page[i:]
	for n := 1; n <= 3; n++ {
		if !strings.Contains(table, `<tr data-attempt="`+strconv.Itoa(n)+`">`) ||
			!strings.Contains(table, "attempt "+strconv.Itoa(n)+" failed: &lt;b&gt;timeout&lt;/b&gt;") {
			t.Errorf("attempt %d's error is missing:\n%s", n, table)
		}
	}
	if !strings.Contains(page, `data-format="msgpack"`) || !strings.Contains(page, `&#34;n&#34;: 7`) {
		t.Errorf("the payload is not decoded:\n%s", page)
	}

	if _, err := q.Publish(b.ctx, event{}, &srq.PublishOpts{ID: "later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	page = b.mustGet("task?q=" + url.QueryEscape(q.Name()) + "&id=later")
	if !strings.Contains(page, `id="task-run-now"`) || !strings.Contains(page, `id="task-cancel"`) {
		t.Fatalf("a delayed task's page offers no run now or cancel:\n%s", page)
	}
	page = b.follow("run-now", b.post("run-now", url.Values{"q": {q.Name()}, "id": {"later"}, "back": {"task"}}))
	if !strings.Contains(page, "Made task later available now.") || strings.Contains(page, `id="task-run-now"`) {
		t.Errorf("after run now from its page:\n%s", page)
	}
	page = b.follow("cancel-tasks", b.post("cancel-tasks", url.Values{"q": {q.Name()}, "id": {"later"}, "state": {"pending"}}))
	if !strings.Contains(page, "Cancelled task later.") {
		t.Errorf("after cancel:\n%s", page)
	}

	ro := setup(t, Config{ReadOnly: true})
	rq := ro.queue("")
	if _, err := rq.Publish(ro.ctx, event{}, &srq.PublishOpts{ID: "x", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"task?id=x&q=", "tasks?state=delayed&q="} {
		if page := ro.mustGet(p + url.QueryEscape(rq.Name())); strings.Contains(page, "run-now") || strings.Contains(page, "cancel-tasks") {
			t.Errorf("read-only %s shows actions:\n%s", p, page)
		}
	}
	if r := ro.post("run-now", url.Values{"q": {rq.Name()}, "id": {"x"}}); r.status != http.StatusForbidden {
		t.Errorf("read-only run now: %d", r.status)
	}
}

// TestWorkersPage: a running worker is listed with its host, pid, queues, concurrency, running
// handlers and start; a consumer that keeps no record is listed without them.
func TestWorkersPage(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	release := make(chan struct{})
	w, err := srq.NewWorker(q, srq.HandlerFunc[event](func(ctx context.Context, _ *srq.Task[event]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), srq.WorkerConfig{Concurrency: 4, Lease: 300 * time.Millisecond, ConsumerID: "worker-a", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runHeldWorker(t, b.ctx, w, release)
	if _, err := q.Engine().Fetch(b.ctx, "plain-consumer", 1, time.Minute); err != nil { // nothing to lease yet
		t.Fatal(err)
	}
	b.publish(q, "p", 1, "")
	host, _ := os.Hostname()
	name := url.QueryEscape(q.Name())
	var row string
	deadline := time.Now().Add(20 * time.Second)
	for {
		page := b.mustGet("workers?q=" + name)
		if i := strings.Index(page, `<tr data-consumer="worker-a" data-known="1">`); i >= 0 {
			row = page[i : i+strings.Index(page[i:], "</tr>")]
			if strings.Contains(row, `<td class="num" data-field="running">1 / 4</td>`) {
				if !strings.Contains(page, `<tr data-consumer="plain-consumer">`) || !strings.Contains(page, "no record") {
					t.Errorf("the consumer without a record:\n%s", page)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's row never showed one running handler:\n%s", page)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{host, `data-field="pid">` + strconv.Itoa(os.Getpid()), q.Name(), "badge ok"} {
		if !strings.Contains(row, want) {
			t.Errorf("the worker's row lacks %q:\n%s", want, row)
		}
	}
}

// TestWorkersPageBatches: a worker running a batch shows it beside its running handlers, with the
// tasks in it.
func TestWorkersPageBatches(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	q := b.queue("")
	release := make(chan struct{})
	w, err := srq.NewBatchWorker(q, srq.BatchHandlerFunc[event](func(ctx context.Context, _ []*srq.Task[event]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}), srq.BatchConfig{MaxSize: 3, MaxWait: time.Hour}, srq.WorkerConfig{Concurrency: 2, Lease: 300 * time.Millisecond,
		ConsumerID: "batcher", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runHeldWorker(t, b.ctx, w, release)
	b.publish(q, "p", 3, "")
	name := url.QueryEscape(q.Name())
	want := `<td class="num" data-field="running">1 / 2 <span class="muted" data-field="batches" title="batch handlers running, and the tasks in them">(1 batch, 3 tasks)</span></td>`
	deadline := time.Now().Add(20 * time.Second)
	for {
		page := b.mustGet("workers?q=" + name)
		if strings.Contains(page, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker's row never showed its batch:\n%s", page)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runHeldWorker runs w until the test ends, then closes release (which its handlers wait on), stops
// it and checks that Run returned nil.
func runHeldWorker(t *testing.T, ctx context.Context, w *srq.Worker, release chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
