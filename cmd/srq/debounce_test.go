package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
)

// TestTaskShowsDebounce: srq stats counts a replaced publish; srq task shows a debounced task's mode, key and the time left before it
// runs, and --json its key and mode; a plain task has none.
func TestTaskShowsDebounce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res, err := f.eng.Publish(f.ctx, []engine.Message{{Partition: "doc", Payload: []byte("v"),
		Debounce: &engine.Debounce{Key: "reindex:7", Window: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].ID
	if again, err := f.eng.Publish(f.ctx, []engine.Message{{Partition: "doc", Payload: []byte("w"),
		Debounce: &engine.Debounce{Key: "reindex:7", Window: time.Hour}}}); err != nil || !again[0].Replaced {
		t.Fatalf("second publish: %+v, %v", again, err)
	}
	if st := decodeStrict[jsonStats](t, f.ok("", "--queue", "q", "--json", "stats")); st.Replaced != 1 || st.Dropped != 0 {
		t.Errorf("stats --json: replaced %d, dropped %d; want 1, 0", st.Replaced, st.Dropped)
	}
	if out := f.ok("", "--queue", "q", "stats"); !regexp.MustCompile(`\ndebounced: replaced / dropped +1 / 0\n`).MatchString(out) {
		t.Errorf("srq stats:\n%s", out)
	}
	out := f.ok("", "--queue", "q", "task", id)
	if !regexp.MustCompile(`\ndebounce key +reindex:7, runs in (59m|1h0m)`).MatchString(out) {
		t.Errorf("srq task:\n%s", out)
	}
	j := decodeStrict[TaskJSON](t, f.ok("", "--queue", "q", "--json", "task", id))
	if j.Debounce == nil || *j.Debounce != (engine.DebounceInfo{Key: "reindex:7", Mode: engine.DebounceReplace}) {
		t.Errorf("--json debounce %+v", j.Debounce)
	}
	if raw := f.ok("", "--queue", "q", "--json", "task", id); !regexp.MustCompile(`"debounce": \{\s*"key": "reindex:7",\s*"mode": "debounce"\s*\}`).MatchString(raw) {
		t.Errorf("--json:\n%s", raw)
	}
}

// TestTasksListsDebounced: srq tasks lists the pending tasks available now, and --delayed the
// delayed ones with the time until they run (by the server's clock) and a debounced task's mode
// and key; --json gives the page; a full page ends with the command for the next.
func TestTasksListsDebounced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.eng.Publish(f.ctx, []engine.Message{
		{ID: "now-1", Partition: "a", Payload: []byte("v")},
		{ID: "now-2", Partition: "b", Payload: []byte("v"), Priority: 3},
		{Partition: "doc", Payload: []byte("v"), Debounce: &engine.Debounce{Key: "reindex:7", Window: time.Hour}},
		{Partition: "sync", Payload: []byte("v"), Debounce: &engine.Debounce{Key: "acct:9", Window: time.Hour, Mode: engine.Throttle}},
	}); err != nil {
		t.Fatal(err)
	}
	now := f.ok("", "--queue", "q", "tasks")
	for _, want := range []string{`\nnow-1 +a +0 +0 +0 +now +-\n`, `\nnow-2 +b +0 +3 +0 +now +-\n`,
		`\n\S+ +sync +0 +0 +0 +now +throttle acct:9\n`} {
		if !regexp.MustCompile(want).MatchString(now) {
			t.Errorf("srq tasks: no line %s in\n%s", want, now)
		}
	}
	delayed := f.ok("", "--queue", "q", "tasks", "--delayed")
	if !regexp.MustCompile(`\n\S+ +doc +0 +0 +0 +(59m\d+(\.\d)?s|1h0m0s) +debounce reindex:7\n`).MatchString(delayed) ||
		strings.Count(delayed, "\n") != 2 {
		t.Errorf("srq tasks --delayed:\n%s", delayed)
	}
	page := decodeStrict[inspect.TaskPage](t, f.ok("", "--queue", "q", "--json", "tasks", "--delayed"))
	if len(page.Tasks) != 1 || page.Tasks[0].Debounce == nil || page.Tasks[0].Debounce.Key != "reindex:7" || page.Next != "" {
		t.Errorf("--json: %+v", page)
	}
	first := f.ok("", "--queue", "q", "tasks", "--limit", "1")
	m := regexp.MustCompile(`\nmore: srq .*--queue q .*tasks --cursor (\S+) --limit 1\n$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("a page of 1 of 3:\n%s", first)
	}
	if second := f.ok("", "--queue", "q", "tasks", "--limit", "1", "--cursor", m[1]); strings.Contains(second, strings.Split(first, "\n")[1]) {
		t.Errorf("the next page repeats the first:\n%s\n%s", first, second)
	}
}
