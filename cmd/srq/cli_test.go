package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/srqueue/srq"
	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/partition"
)

// runMainEnv makes the test binary run main() instead of the tests (TestMain).
const runMainEnv = "SRQ_TEST_RUN_MAIN"

// TestRedactsRedisURL: a --redis-url that does not parse is shown with its credentials replaced,
// whatever is wrong with it, and so is one that parses but cannot be reached; no fragment of the
// password is in any message.
func TestRedactsRedisURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tt := range []struct {
		name, url string
		code      int
		show      string // the message shows the URL so
		secret    string // and never this
	}{
		{"bad port", "redis://:S3cr3tPW@127.0.0.1:badport", 2, `"redis://:xxxxx@127.0.0.1:badport"`, "S3cr3tPW"},
		{"bad port, user and password", "redis://alice:S3cr3tPW@127.0.0.1:badport/0", 2, `"redis://alice:xxxxx@127.0.0.1:badport/0"`, "S3cr3tPW"},
		{"bad escape in the password", "redis://:S3cr%zzPW@127.0.0.1:6379", 2, `"redis://:xxxxx@127.0.0.1:6379"`, "S3cr"},
		{"bad escape in the host", "redis://:S3cr3tPW@127.0.0.1%zz:6379", 2, `"redis://:xxxxx@127.0.0.1%zz:6379"`, "S3cr3tPW"},
		{"unknown option", "redis://:S3cr3tPW@127.0.0.1:6379/0?frobnicate=1", 2, `"redis://:xxxxx@127.0.0.1:6379/0?frobnicate=1"`, "S3cr3tPW"},
		{"unknown scheme", "http://alice:S3cr3tPW@127.0.0.1:6379", 2, `"http://alice:xxxxx@127.0.0.1:6379"`, "S3cr3tPW"},
		{"slash in the password", "redis://alice:S3/cr3tPW@127.0.0.1:6379", 2, `"redis://alice:xxxxx@127.0.0.1:6379"`, "S3"},
		{"user info without a colon", "rediss://S3cr3tPW@127.0.0.1:6379?nope=1", 2, `"rediss://xxxxx@127.0.0.1:6379?nope=1"`, "S3cr3tPW"},
		{"no scheme", "alice:S3cr3tPW@127.0.0.1:6379", 2, `"alice:xxxxx@127.0.0.1:6379"`, "S3cr3tPW"},
		{"unreachable", "redis://alice:S3cr3tPW@127.0.0.1:1/0", 1, "cannot reach Redis at 127.0.0.1:1", "S3cr3tPW"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(f.ctx, []string{"--redis-url", tt.url, "--queue", "q", "stats"}, strings.NewReader(""), &out, &errb)
			msg := errb.String()
			if code != tt.code || !strings.Contains(msg, tt.show) {
				t.Fatalf("exit %d, stderr %q; want exit %d showing %s", code, msg, tt.code, tt.show)
			}
			if strings.Contains(msg+out.String(), tt.secret) {
				t.Fatalf("the message shows the password: %q", msg)
			}
		})
	}
}

