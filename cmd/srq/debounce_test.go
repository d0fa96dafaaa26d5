package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
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
