package main

import (
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// TestStatsSummary: stats without --queue prints one line per registered queue, with its state
// and sizes, a queue whose shard count is unusable with its error, and the same as JSON.
func TestStatsSummary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	if err := f.client.HSet(f.ctx, engine.RegistryKey(f.prefix), "broken", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterQueue(f.ctx, f.client, f.prefix, "idle", 1); err != nil {
		t.Fatal(err)
	}
	f.golden("stats_summary", f.ok("", "stats"))

	qs := decodeStrict[[]StatsSummaryJSON](t, f.ok("", "--json", "stats"))
	if len(qs) != 3 || qs[0].Queue != "broken" || qs[0].State != "error" || qs[0].Error == "" {
		t.Fatalf("stats --json: %+v; want broken (with its error), idle, q", qs)
	}
	want := StatsSummaryJSON{Queue: "q", Shards: 1, State: "running", Pending: 3, InFlight: 3, Dead: 2, LiveConsumers: 1, Published: 8}
	if qs[1] != (StatsSummaryJSON{Queue: "idle", Shards: 1, State: "no live worker"}) || qs[2] != want {
		t.Fatalf("stats --json: %+v\nwant idle empty and %+v", qs[1:], want)
	}
}

// TestPauseNamesTheOrderedSibling: pausing (or resuming) a partition that has no task while the
// partition of the same name with or without the leading "!" has some does what it was asked and
// says, on stderr, which partition holds the tasks and how to name it.
func TestPauseNamesTheOrderedSibling(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	msgs := []engine.Message{{Partition: "!u3"}, {Partition: "!u3"}, {Partition: "u4"}, {Partition: "u5"}, {Partition: "!u5"}}
	if _, err := f.eng.Publish(f.ctx, msgs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		verb, key string
		note      string // "" when none is due
	}{
		{"pause", "u3", `srq: note: partition "u3" has no pending task; the ordered partition "!u3" has 2 pending and 0 leased: to pause it, run again with --partition '!u3'`},
		{"resume", "u3", `to resume it, run again with --partition '!u3'`},
		{"pause", "!u4", `the unordered partition "u4" has 1 pending and 0 leased: to pause it, run again with --partition u4`},
		{"pause", "u5", ""},  // it has a task of its own
		{"pause", "zz", ""},  // neither has any
		{"pause", "!u3", ""}, // the right one
	} {
		code, out, errOut := f.run("", "--queue", "q", tt.verb, "--partition", tt.key)
		if code != 0 || out != tt.verb+"d partition \""+tt.key+"\" of queue \"q\"\n" {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q", tt.verb, tt.key, code, out, errOut)
		}
		if tt.note == "" && errOut != "" || !strings.Contains(errOut, tt.note) {
			t.Errorf("%s %s: stderr %q, want %q", tt.verb, tt.key, errOut, tt.note)
		}
	}
	// The pause and the resume stand on the partition named.
	p, _, err := f.eng.Partitions(f.ctx, "u3", "!u4", "!u3")
	if err != nil || p[0].Paused() || !p[1].Paused() || !p[2].Paused() {
		t.Fatalf("partitions u3, !u4 and !u3: %+v %v; want u3 resumed, the others paused", p, err)
	}
	if sibling(partition.Base) != "" || sibling("!") != "" || sibling("!a") != "a" || sibling("a") != "!a" {
		t.Error("sibling")
	}
}

// TestStatsHandedBack: stats counts the tasks workers handed back apart from the rejected ones, in
// its table and as handed_back in --json.
func TestStatsHandedBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.eng.Publish(f.ctx, []engine.Message{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	ds, err := f.eng.Fetch(f.ctx, "w", 2, time.Minute)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	res, err := f.eng.Reject(f.ctx, []engine.Rejection{{Receipt: ds[0].Receipt(), HandBack: true},
		{Receipt: ds[1].Receipt(), HandBack: true}})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("hand back: %v %+v", err, res)
	}
	if out := f.ok("", "--queue", "q", "stats"); !strings.Contains(out, "\nhanded back                         2\n") ||
		!strings.Contains(out, "\nrejected                            0\n") {
		t.Errorf("stats:\n%s", out)
	}
	if s := decodeStrict[jsonStats](t, f.ok("", "--queue", "q", "--json", "stats")); s.HandedBack != 2 || s.Rejected != 0 {
		t.Errorf("stats --json: handed_back %d, rejected %d; want 2, 0", s.HandedBack, s.Rejected)
	}
}