// TestRedisPasswordNeverShown: whatever a password holds ('/', '?', '#', '@', ':' unescaped, or
// only digits), no part of it is printed: not by --help, not by a mistyped flag, and not by any
// error a URL can give (an invalid database number, an unexpected option, Redis unreachable);
// the URL is shown with its credentials as xxxxx.
func TestRedisPasswordNeverShown(t *testing.T) {
	t.Parallel()
	for _, pw := range []string{"Zq/SECRET", "Zq?SECRET", "Zq#SECRET", "Zq@SECRET", "Zq:SECRET", "31415926"} {
		for _, tail := range []struct{ name, at string }{
			{"invalid database number", "127.0.0.1:1/abc"},
			{"unexpected option", "127.0.0.1:1/0?frobnicate=1"},
			{"cannot reach", "127.0.0.1:1/0?max_retries=-1"},
		} {
			u := "redis://alice:" + pw + "@" + tail.at
			for _, args := range [][]string{
				{"--redis-url", u, "--queue", "q", "stats"},
				{"--redis-url", u, "web", "--help"},
				{"--redis-url", u, "stats", "--nope"},
				{"--redis-url", u, "web", "--addr", "127.0.0.1:0"},
			} {
				t.Run(pw+"/"+tail.name+"/"+args[2], func(t *testing.T) {
					t.Parallel()
					var out, errb bytes.Buffer
					code := run(t.Context(), args, strings.NewReader(""), &out, &errb)
					text := out.String() + errb.String()
					for _, part := range []string{"Zq", "SECRET", "3141", "5926"} {
						if strings.Contains(text, part) {
							t.Fatalf("srq %q (exit %d) shows %q of the password:\n%s", args, code, part, text)
						}
					}
					if code == 0 && args[3] != "--help" {
						t.Fatalf("srq %q: exit 0:\n%s", args, text)
					}
					if !strings.Contains(text, "alice:xxxxx@") && !strings.Contains(text, "cannot reach Redis at 127.0.0.1:1: ") {
						t.Fatalf("srq %q (exit %d) shows neither the URL redacted nor the address it cannot reach:\n%s", args, code, text)
					}
				})
			}
		}
	}
}

