package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/internal/redistest"
)

// TestInflightPagingAtOffsetCap: near the offset inflight can page to (offset+limit at most
// inspect.MaxOffset), every "more:" line runs as printed, the last page offers none, and an
// offset past the cap is a usage error.
func TestInflightPagingAtOffsetCap(t *testing.T) {
	t.Parallel()
	// The embedded Redis runs the fetches of 10,050 leases in Go, past the client's timeouts, and
	// holds up the package's other tests meanwhile.
	redistest.SharedReal(t, "10,050 leased tasks")
	f := newFixture(t)
	const n = inspect.MaxOffset + 50
	var msgs []engine.Message
	for i := range n {
		msgs = append(msgs, engine.Message{ID: fmt.Sprintf("t%05d", i)})
		if len(msgs) == 1000 || i == n-1 {
			if _, err := f.eng.Publish(f.ctx, msgs); err != nil {
				t.Fatal(err)
			}
			msgs = nil
		}
	}
	for leased := 0; leased < n; {
		ds, err := f.eng.Fetch(f.ctx, "w", 500, time.Hour)
		if err != nil || len(ds) == 0 {
			t.Fatalf("fetch after %d leased: %d, %v", leased, len(ds), err)
		}
		leased += len(ds)
	}
	args := []string{"--queue", "q", "inflight", "--offset", fmt.Sprint(inspect.MaxOffset - 150), "--limit", "50"}
	pages := 0
	for {
		pages++
		code, out, errOut := f.run("", args...)
		if code != 0 {
			t.Fatalf("page %d: srq %q: exit %d: %s", pages, args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 52 && len(lines) != 51 {
			t.Fatalf("page %d: %d lines, want the header, 50 rows and maybe a hint:\n%s", pages, len(lines), out)
		}
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "more: srq ") {
			break
		}
		if pages > 3 {
			t.Fatalf("page %d still offers a next page: %s", pages, last)
		}
		// The hint names the fixture's --redis-url and --prefix; f.run adds them again, the same.
		args = strings.Fields(strings.TrimPrefix(last, "more: srq "))
	}
	if pages != 3 {
		t.Fatalf("%d pages from offset %d, want 3 (the last one ending at %d)", pages, inspect.MaxOffset-150, inspect.MaxOffset)
	}
	code, out, errOut := f.run("", "--queue", "q", "inflight", "--offset", fmt.Sprint(inspect.MaxOffset-49), "--limit", "50")
	if code != 2 || out != "" || !strings.HasPrefix(errOut, fmt.Sprintf("srq: --offset %d is outside [0, %d]\n", inspect.MaxOffset-49, inspect.MaxOffset-50)) {
		t.Fatalf("an offset past the cap: exit %d, %q %q; want exit 2", code, out, errOut)
	}
}

// jsonQueueDelete is `srq queue delete --json`, as docs/cli.md documents it.
type jsonQueueDelete struct {
	Action string `json:"action"`
	Queue  string `json:"queue"`
	Keys   int    `json:"keys"`
}

// TestQueueDeleteUnknownQueue: deleting a queue that is not registered exits with 1 and says so,
// deleting nothing; with --force it deletes the keys left under the name. --json prints the
// documented object.
func TestQueueDeleteUnknownQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	keys, err := engine.NewKeys(f.prefix, "nosuch")
	if err != nil {
		t.Fatal(err)
	}
	stray := keys.Base() + "leftover"
	if err := f.client.Set(f.ctx, stray, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--yes", "queue", "delete", "nosuch"}, {"--yes", "--json", "queue", "delete", "nosuch"},
		{"queue", "delete", "nosuch"}} {
		code, out, errOut := f.run("", args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, `srq: no queue "nosuch" under prefix "`+f.prefix+`": nothing was deleted;`) ||
			strings.Count(errOut, "srq: ") != 1 {
			t.Errorf("srq %q: exit %d, stdout %q, stderr %q; want exit 1 naming the queue", args, code, out, errOut)
		}
	}
	if n, err := f.client.Exists(f.ctx, stray).Result(); err != nil || n != 1 {
		t.Fatalf("the refused deletes removed the key: %d %v", n, err)
	}
	d := decodeStrict[jsonQueueDelete](t, f.ok("", "--yes", "--json", "queue", "delete", "--force", "nosuch"))
	if d != (jsonQueueDelete{Action: "delete", Queue: "nosuch", Keys: 1}) {
		t.Errorf("delete --force of an unregistered queue: %+v", d)
	}
	if n, err := f.client.Exists(f.ctx, stray).Result(); err != nil || n != 0 {
		t.Fatalf("the key left after --force: %d %v", n, err)
	}
	// A registered queue.
	f.seed()
	d = decodeStrict[jsonQueueDelete](t, f.ok("", "--yes", "--json", "queue", "delete", "--force", "q"))
	if d.Action != "delete" || d.Queue != "q" || d.Keys == 0 {
		t.Errorf("delete --json: %+v", d)
	}
	if code, out, errOut := f.run("", "--yes", "queue", "delete", "q"); code != 1 || out != "" || !strings.Contains(errOut, `no queue "q"`) {
		t.Errorf("deleting it again: exit %d, %q %q", code, out, errOut)
	}
}

