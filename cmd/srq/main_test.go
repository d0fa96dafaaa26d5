package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/internal/redistest"
	"github.com/srqueue/srq/partition"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) != "" {
		// The test binary run as srq itself (TestGoRedisLogSilenced).
		main()
	}
	// run calls installRedisLogger, which sets go-redis's global logger: call it once here, before
	// the tests run in parallel, so that no test sets it while another logs. redistest.Main then
	// silences go-redis for the tests.
	installRedisLogger()
	redistest.Main(m)
}

// fixture is a queue "q" with known content under a prefix of the test's own.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	client *redis.Client
	url    string
	prefix string
	eng    *engine.Engine
}

// past is the fixed available-at of the fixture's tasks, so tables show fixed times.
var past = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := redistest.Shared(t)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, client: c, url: "redis://" + srv.Addr, prefix: "cli" + redistest.Queue(t)}
	t.Cleanup(func() { _ = redistest.DropKeys(context.Background(), c, f.prefix) })
	if err := engine.RegisterQueue(ctx, c, f.prefix, "q", 1); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.eng, err = engine.New(c, engine.Config{Queue: "q", Prefix: f.prefix}); err != nil {
		t.Fatal(err)
	}
	return f
}

// seed publishes: big (4 tasks), small (1), !ord (2), the base partition (1), all available
// since past; leases 3 of them to w1 and dead-letters 2 with known errors.
func (f *fixture) seed() {
	f.t.Helper()
	var msgs []engine.Message
	add := func(id string, p partition.Key, at time.Time) {
		msgs = append(msgs, engine.Message{ID: id, Partition: p, At: at, Payload: []byte("payload " + id),
			Headers: map[string]string{"trace": id}})
	}
	for i, id := range []string{"b1", "b2", "b3", "b4"} {
		add(id, "big", past.Add(time.Duration(i)*time.Second))
	}
	add("s1", "small", past.Add(-time.Hour))
	add("o1", "!ord", past.Add(time.Minute))
	add("o2", "!ord", past.Add(2*time.Minute))
	add("z1", partition.Base, past.Add(time.Hour))
	if _, err := f.eng.Publish(f.ctx, msgs); err != nil {
		f.t.Fatal(err)
	}
	// Fetch one at a time, round-robin in the order the partitions were published: b1, s1, o1, z1,
	// b2; leases growing in that order, so the lease deadlines list them in that order.
	var ds []engine.Delivery
	for i := range 5 {
		d, err := f.eng.Fetch(f.ctx, "w1", 1, time.Hour+time.Duration(i)*time.Minute)
		if err != nil || len(d) != 1 {
			f.t.Fatalf("fetch: %v %d", err, len(d))
		}
		ds = append(ds, d...)
	}
	var kill []engine.Failure
	for _, d := range ds {
		if d.ID == "b1" || d.ID == "s1" {
			kill = append(kill, engine.Failure{Receipt: d.Receipt(), Reason: "Timeout talking to " + d.ID})
		}
	}
	if len(kill) != 2 {
		f.t.Fatalf("fetched %v", ds)
	}
	if _, err := f.eng.Kill(f.ctx, kill); err != nil {
		f.t.Fatal(err)
	}
	if err := f.eng.Pause(f.ctx, "big"); err != nil {
		f.t.Fatal(err)
	}
}