// TestRedactsRedisURLFromEnv: REDIS_URL's credentials are hidden as --redis-url's are, in the
// error and in what srq web prints when it starts.
func TestRedactsRedisURLFromEnv(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://:S3cr3tPW@127.0.0.1:badport")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--queue", "q", "stats"}, strings.NewReader(""), &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "redis://:xxxxx@127.0.0.1:badport") || strings.Contains(errb.String(), "S3cr3tPW") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	t.Setenv("REDIS_URL", "redis://admin:S3cretPW@127.0.0.1:6481")
	for _, args := range [][]string{{"web", "--help"}, {"web", "--adr", ":1"}, {"--queue", "q", "stats", "-h"}} {
		out.Reset()
		errb.Reset()
		code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if text := out.String() + errb.String(); strings.Contains(text, "S3cretPW") ||
			!strings.Contains(text, `(default "redis://admin:xxxxx@127.0.0.1:6481")`) {
			t.Fatalf("srq %q: exit %d, output:\n%s", args, code, text)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379":              "redis://127.0.0.1:6379",
		"redis://:pw@h:1/0":                   "redis://:xxxxx@h:1/0",
		"redis://user:pw@h":                   "redis://user:xxxxx@h",
		"rediss://user:p@ss:w@rd@h:6380?db=1": "rediss://user:xxxxx@h:6380?db=1",
		"redis://token@h":                     "redis://xxxxx@h",
		"unix://user:pw@/run/redis.sock":      "unix://user:xxxxx@/run/redis.sock",
		"redis:pw@h":                          "redis:xxxxx@h",
		"user:pw@h:6379":                      "user:xxxxx@h:6379",
		"redis://:pw\x1b[31m@h":               "redis://:xxxxx@h",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// evilFixture publishes to a queue whose name holds bidirectional controls (a queue name may not
// hold a control character) and whose partitions, ids, consumer, headers, payload and errors hold
// terminal escape sequences and a right-to-left override; and registers legacyQueue, a name with an
// escape sequence that an earlier srq accepted.
const (
	evilQueue     = "q\u202e\u2066"
	legacyQueue   = "old\x1b[31m"
	evilPartition = "\x1b]0;pwned\x07"
	evilID        = "id\x1b[2J"
	evilConsumer  = "c\x1b[5m\u202e"
	evilError     = "boom\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \u009b2J"
)

func seedEvil(t *testing.T, f *fixture) {
	t.Helper()
	if err := engine.RegisterQueue(f.ctx, f.client, f.prefix, evilQueue, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.client.HSet(f.ctx, engine.RegistryKey(f.prefix), legacyQueue, 1).Err(); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(f.client, engine.Config{Queue: evilQueue, Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []engine.Message{
		{ID: evilID, Partition: evilPartition, Payload: []byte("\x1b[31mred"), Headers: map[string]string{"h\x1b[1m": "v\u009b1m"}},
		{ID: evilID + "2", Partition: evilPartition},
		{ID: evilID + "3", Partition: evilPartition},
		// Listed by srq tasks: one available now, one delayed by its debounce key.
		{ID: evilID + "4", Partition: evilPartition + "2"},
		{Partition: evilPartition + "3", Debounce: &engine.Debounce{Key: "k\x1b[31m\u202e", Window: time.Hour}},
	}
	if _, err := eng.Publish(f.ctx, msgs); err != nil {
		t.Fatal(err)
	}
	ds, err := eng.Fetch(f.ctx, evilConsumer, 2, time.Hour)
	if err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v %d", err, len(ds))
	}
	if _, err := eng.Kill(f.ctx, []engine.Failure{{Receipt: ds[0].Receipt(), Reason: evilError}}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Pause(f.ctx, evilPartition); err != nil {
		t.Fatal(err)
	}
}

// TestEscapesControlCharacters: no human output writes a control character it was given, in
// tables, hints or error messages; each comes out escaped.
func TestEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seedEvil(t, f)
	for _, args := range [][]string{
		{"queues"},
		{"stats"},
		{"--queue", evilQueue, "stats"},
		{"--queue", evilQueue, "partitions", "--by", "paused"},
		{"--queue", evilQueue, "inflight", "--limit", "1"},
		{"--queue", evilQueue, "tasks"},
		{"--queue", evilQueue, "tasks", "--delayed"},
		{"--queue", evilQueue, "dead", "list", "--limit", "1"},
		{"--queue", evilQueue, "dead", "list", "--error", "boom"},
		{"--queue", evilQueue, "task", evilID},
		{"--queue", evilQueue, "task", evilID + "2"},
		{"--queue", evilQueue, "task", "nope\x1b[31m"},
		{"--queue", "nope\x1b]0;t\x07", "stats"},
		{"--queue", legacyQueue, "stats"},
		{"--queue", evilQueue, "watch", "--count", "1"},
		{"--queue", evilQueue, "dead", "requeue", "nope\x1b[31m"},
		{"--queue", evilQueue, "resume", "--partition", evilPartition},
		{"--queue", evilQueue, "pause", "--partition", "!" + evilPartition},
		{"--queue", evilQueue, "--yes", "cancel", evilID + "3"},
		{"--queue", evilQueue, "events"},
		{"--queue", evilQueue, "flow", evilID},
	} {
		code, out, errOut := f.run("", args...)
		for _, text := range []string{out, errOut} {
			if i := strings.IndexFunc(text, func(r rune) bool { return r != '\n' && unsafeRune(r) }); i >= 0 {
				t.Errorf("srq %q (exit %d) wrote the control character %q:\n%s", args, code, text[i:i+1], text)
			}
		}
		if !strings.Contains(out+errOut, `\x1b`) && !strings.Contains(out+errOut, `\u001b`) && !strings.Contains(out+errOut, `\u202e`) {
			t.Errorf("srq %q (exit %d) shows no escaped ESC or RLO:\n%s%s", args, code, out, errOut)
		}
	}
}

// hasControl reports whether text holds a C0 control other than a line break, DEL, a C1 control or
// a bidirectional control, raw.
func hasControl(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool { return r != '\n' && unsafeRune(r) }) >= 0
}

// TestJSONEscapesControlCharacters: --json output holds no control character (C0, DEL, C1) nor
// bidirectional control raw: each is a \u escape, and decodes to the text it stands for.
func TestJSONEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	seedEvil(t, f)
	for _, args := range [][]string{
		{"--json", "queues"},
		{"--json", "stats"},
		{"--json", "--queue", evilQueue, "stats"},
		{"--json", "--queue", evilQueue, "partitions", "--by", "paused"},
		{"--json", "--queue", evilQueue, "inflight"},
		{"--json", "--queue", evilQueue, "tasks"},
		{"--json", "--queue", evilQueue, "tasks", "--delayed"},
		{"--json", "--queue", evilQueue, "dead", "list"},
		{"--json", "--queue", evilQueue, "task", evilID},
		{"--json", "--queue", evilQueue, "watch", "--count", "1"},
	} {
		code, out, errOut := f.run("", args...)
		if code != 0 || hasControl(out) || !json.Valid([]byte(out)) {
			t.Errorf("srq %q: exit %d, stderr %q, stdout:\n%s", args, code, errOut, out)
		}
		if !strings.Contains(out, `\u001b`) && !strings.Contains(out, `\u202e`) {
			t.Errorf("srq %q shows no escaped ESC or RLO:\n%s", args, out)
		}
	}
	var letter struct {
		LastError string `json:"last_error"`
		Consumer  string `json:"consumer"`
	}
	code, out, _ := f.run("", "--json", "--queue", evilQueue, "task", evilID)
	if err := json.Unmarshal([]byte(out), &letter); code != 0 || err != nil || letter.LastError != evilError {
		t.Errorf("task --json: exit %d, %v, last_error %q, want %q", code, err, letter.LastError, evilError)
	}
}

// TestEventsEscapeHostileKind: an event whose kind holds escape sequences (written to the stream
// by anything but srq) is printed with them escaped, by events and events --json alike.
func TestEventsEscapeHostileKind(t *testing.T) {
	t.Parallel()
	f, eng := eventsFixture(t)
	const kind = "pub\x1b]0;pwned\x07\x1b[2J\u009b31m\x7f\u202elished"
	if err := f.client.XAdd(f.ctx, &redis.XAddArgs{Stream: eng.Keys().Events(),
		Values: []string{"k", kind, "id", "e\x1b[5m1", "p", "!p\u0085"}}).Err(); err != nil {
		t.Fatal(err)
	}
	out := f.ok("", "--queue", "ev", "events")
	if hasControl(out) || !strings.Contains(out, `"pub\x1b]0;pwned\a\x1b[2J\u009b31m\x7f\u202elished"`) {
		t.Errorf("events printed the kind raw or not at all:\n%q", out)
	}
	out = f.ok("", "--queue", "ev", "--json", "events")
	var ev struct {
		Kind, ID, Partition string
	}
	if err := json.Unmarshal([]byte(out), &ev); hasControl(out) || err != nil || ev.Kind != kind || ev.ID != "e\x1b[5m1" {
		t.Errorf("events --json: %v %+v:\n%q", err, ev, out)
	}
}

// TestGoRedisLogSilenced runs srq as a process: an unreachable Redis gives the one line that says
// so, without go-redis's own log lines, which -v adds.
func TestGoRedisLogSilenced(t *testing.T) {
	t.Parallel()
	srq := func(args ...string) (int, string) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1", "REDIS_URL=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	code, stderr := srq("--redis-url", "redis://127.0.0.1:1?max_retries=-1", "--queue", "q", "stats")
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "srq: cannot reach Redis at 127.0.0.1:1: ") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line that says Redis cannot be reached", code, stderr)
	}
	code, stderr = srq("--redis-url", "redis://127.0.0.1:1?max_retries=-1", "--queue", "q", "stats", "-v")
	if code != 1 || !strings.Contains(stderr, "srq: go-redis: redis: connection pool: failed to dial") ||
		!strings.Contains(stderr, "srq: cannot reach Redis") {
		t.Fatalf("with -v: exit %d, stderr %q; want go-redis's line too", code, stderr)
	}
}

// TestPagingHintRunsAsPrinted: the hint for the next page repeats every flag given, so that it
// runs as printed and shows the next page.
func TestPagingHintRunsAsPrinted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	for _, tt := range []struct {
		name string
		args []string
		rows int // pages of one row each
	}{
		{"inflight", []string{"inflight", "--queue", "q", "--limit", "1"}, 3},
		{"dead list", []string{"--queue", "q", "dead", "list", "--limit", "1", "--error", "TIMEOUT"}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--redis-url", f.url, "--prefix", f.prefix}, tt.args...)
			seen := map[string]bool{}
			for page := 1; ; page++ {
				var out, errb bytes.Buffer
				if code := run(f.ctx, args, strings.NewReader(""), &out, &errb); code != 0 {
					t.Fatalf("page %d: srq %q: exit %d: %s", page, args, code, errb.String())
				}
				lines := strings.Split(strings.TrimSpace(out.String()), "\n")
				if strings.HasPrefix(lines[0], "ID ") {
					seen[strings.Fields(lines[1])[0]] = true
				}
				last := lines[len(lines)-1]
				if !strings.HasPrefix(last, "more: srq ") {
					break
				}
				if page > 2*tt.rows {
					t.Fatalf("page %d still has a hint: %s", page, last)
				}
				args = strings.Fields(strings.TrimPrefix(last, "more: srq "))
			}
			if len(seen) != tt.rows {
				t.Fatalf("the pages showed %v, want %d rows", seen, tt.rows)
			}
		})
	}
}

