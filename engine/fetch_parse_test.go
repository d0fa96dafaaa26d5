package engine

import (
	"strings"
	"testing"
	"time"
)

// TestParseFetch reads fetch.lua's flat reply: three values, then taskFields per task. A reply
// whose tasks do not divide into whole rows is refused with an error.
func TestParseFetch(t *testing.T) {
	t.Parallel()
	row := func(id, token string) []any {
		return []any{id, token, "p1", "2", "3", "5", "1000", "2000", "payload", "", "1", "boom"}
	}
	reply := func(rows ...[]any) []any {
		out := []any{int64(1000), int64(61000), int64(0)}
		for _, r := range rows {
			out = append(out, r...)
		}
		return out
	}
	sent := time.UnixMilli(500)

	ds, bad, next, err := parseFetch(reply(row("a", "00000000000000000007"), row("b", "00000000000000000008")), sent, time.Minute)
	if err != nil || len(bad) != 0 {
		t.Fatal(err)
	}
	if next != 0 || len(ds) != 2 {
		t.Fatalf("next due %v, %d deliveries; want 0 and 2", next, len(ds))
	}
	d := ds[1]
	if d.ID != "b" || d.Token != 8 || d.Partition != "p1" || d.Priority != 2 || d.Attempt != 3 ||
		d.MaxAttempts != 5 || !d.EnqueuedAt.Equal(time.UnixMilli(1000)) || !d.AvailableAt.Equal(time.UnixMilli(2000)) ||
		string(d.Payload) != "payload" || d.Crashes != 1 || d.LastError != "boom" ||
		!d.LeaseDeadline.Equal(sent.Add(time.Minute-time.Millisecond)) {
		t.Fatalf("second delivery %+v", d)
	}

	ds, _, next, err = parseFetch([]any{int64(1000), int64(61000), int64(-1)}, sent, time.Minute)
	if err != nil || len(ds) != 0 || next != -1 {
		t.Fatalf("empty fetch: %v, %v, %v; want no deliveries, -1, nil", ds, next, err)
	}

	for name, bad := range map[string]any{
		"not an array":     "x",
		"too short":        []any{int64(1000), int64(61000)},
		"a partial task":   reply(row("a", "00000000000000000007"))[:3+taskFields-1],
		"a task and a bit": append(reply(row("a", "00000000000000000007")), "extra"),
		"a bad token":      reply(row("a", "seven")),
	} {
		if _, _, _, err := parseFetch(bad, sent, time.Minute); err == nil || !strings.Contains(err.Error(), "srq:") {
			t.Errorf("%s: err %v, want a malformed-reply error", name, err)
		}
	}

	// A task whose record holds what srq did not write is set aside, with its lease, to be
	// dead-lettered; the tasks beside it are delivered.
	corrupt := row("b", "00000000000000000008")
	corrupt[9] = "\x05" // headers: a count of 5 and nothing after it
	ds, bad, _, err = parseFetch(reply(row("a", "00000000000000000007"), corrupt, row("c", "00000000000000000009")), sent, time.Minute)
	if err != nil || len(ds) != 2 || ds[0].ID != "a" || ds[1].ID != "c" || len(bad) != 1 ||
		bad[0].ID != "b" || bad[0].Token != 8 || !strings.Contains(bad[0].Reason, "unreadable task record") {
		t.Fatalf("a corrupt task between two: %+v, unreadable %+v, %v", ds, bad, err)
	}
}