// TestFlagErrorsPrefixed: a mistyped flag or a bad flag value prints the command's flags, then
// one line that starts with "srq: ", and no line of the flag package's own.
func TestFlagErrorsPrefixed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tt := range []struct {
		args  []string
		say   string
		usage bool // the command's flags are shown
	}{
		{[]string{"--queue", "q", "stats", "--nope"}, "srq: flag provided but not defined: -nope", true},
		{[]string{"--queue", "q", "inflight", "--limit", "x"}, `srq: invalid value "x" for flag -limit: parse error`, true},
		{[]string{"web", "--adr", ":1"}, "srq: flag provided but not defined: -adr", true},
		{[]string{"--queue", "q", "schedule", "list", "--nope"}, "srq: flag provided but not defined: -nope", true},
		{[]string{"--nope", "stats"}, "srq: flag provided but not defined: -nope", false},
	} {
		code, out, errOut := f.run("", tt.args...)
		if code != 2 || out != "" {
			t.Errorf("srq %q: exit %d, stdout %q; want exit 2", tt.args, code, out)
		}
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if len(lines) < 2 || lines[len(lines)-2] != tt.say || lines[len(lines)-1] != "Run 'srq help' for usage." {
			t.Errorf("srq %q: stderr %q; want it to end with %q", tt.args, errOut, tt.say)
		}
		if strings.Count(errOut, "provided but not defined")+strings.Count(errOut, "invalid value") != 1 {
			t.Errorf("srq %q: the mistake is told more than once:\n%s", tt.args, errOut)
		}
		if tt.usage != strings.HasPrefix(errOut, "Usage of srq ") {
			t.Errorf("srq %q: stderr %q; want the command's flags first: %v", tt.args, errOut, tt.usage)
		}
	}
}