func TestShellWord(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"q": "q", "redis://h:1/0": "redis://h:1/0", "": "''", "!42": "'!42'", "a b": "'a b'", "it's": `'it'\''s'`,
		"q\x1b[31m": `$'q\x1b[31m'`, "a'\x07": `$'a\'\a'`,
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestCLIRoughEdges: one prefix per message, --limit 0 refused, the confirmation says how many.
func TestCLIRoughEdges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed()
	code, _, errOut := f.run("", "--queue", "q", "task", "nope")
	if code != 1 || errOut != "srq: not found: no task \"nope\" in queue \"q\" (acked tasks are gone)\n" {
		t.Errorf("unknown task: exit %d, %q; want exit 1 and one prefix", code, errOut)
	}
	code, _, errOut = f.run("", "--queue", "q", "dead", "list", "--cursor", "zz")
	if code != 2 || strings.Count(errOut, "srq:") != 1 || strings.Contains(errOut, "inspect:") {
		t.Errorf("bad cursor: exit %d, %q; want one prefix", code, errOut)
	}
	for _, cmd := range [][]string{{"partitions"}, {"inflight"}, {"tasks"}, {"dead", "list"}} {
		code, out, errOut := f.run("", append(append([]string{"--queue", "q"}, cmd...), "--limit", "0")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "--limit 0 is outside [1, 500]") {
			t.Errorf("%v --limit 0: exit %d, %q %q; want exit 2", cmd, code, out, errOut)
		}
	}
	code, _, errOut = f.run("no\n", "--queue", "q", "dead", "purge", "--all")
	if code != 1 || !strings.Contains(errOut, `Purge all 2 dead letters of queue "q"? Type 'yes'`) {
		t.Errorf("purge --all: exit %d, %q; want the count in the question", code, errOut)
	}
	code, _, errOut = f.run("no\n", "--queue", "q", "dead", "requeue", "--partition", "small")
	if code != 1 || !strings.Contains(errOut, `that match the filter (at most 2,`) {
		t.Errorf("requeue a filter: exit %d, %q; want the bound in the question", code, errOut)
	}
	code, out, errOut := f.run("", "--queue", "q", "dead", "requeue", "bogus-id")
	if code != 1 || out != "requeued 0 dead letters\n" || !strings.Contains(errOut, "the id given names no dead letter") {
		t.Errorf("requeue bogus-id: exit %d, %q %q; want exit 1", code, out, errOut)
	}
	code, out, _ = f.run("", "--queue", "q", "--json", "dead", "purge", "bogus-id", "other")
	if code != 1 || strings.TrimSpace(out) != `{
  "action": "purge",
  "count": 0
}` {
		t.Errorf("purge --json of unknown ids: exit %d, %q; want the count and exit 1", code, out)
	}
	if s, err := f.eng.Stats(f.ctx); err != nil || s.Dead != 2 {
		t.Fatalf("dead letters after refused and empty actions: %+v %v", s, err)
	}
}