// run runs srq against the fixture's Redis and prefix.
func (f *fixture) run(stdin string, args ...string) (code int, stdout, stderr string) {
	f.t.Helper()
	var out, errb bytes.Buffer
	all := append([]string{"--redis-url", f.url, "--prefix", f.prefix}, args...)
	code = run(f.ctx, all, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

var (
	tsRe     = regexp.MustCompile(`\b(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	cursorRe = regexp.MustCompile(`--cursor \S+`)
)

// normalize replaces times that change from run to run (anything not in the fixture's 2020) with
// a placeholder of the same width, so columns stay aligned, and cursors with a placeholder.
func normalize(s string) string {
	s = tsRe.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(m, "2020") {
			return m
		}
		return "YYYY-MM-DDTHH:MM:SSZ"
	})
	return cursorRe.ReplaceAllString(s, "--cursor <cursor>")
}

func TestGoldenTables(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"queues", []string{"queues"}},
		{"stats", []string{"--queue", "q", "stats"}},
		{"partitions_depth", []string{"partitions", "--queue", "q"}},
		{"partitions_age", []string{"--queue", "q", "partitions", "--by", "age"}},
		{"partitions_paused", []string{"--queue", "q", "partitions", "--by", "paused"}},
		{"inflight", []string{"--queue", "q", "inflight"}},
		{"inflight_paged", []string{"--queue", "q", "inflight", "--limit", "2"}},
		{"dead_list", []string{"--queue", "q", "dead", "list"}},
		{"dead_list_paged", []string{"--queue", "q", "dead", "list", "--limit", "1"}},
		{"dead_list_filtered", []string{"--queue", "q", "dead", "list", "--partition", "small"}},
		{"task", []string{"--queue", "q", "task", "b1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := *f
			g.t = t
			g.golden(tt.name, g.ok("", tt.args...))
		})
	}
}

// decodeStrict decodes data into a new T with unknown fields disallowed, and checks that every
// field of T's JSON form appears in data: the schema neither grew nor shrank.
func decodeStrict[T any](t *testing.T, data string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode into %T: %v\n%s", v, err, data)
	}
	var raw any
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(v)
	var want any
	_ = json.Unmarshal(again, &want)
	if !reflect.DeepEqual(keysOf(raw), keysOf(want)) {
		t.Fatalf("fields %v, the documented %T has %v", keysOf(raw), v, keysOf(want))
	}
	return v
}

// keysOf lists the object keys of v, and of the first element of an array, recursively.
func keysOf(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out = append(out, k)
			for _, sub := range keysOf(e) {
				out = append(out, k+"."+sub)
			}
		}
	case []any:
		if len(x) > 0 {
			return keysOf(x[0])
		}
	}
	slices.Sort(out)
	return out
}

// The schema of --json, as docs/cli.md documents it.
type (
	jsonCounters struct {
		Published      int64 `json:"published"`
		Duplicates     int64 `json:"duplicates"`
		Acked          int64 `json:"acked"`
		Rejected       int64 `json:"rejected"`
		TakenBack      int64 `json:"taken_back"`
		HandedBack     int64 `json:"handed_back"`
		Recovered      int64 `json:"recovered"`
		DeadLettered   int64 `json:"dead_lettered"`
		Requeued       int64 `json:"requeued"`
		Purged         int64 `json:"purged"`
		Trimmed        int64 `json:"trimmed"`
		Cancelled      int64 `json:"cancelled"`
		FlowsStarted   int64 `json:"flows_started"`
		FlowsCompleted int64 `json:"flows_completed"`
		FlowsFailed    int64 `json:"flows_failed"`
		Replaced       int64 `json:"replaced"`
		Dropped        int64 `json:"dropped"`
	}
	jsonConsumer struct {
		ID       string    `json:"id"`
		Shard    int       `json:"shard"`
		LastSeen time.Time `json:"last_seen"`
		Live     bool      `json:"live"`
	}
	jsonStats struct {
		Queue               string `json:"queue"`
		Shards              int    `json:"shards"`
		Pending             int64  `json:"pending"`
		InFlight            int64  `json:"in_flight"`
		Dead                int64  `json:"dead"`
		PendingPartitions   int64  `json:"pending_partitions"`
		ReadyPartitions     int64  `json:"ready_partitions"`
		ScheduledPartitions int64  `json:"scheduled_partitions"`
		BlockedPartitions   int64  `json:"blocked_partitions"`
		PausedPartitions    int64  `json:"paused_partitions"`
		HeldPartitions      int64  `json:"held_partitions"`
		Waiting             int64  `json:"waiting"`
		RunningFlows        int64  `json:"running_flows"`
		EndedFlows          int64  `json:"ended_flows"`
		Paused              bool   `json:"paused"`
		PausedShards        int    `json:"paused_shards"`
		jsonCounters
		Consumers     []jsonConsumer `json:"consumers"`
		ConsumerCount int64          `json:"consumer_count"`
		LiveConsumers int64          `json:"live_consumers"`
		ServerTime    time.Time      `json:"server_time"`
	}
	jsonPartition struct {
		Key             string    `json:"key"`
		Shard           int       `json:"shard"`
		Pending         int64     `json:"pending"`
		HeadAvailableAt time.Time `json:"head_available_at"`
		State           string    `json:"state"`
		Paused          bool      `json:"paused"`
		PausedAt        time.Time `json:"paused_at"`
		Limit           int       `json:"limit"`
		Leased          int64     `json:"leased"`
		BlockedUntil    time.Time `json:"blocked_until"`
		NextDue         time.Time `json:"next_due"`
		HeldBy          string    `json:"held_by"`
		HeldError       string    `json:"held_error"`
	}
	jsonInFlight struct {
		ID            string    `json:"id"`
		Shard         int       `json:"shard"`
		Partition     string    `json:"partition"`
		Priority      int       `json:"priority"`
		Attempt       int       `json:"attempt"`
		MaxAttempts   int       `json:"max_attempts"`
		Crashes       int       `json:"crashes"`
		Consumer      string    `json:"consumer"`
		LeaseDeadline time.Time `json:"lease_deadline"`
		EnqueuedAt    time.Time `json:"enqueued_at"`
	}
	jsonDeadLetter struct {
		ID          string            `json:"id"`
		Shard       int               `json:"shard"`
		Partition   string            `json:"partition"`
		Priority    int               `json:"priority"`
		Attempts    int               `json:"attempts"`
		MaxAttempts int               `json:"max_attempts"`
		Crashes     int               `json:"crashes"`
		Error       string            `json:"error"`
		DiedAt      time.Time         `json:"died_at"`
		EnqueuedAt  time.Time         `json:"enqueued_at"`
		Payload     []byte            `json:"payload"`
		Headers     map[string]string `json:"headers"`
	}
	jsonDeadPage struct {
		Letters []jsonDeadLetter `json:"letters"`
		Next    string           `json:"next"`
		Total   int64            `json:"total"`
	}
	jsonWatch struct {
		Stats jsonStats `json:"stats"`
		Rates *Rates    `json:"rates"`
	}
)

func TestJSONSchema(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	out := func(args ...string) string {
		t.Helper()
		code, out, errOut := f.run("yes\n", append([]string{"--queue", "q", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("srq %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	qs := decodeStrict[[]QueueJSON](t, out("queues"))
	if len(qs) != 1 || qs[0] != (QueueJSON{Name: "q", Shards: 1}) {
		t.Fatalf("queues %+v", qs)
	}
	s := decodeStrict[jsonStats](t, out("stats"))
	if s.Pending != 3 || s.InFlight != 3 || s.Dead != 2 || len(s.Consumers) != 1 || s.Consumers[0].ID != "w1" ||
		!s.Consumers[0].Live || s.LiveConsumers != 1 {
		t.Fatalf("stats %+v", s)
	}
	ps := decodeStrict[[]jsonPartition](t, out("partitions", "--by", "age"))
	if len(ps) == 0 || ps[0].Key != "big" || !ps[0].Paused {
		t.Fatalf("partitions %+v", ps)
	}
	ts := decodeStrict[[]jsonInFlight](t, out("inflight"))
	if len(ts) != 3 || ts[0].Consumer != "w1" {
		t.Fatalf("in flight %+v", ts)
	}
	page := decodeStrict[jsonDeadPage](t, out("dead", "list"))
	if page.Total != 2 || len(page.Letters) != 2 || page.Letters[0].Headers["trace"] == "" {
		t.Fatalf("dead %+v", page)
	}
	task := decodeStrict[TaskJSON](t, out("task", "b3"))
	if task.State != "pending" || string(task.Payload) != "payload b3" || task.LeaseDeadline != nil {
		t.Fatalf("task %+v", task)
	}
	watch := out("watch", "--count", "2", "--interval", "10ms")
	lines := strings.Split(strings.TrimSpace(watch), "\n")
	if len(lines) != 2 {
		t.Fatalf("watch printed %d lines:\n%s", len(lines), watch)
	}
	first, second := decodeStrict[jsonWatch](t, lines[0]), decodeStrict[jsonWatch](t, lines[1])
	if first.Rates != nil || second.Rates == nil || second.Stats.Pending != 3 {
		t.Fatalf("watch %+v / %+v", first, second)
	}
	if a := decodeStrict[ActionJSON](t, out("dead", "requeue", "--error", "timeout")); a != (ActionJSON{Action: "requeue", Count: 2}) {
		t.Fatalf("requeue %+v", a)
	}
	if a := decodeStrict[ActionJSON](t, out("pause")); a != (ActionJSON{Action: "pause", Count: 1}) {
		t.Fatalf("pause %+v", a)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		say   string // the message must contain this
	}{
		{"no command", "", nil, 2, "no command given"},
		{"unknown command", "", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"dead without subcommand", "", []string{"dead"}, 2, "list, requeue or purge"},
		{"bad flag", "", []string{"stats", "--nope"}, 2, "flag provided but not defined"},
		{"no queue", "", []string{"partitions"}, 2, "--queue is required"},
		{"unknown queue", "", []string{"--queue", "nosuch", "stats"}, 1, "srq queues"},
		{"bad order", "", []string{"--queue", "q", "partitions", "--by", "size"}, 2, "want depth, age, paused or held"},
		{"limit too big", "", []string{"--queue", "q", "partitions", "--limit", "100000"}, 2, "outside"},
		{"negative watch count", "", []string{"--queue", "q", "watch", "--count", "-1"}, 2, "--count -1 is negative"},
		{"bad cursor", "", []string{"--queue", "q", "dead", "list", "--cursor", "zz"}, 2, "start again with an empty cursor"},
		{"task without id", "", []string{"--queue", "q", "task"}, 2, "exactly one task id"},
		{"unknown task", "", []string{"--queue", "q", "task", "nope"}, 1, "not found: no task"},
		{"requeue needs a selection", "", []string{"--queue", "q", "dead", "requeue"}, 2, "exactly one of"},
		{"requeue ids and all", "", []string{"--queue", "q", "dead", "requeue", "a", "--all"}, 2, "exactly one of"},
		{"purge all unconfirmed", "", []string{"--queue", "q", "dead", "purge", "--all"}, 1, "pass --yes"},
		{"purge all refused", "no\n", []string{"--queue", "q", "dead", "purge", "--all"}, 1, "nothing was changed"},
		{"pause queue unconfirmed", "", []string{"--queue", "q", "pause"}, 1, "pass --yes"},
		{"bad url", "", []string{"--redis-url", "http://x", "--queue", "q", "stats"}, 2, "bad --redis-url"},
		{"unreachable", "", []string{"--redis-url", "redis://127.0.0.1:1", "--queue", "q", "stats"}, 1, "cannot reach Redis"},
		{"help", "", []string{"help"}, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := f.run(tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.say) {
				t.Fatalf("exit %d, stderr %q; want exit %d saying %q", code, errOut, tt.code, tt.say)
			}
		})
	}
	// Nothing was purged or paused by the refused actions.
	s, err := f.eng.Stats(f.ctx)
	if err != nil || s.Dead != 2 {
		t.Fatalf("dead letters after refused purges: %+v %v", s, err)
	}
	code, _, errOut := f.run("", "--queue", "q", "--json", "stats")
	if code != 0 || strings.Contains(errOut, "paused") {
		t.Fatal(errOut)
	}
}

func TestActionsConfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	code, out, errOut := f.run("yes\n", "--queue", "q", "dead", "purge", "--partition", "small")
	if code != 0 || out != "purged 1 dead letter\n" || !strings.Contains(errOut, "Type 'yes'") {
		t.Fatalf("purge: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = f.run("", "--queue", "q", "dead", "requeue", "b1", "nope", "b1")
	if code != 1 || out != "requeued 1 dead letter\n" ||
		errOut != "srq: 1 of the 2 ids given names no dead letter of queue \"q\" (an unknown task, or one that is not dead): "+
			"nothing was done with it; 'srq task <id>' shows where a task is\n" {
		t.Fatalf("requeue by id, one of them unknown: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = f.run("", "--queue", "q", "--yes", "pause")
	if code != 0 || out != "paused queue \"q\"\n" {
		t.Fatalf("pause: exit %d, %q", code, out)
	}
	if ds, err := f.eng.Fetch(f.ctx, "w2", 10, time.Minute); err != nil || len(ds) != 0 {
		t.Fatalf("a paused queue handed out %d tasks (%v)", len(ds), err)
	}
	code, out, _ = f.run("", "--queue", "q", "resume")
	if code != 0 || out != "resumed queue \"q\"\n" {
		t.Fatalf("resume: exit %d, %q", code, out)
	}
	code, out, _ = f.run("", "--queue", "q", "resume", "--partition", "big")
	if code != 0 || out != "resumed partition \"big\" of queue \"q\"\n" {
		t.Fatalf("resume partition: exit %d, %q", code, out)
	}
	if ds, err := f.eng.Fetch(f.ctx, "w2", 10, time.Minute); err != nil || len(ds) == 0 {
		t.Fatalf("after resume: %d tasks (%v)", len(ds), err)
	}
}

// TestQueuesShowsACorruptShardCount: a queue whose stored shard count is unusable is listed with
// why, in the table and in the JSON, and the other queues are listed as usual.
func TestQueuesShowsACorruptShardCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := f.client.HSet(f.ctx, engine.RegistryKey(f.prefix), "broken", "0").Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := f.run("", "queues")
	if code != 0 || !strings.Contains(out, "broken") || !strings.Contains(out, "? (") {
		t.Fatalf("queues: exit %d, %q %q; want the broken queue listed with its error", code, out, errOut)
	}
	code, out, errOut = f.run("", "--json", "queues")
	if code != 0 {
		t.Fatalf("queues --json: exit %d: %s", code, errOut)
	}
	qs := decodeStrict[[]QueueJSON](t, out)
	if len(qs) != 2 || qs[0].Name != "broken" || qs[0].Error == "" || qs[1] != (QueueJSON{Name: "q", Shards: 1}) {
		t.Fatalf("queues --json: %+v; want broken with an error, then q", qs)
	}
}

// Every list command prints an empty JSON array for an empty list, never null (cli.md gives each
// an array).
func TestJSONEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, args := range [][]string{
		{"partitions"}, {"partitions", "--by", "age"}, {"partitions", "--by", "paused"}, {"partitions", "--by", "held"},
		{"inflight"},
	} {
		code, out, errOut := f.run("", append([]string{"--queue", "q", "--json"}, args...)...)
		if code != 0 || strings.TrimSpace(out) != "[]" {
			t.Errorf("srq --json %v on an empty queue: exit %d, %q (%s), want []", args, code, out, errOut)
		}
	}
	for cmd, field := range map[string]string{"flows": `"flows": []`, "tasks": `"tasks": []`} {
		code, out, errOut := f.run("", "--queue", "q", "--json", cmd)
		if code != 0 || !strings.Contains(out, field) {
			t.Errorf("srq --json %s on an empty queue: exit %d, %q (%s), want %s", cmd, code, out, errOut, field)
		}
	}
}