// TestEventsNameShardOnShardedQueue: on a queue of two shards every events line says its shard,
// shard=0 included; on a queue of one shard no line does.
func TestEventsNameShardOnShardedQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := engine.RegisterQueue(f.ctx, f.client, f.prefix, "sh", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		eng, err := engine.New(f.client, engine.Config{Queue: engine.ShardQueue("sh", 2, i), Prefix: f.prefix, Events: 100})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.AnnounceEvents(f.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Publish(f.ctx, []engine.Message{{ID: fmt.Sprintf("s%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(f.ok("", "--queue", "sh", "events")), "\n")
	shards := map[string]bool{}
	for _, l := range lines {
		for _, w := range strings.Fields(l) {
			if strings.HasPrefix(w, "shard=") {
				shards[w] = true
			}
		}
		if !strings.Contains(l, "  shard=") {
			t.Errorf("an event line of a sharded queue without its shard: %q", l)
		}
	}
	if len(lines) != 2 || !shards["shard=0"] || !shards["shard=1"] {
		t.Errorf("events of a queue of two shards:\n%s", strings.Join(lines, "\n"))
	}
	// On a sharded queue, --from takes one position per shard: an event's single position from
	// --json is refused (exit 2), the positions joined by commas are taken.
	first := decodeStrict[jsonEvent](t, strings.SplitN(f.ok("", "--queue", "sh", "--json", "events", "--limit", "1"), "\n", 2)[0])
	if code, _, errOut := f.run("", "--queue", "sh", "events", "--from", first.Position); code != 2 || !strings.Contains(errOut, "2 shards") {
		t.Errorf("--from one position on a queue of two shards: exit %d, %q; want exit 2", code, errOut)
	}
	if code, out, errOut := f.run("", "--queue", "sh", "events", "--from", "0-0,0-0"); code != 0 || strings.Count(out, "published") != 2 {
		t.Errorf("--from a position per shard: exit %d\n%s%s", code, out, errOut)
	}
	g, eng := eventsFixture(t)
	if _, err := eng.Publish(g.ctx, []engine.Message{{ID: "one"}}); err != nil {
		t.Fatal(err)
	}
	if out := g.ok("", "--queue", "ev", "events"); !strings.Contains(out, "published") || strings.Contains(out, "shard=") {
		t.Errorf("events of a queue of one shard:\n%s", out)
	}
}

// TestDeadLetterReleasesHeldPartition: dead requeue <id> releases the partition its letter holds,
// the letter running first, at the head of its partition; dead purge <id> releases it too, the
// partition's next task running.
func TestDeadLetterReleasesHeldPartition(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"requeue", "purge"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			if _, err := f.eng.Publish(f.ctx, []engine.Message{{ID: "l1", Partition: "!ledger", HoldOnDead: true, At: past},
				{ID: "l2", Partition: "!ledger", At: past}}); err != nil {
				t.Fatal(err)
			}
			ds, err := f.eng.Fetch(f.ctx, "w", 1, time.Minute)
			if err != nil || len(ds) != 1 || ds[0].ID != "l1" {
				t.Fatalf("fetch: %v %v", ds, err)
			}
			if _, err := f.eng.Kill(f.ctx, []engine.Failure{{Receipt: ds[0].Receipt(), Reason: "balance below zero"}}); err != nil {
				t.Fatal(err)
			}
			if ds, err := f.eng.Fetch(f.ctx, "w", 1, time.Minute); err != nil || len(ds) != 0 {
				t.Fatalf("a held partition handed out %v (%v)", ds, err)
			}
			ps := decodeStrict[[]jsonPartition](t, f.ok("", "--queue", "q", "--json", "partitions", "--by", "held"))
			if len(ps) != 1 || ps[0].HeldBy != "l1" {
				t.Fatalf("partitions --by held before the %s: %+v", verb, ps)
			}
			want := map[string]string{"requeue": "requeued 1 dead letter\n", "purge": "purged 1 dead letter\n"}[verb]
			if out := f.ok("", "--queue", "q", "dead", verb, "l1"); out != want {
				t.Fatalf("dead %s l1: %q, want %q", verb, out, want)
			}
			if out := f.ok("", "--queue", "q", "partitions", "--by", "held"); out != "no partitions\n" {
				t.Fatalf("partitions --by held after the %s: %q", verb, out)
			}
			next := map[string]string{"requeue": "l1", "purge": "l2"}[verb]
			if ds, err := f.eng.Fetch(f.ctx, "w", 1, time.Minute); err != nil || len(ds) != 1 || ds[0].ID != next {
				t.Fatalf("after dead %s l1 the partition handed out %v (%v), want %s", verb, ds, err, next)
			}
		})
	}
}

// TestUnusableStoredShardCount: a queue whose registry entry holds no usable shard count is a
// runtime error (exit 1) that says how to repair it, and queue delete --force deletes its keys,
// of every shard, and the entry.
func TestUnusableStoredShardCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := engine.RegisterQueue(f.ctx, f.client, f.prefix, "broken", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		eng, err := engine.New(f.client, engine.Config{Queue: engine.ShardQueue("broken", 2, i), Prefix: f.prefix})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Publish(f.ctx, []engine.Message{{ID: fmt.Sprint("t", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.client.HSet(f.ctx, engine.RegistryKey(f.prefix), "broken", "banana").Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := f.run("", "--queue", "broken", "stats")
	if code != 1 || out != "" || !strings.Contains(errOut, `invalid shard count "banana"`) ||
		!strings.Contains(errOut, "srq queue delete broken --force") || strings.Contains(errOut, "srq help") {
		t.Errorf("stats of the broken queue: exit %d, %q, %q; want exit 1 saying how to repair it", code, out, errOut)
	}
	if code, _, _ := f.run("", "--yes", "queue", "delete", "broken"); code != 1 {
		t.Errorf("queue delete without --force: exit %d, want 1", code)
	}
	d := decodeStrict[jsonQueueDelete](t, f.ok("", "--yes", "--json", "queue", "delete", "--force", "broken"))
	if d.Queue != "broken" || d.Keys == 0 {
		t.Errorf("queue delete --force: %+v", d)
	}
	if n, err := f.client.HExists(f.ctx, engine.RegistryKey(f.prefix), "broken").Result(); err != nil || n {
		t.Errorf("the registry entry is left: %v %v", n, err)
	}
	if keys, err := f.client.Keys(f.ctx, f.prefix+":{broken*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys left: %v %v", keys, err)
	}
}