// TestTaskShowsPayloadAsJSON: srq task shows a msgpack payload (the default codec's) and a JSON
// one as JSON, escaped; other bytes as an escaped string.
func TestTaskShowsPayloadAsJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	type order struct {
		ID    int               `msgpack:"id"`
		Items []string          `msgpack:"items"`
		Note  string            `msgpack:"note"`
		Blob  []byte            `msgpack:"blob"`
		Codes map[int]string    `msgpack:"codes"`
		Tags  map[string]string `msgpack:"tags"`
	}
	mp, err := msgpack.Marshal(order{ID: 7, Items: []string{"a", "b"}, Note: "x\x1b[31m<b>", Blob: []byte{0, 1}, Codes: map[int]string{404: "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	str, _ := msgpack.Marshal("hello")
	for _, tt := range []struct {
		payload []byte
		want    string
	}{
		{mp, `payload         61 bytes, msgpack: {"blob":"AAE=","codes":{"404":"gone"},"id":7,"items":["a","b"],"note":"x\u001b[31m<b>","tags":null}`},
		{[]byte(`{"id": 7, "note": "x\u001b"}`), `payload         28 bytes, JSON: {"id":7,"note":"x\u001b"}`},
		{str, `payload         6 bytes, msgpack: "hello"`},
		{[]byte("5"), `payload         1 byte, JSON: 5`},
		{[]byte("plain text"), `payload         10 bytes: "plain text"`},
		{[]byte("\xdf\xff\xff\xff\xff"), `payload         5 bytes: "\xdf\xff\xff\xff\xff"`},
		{[]byte{0xc4, 0x02, 0x1b, 0x5b}, `payload         4 bytes, msgpack: "G1s="`},
	} {
		res, err := f.eng.Publish(f.ctx, []engine.Message{{Payload: tt.payload, Partition: partition.Base}})
		if err != nil {
			t.Fatal(err)
		}
		code, out, errOut := f.run("", "--queue", "q", "task", res[0].ID)
		if code != 0 || !strings.Contains(out, tt.want+"\n") {
			t.Errorf("payload %q: exit %d %s\n%s\nwant the line %s", tt.payload, code, errOut, out, tt.want)
		}
	}
	// --json keeps the payload's bytes, base64.
	res, err := f.eng.Publish(f.ctx, []engine.Message{{Payload: mp}})
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := f.run("", "--queue", "q", "--json", "task", res[0].ID)
	var tj TaskJSON
	if err := json.Unmarshal([]byte(out), &tj); err != nil || !bytes.Equal(tj.Payload, mp) {
		t.Fatalf("--json payload %q %v", tj.Payload, err)
	}
}

// TestQueueDelete: `srq queue delete` asks first, refuses while a worker is live unless --force,
// and deletes every key of the queue and its registry entry.
func TestQueueDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed() // w1 fetched just now: a live consumer
	if code, _, stderr := f.run("no\n", "queue", "delete", "q"); code != 1 || !strings.Contains(stderr, "not confirmed") {
		t.Fatalf("declined: exit %d, %s", code, stderr)
	}
	if code, _, stderr := f.run("", "--yes", "queue", "delete", "q"); code != 1 || !strings.Contains(stderr, "live consumers") {
		t.Fatalf("with a live worker: exit %d, %s", code, stderr)
	}
	code, stdout, stderr := f.run("", "--yes", "queue", "delete", "--force", "q")
	if code != 0 || !strings.Contains(stdout, "deleted queue q") {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	if keys, _ := f.client.Keys(f.ctx, f.prefix+"*").Result(); len(keys) != 0 {
		t.Fatalf("left: %v", keys)
	}
	if code, _, stderr := f.run("", "queue"); code != 2 || !strings.Contains(stderr, "subcommand") {
		t.Fatalf("no subcommand: exit %d, %s", code, stderr)
	}
}

// TestPermanentErrorReadsOnce: a task a handler fails with srq.Permanent is listed by srq dead
// list and srq task with the handler's error once, not wrapped in "permanent failure: …".
func TestPermanentErrorReadsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	q, err := srq.NewQueue[string](f.client, srq.QueueConfig{Name: "q", Prefix: f.prefix})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]error{"a": srq.Permanent(errors.New("permanent failure")), "b": srq.Permanent(errors.New("card declined"))}
	for id := range reasons {
		if _, err := q.Publish(f.ctx, id, &srq.PublishOpts{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := srq.NewWorker(q, srq.HandlerFunc[string](func(_ context.Context, t *srq.Task[string]) error {
		return reasons[t.Value]
	}), srq.WorkerConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if s, err := f.eng.Stats(f.ctx); err != nil || s.Dead == 2 {
			break
		}
		if _, err := w.RunOnce(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := f.run("", "--queue", "q", "--json", "dead", "list")
	var page struct {
		Letters []struct {
			ID    string `json:"id"`
			Error string `json:"error"`
		} `json:"letters"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Letters) != 2 {
		t.Fatalf("dead list: exit %d %v %s %s", code, err, out, errOut)
	}
	for _, l := range page.Letters {
		if want := map[string]string{"a": "permanent failure", "b": "card declined"}[l.ID]; l.Error != want {
			t.Errorf("dead letter %s reads %q, want %q", l.ID, l.Error, want)
		}
	}
	code, out, _ = f.run("", "--queue", "q", "task", "b")
	if code != 0 || !regexp.MustCompile(`(?m)^last error +card declined$`).MatchString(out) {
		t.Errorf("srq task b: exit %d\n%s", code, out)
	}
}

// TestHelpNamesEveryFlag: srq --help names every flag of every command it lists (a command's own
// flags, which its --help describes), so that one page of help says what srq takes.
func TestHelpNamesEveryFlag(t *testing.T) {
	t.Parallel()
	var top bytes.Buffer
	if code := run(t.Context(), []string{"--help"}, strings.NewReader(""), &top, io.Discard); code != 0 {
		t.Fatalf("srq --help: exit %d", code)
	}
	cmds := regexp.MustCompile(`(?m)^  ([a-z]+(?: [a-z]+)?)(?:\s{2,}| <| \[)`).FindAllStringSubmatch(top.String(), -1)
	if len(cmds) < 20 {
		t.Fatalf("found %d commands in the help: the parser is broken\n%s", len(cmds), top.String())
	}
	global := map[string]bool{}
	for _, f := range regexp.MustCompile(`(?m)^  --?([a-z-]+)`).FindAllStringSubmatch(top.String(), -1) {
		global[f[1]] = true
	}
	checked := 0
	for _, c := range cmds {
		var help bytes.Buffer
		args := append(strings.Fields(c[1]), "--help")
		if code := run(t.Context(), args, strings.NewReader(""), io.Discard, &help); code != 0 {
			t.Fatalf("srq %s: exit %d\n%s", strings.Join(args, " "), code, help.String())
		}
		for _, f := range regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`).FindAllStringSubmatch(help.String(), -1) {
			checked++
			if !global[f[1]] && !strings.Contains(top.String(), "--"+f[1]) {
				t.Errorf("srq %s takes --%s, which srq --help does not name", c[1], f[1])
			}
		}
	}
	if checked < 100 {
		t.Fatalf("found %d flags in the commands' help: the parser is broken", checked)
	}
}
