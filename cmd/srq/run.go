package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/engine"
	"github.com/srqueue/srq/inspect"
	"github.com/srqueue/srq/partition"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

const usageText = `usage: srq [global flags] <command> [flags] [args]

Commands:
  queues                       list the registered queues
  stats                        sizes, counters, consumers of --queue; without --queue, one line per queue
  workers                      the consumers of --queue seen in the last hour, with each running worker's record:
                               host, pid, queues, handlers running, batches and the tasks in them
  partitions                   top partitions: --by depth|age|paused|held, --limit N
  inflight                     leased tasks, earliest deadline first: --offset N, --limit N
  tasks                        pending tasks available now, longest waiting partition first; --delayed: the
                               delayed ones, soonest first; with their debounce key and time left: --limit N,
                               --cursor C
  dead list                    dead letters, newest first: --partition P, --base, --error S, --limit N, --cursor C,
                               --window N (letters looked at per shard when filtering)
  dead requeue <id>...         move dead letters back to pending; or --all, or a filter (--partition/--base/--error)
  dead purge <id>...           delete dead letters; same selection as requeue
  pause [--partition P|--base] pause one partition (--base: the base partition), or the whole queue
  resume [--partition P|--base] resume one partition, or the whole queue
  task <id>                    one task's record
  cancel <id>                  cancel a task: a pending one never runs, a running one's handler is cancelled;
                               --reason R
  flow <id>                    one flow (whose first step is in --queue): its steps by level, with their states,
                               parents, results and errors
  flows                        the queue's running flows, newest first: --ended, --offset N, --limit N
  events                       the newest --limit events (default 20), or those after --from P (0: the oldest;
                               now: none before); --follow keeps printing them as they come
  queue delete <name>          delete a queue: every key of it and its registry entry (--force: even with live workers,
                               or the keys left of a queue that is not registered)
` + scheduleUsage + `  watch                        refresh stats every --interval, with rates; --count N stops after N
  web                          serve the web dashboard and /metrics: --addr (default 127.0.0.1:8080),
                               --read-only, --user with $SRQ_WEB_PASSWORD or --password-file F (basic auth),
                               --insecure-public, --allowed-host H (a host name it answers to, beside
                               localhost; repeatable)

A partition is named as stored: an ordered partition's key starts with "!" (--partition '!42').

Global flags (also accepted after the command):
  --redis-url URL   Redis to connect to (default $REDIS_URL, else redis://127.0.0.1:6379);
                    rediss:// for TLS
  --tls-ca FILE     PEM certificates of the CAs that sign the server's certificate (rediss://)
  --tls-cert FILE   PEM client certificate, with --tls-key FILE its private key (rediss://)
  --prefix P        key prefix of the queues (default "srq")
  --queue Q         the queue to act on
  --json            print JSON (docs/cli.md documents the schema)
  --yes             do not ask before a destructive action
  -v                print go-redis's own log lines (connection retries) too

Exit codes: 0 success, 1 runtime error, 2 usage error.
`

// usageError is an error in how srq was called; it exits with 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// options are the flags every command shares.
type options struct {
	redisURL, prefix, queue string
	tlsCA, tlsCert, tlsKey  string
	json, yes, verbose      bool
}

// register adds the shared flags to fs, each with its current value as its default. The usage
// fs prints (--help, a mistyped flag) shows --redis-url's default with its credentials redacted.
func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.redisURL, "redis-url", o.redisURL, "Redis URL (default $REDIS_URL, else redis://127.0.0.1:6379)")
	fs.Lookup("redis-url").DefValue = redactURL(o.redisURL)
	fs.StringVar(&o.prefix, "prefix", o.prefix, "key prefix of the queues")
	fs.StringVar(&o.queue, "queue", o.queue, "the queue to act on")
	fs.StringVar(&o.tlsCA, "tls-ca", o.tlsCA, "PEM file of the CA certificates to trust (rediss://)")
	fs.StringVar(&o.tlsCert, "tls-cert", o.tlsCert, "PEM file of the client certificate (rediss://)")
	fs.StringVar(&o.tlsKey, "tls-key", o.tlsKey, "PEM file of the client certificate's private key (rediss://)")
	fs.BoolVar(&o.json, "json", o.json, "print JSON")
	fs.BoolVar(&o.yes, "yes", o.yes, "do not ask before a destructive action")
	fs.BoolVar(&o.verbose, "v", o.verbose, "print go-redis's log lines too")
}

// cli is one invocation: its streams, options and, once connected, its Inspector.
type cli struct {
	ctx    context.Context
	stdin  *bufio.Reader
	stdout io.Writer
	stderr io.Writer
	opts   options
	// global holds the shared flags as given before the command, for hints that repeat the
	// command line.
	global *flag.FlagSet
	client *redis.Client
	in     *inspect.Inspector
	// now is the local clock, for watch's pacing only; tests replace it.
	now func() time.Time
	// webTimeouts are srq web's server timeouts; tests shorten them.
	webTimeouts webTimeouts
}

// run runs srq with args (without the program name) and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return newCLI(ctx, stdin, stdout, stderr).main(args)
}

// newCLI returns an invocation over the streams, with the defaults.
func newCLI(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) *cli {
	return &cli{ctx: ctx, stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr, now: time.Now,
		webTimeouts: defaultWebTimeouts}
}

// main runs the command args names (without the program name) and returns the exit code.
func (c *cli) main(args []string) int {
	installRedisLogger()
	stderr := c.stderr
	c.opts = options{redisURL: os.Getenv("REDIS_URL"), prefix: engine.DefaultPrefix}
	if c.opts.redisURL == "" {
		c.opts.redisURL = "redis://127.0.0.1:6379"
	}
	err := c.dispatch(args)
	if c.client != nil {
		_ = c.client.Close()
	}
	if c.opts.verbose {
		setRedisLog(nil)
	}
	var ue usageError
	var stored *engine.StoredShardCountError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &stored):
		// Not the command's mistake: what Redis holds. Say how to repair it.
		fmt.Fprintf(stderr, "srq: %s; repair the entry (redis-cli HSET %s %s <shards>) or delete the queue (srq queue delete %s --force)\n",
			message(err), escapeText(stored.Key), escapeText(stored.Queue), escapeText(stored.Queue))
		return exitRuntime
	case errors.As(err, &ue), errors.Is(err, engine.ErrInvalid):
		fmt.Fprintf(stderr, "srq: %s\nRun 'srq help' for usage.\n", message(err))
		return exitUsage
	default:
		fmt.Fprintf(stderr, "srq: %s\n", message(err))
		return exitRuntime
	}
}

// prefixRE matches the package prefixes the layers under the command put on their errors
// ("inspect: ", the sentinel errors' "srq: "), at the start and after each ": ".
var prefixRE = regexp.MustCompile(`(^|: )(?:(?:srq|inspect|srq web): )+`)

// message is err's text as the command prints it after its one "srq: ": without the prefixes of
// the layers under it, and with control characters escaped (escapeText).
func message(err error) string {
	return escapeText(prefixRE.ReplaceAllString(err.Error(), "$1"))
}

// installRedisLogger routes go-redis's log lines (a failed dial, printed with the file and line
// in go-redis) to the stderr of an invocation run with -v, and drops them otherwise: the command
// says itself that it cannot reach Redis. It sets go-redis's global logger once per process.
var installRedisLogger = sync.OnceFunc(func() { redis.SetLogger(redisLogger{}) })

// redisLog is where redisLogger writes: the stderr of the invocation run with -v, else nowhere.
// It is global, as go-redis's logger is, and go-redis logs from goroutines of its own with a
// context of their own.
var redisLog struct {
	sync.Mutex
	w io.Writer
}

// setRedisLog sets where go-redis's lines go; nil drops them.
func setRedisLog(w io.Writer) {
	redisLog.Lock()
	defer redisLog.Unlock()
	redisLog.w = w
}

// redisLogger is go-redis's logger in the command.
type redisLogger struct{}

func (redisLogger) Printf(_ context.Context, format string, v ...any) {
	redisLog.Lock()
	defer redisLog.Unlock()
	if redisLog.w != nil {
		fmt.Fprintf(redisLog.w, "srq: go-redis: %s\n", escapeText(fmt.Sprintf(format, v...)))
	}
}

func (c *cli) dispatch(args []string) error {
	global := flag.NewFlagSet("srq", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	c.opts.register(global)
	c.global = global
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, usageText)
			return err
		}
		return usagef("%v", err)
	}
	args = global.Args()
	if len(args) == 0 {
		return usagef("no command given")
	}
	cmd, rest := args[0], args[1:]
	if cmd == "dead" {
		if len(rest) == 0 {
			return usagef("dead needs a subcommand: list, requeue or purge")
		}
		cmd, rest = "dead "+rest[0], rest[1:]
	}
	if cmd == "queue" {
		if len(rest) == 0 {
			return usagef("queue needs a subcommand: delete")
		}
		cmd, rest = "queue "+rest[0], rest[1:]
	}
	commands := map[string]func([]string) error{
		"queues": c.queues, "stats": c.stats, "workers": c.workers, "partitions": c.partitions, "inflight": c.inflight,
		"tasks":     c.tasks,
		"dead list": c.deadList, "dead requeue": c.deadRequeue, "dead purge": c.deadPurge,
		"pause": c.pause, "resume": c.resume, "task": c.task, "watch": c.watch, "web": c.web,
		"queue delete": c.queueDelete,
		"schedule":     c.schedule,
	}
	maps.Copy(commands, c.flowCommands())
	if cmd == "help" {
		fmt.Fprint(c.stdout, usageText)
		return nil
	}
	f, ok := commands[cmd]
	if !ok {
		return usagef("unknown command %q", cmd)
	}
	return f(rest)
}

// flags returns a FlagSet for command name with the shared flags registered. On --help, and
// after a mistyped flag, it writes the command's flags to stderr; the flag package's own line for
// a mistake is dropped: main says it once, after "srq: ".
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("srq "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "Usage of %s:\n", fs.Name())
		fs.SetOutput(c.stderr)
		defer fs.SetOutput(io.Discard)
		fs.PrintDefaults()
	}
	c.opts.register(fs)
	return fs
}

// parse parses args into fs, allowing flags after positional arguments, and returns the
// positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// connect opens the Inspector, once.
func (c *cli) connect() error {
	if c.in != nil {
		return nil
	}
	if c.opts.verbose {
		setRedisLog(c.stderr)
	}
	if err := checkUserInfo(c.opts.redisURL); err != nil {
		return usagef("bad --redis-url %q: %v (want redis://[[user]:password@]host[:port][/db], or rediss:// for TLS)",
			redactURL(c.opts.redisURL), err)
	}
	opt, err := redis.ParseURL(c.opts.redisURL)
	if err != nil {
		return usagef("bad --redis-url %q: %s (want redis://[[user]:password@]host[:port][/db], or rediss:// for TLS)",
			redactURL(c.opts.redisURL), urlError(c.opts.redisURL, err))
	}
	if err := c.opts.applyTLS(opt); err != nil {
		return err
	}
	c.client = redis.NewClient(opt)
	if err := c.client.Ping(c.ctx).Err(); err != nil {
		hint := "check --redis-url or REDIS_URL"
		if opt.TLSConfig != nil {
			hint += ", and --tls-ca for a server certificate this system does not trust"
		}
		return fmt.Errorf("cannot reach Redis at %s: %w (%s)", opt.Addr, err, hint)
	}
	if c.in, err = inspect.New(c.client, inspect.Config{Prefix: c.opts.prefix}); err != nil {
		return fmt.Errorf("%w (check --prefix)", err)
	}
	return nil
}

// again returns the command line that runs this command again with the flags in change set to
// new values: the flags given before the command (and the shared ones given after it), the command,
// and its own flags, each once and in name order. --redis-url's credentials are shown as xxxxx
// (redactURL): fill them in again, or set REDIS_URL instead. For hints such as the next page.
func (c *cli) again(fs *flag.FlagSet, change map[string]string) string {
	values := map[string]string{}
	bools := map[string]bool{}
	visit := func(f *flag.Flag) {
		values[f.Name] = f.Value.String()
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			bools[f.Name] = true
		}
	}
	c.global.Visit(visit)
	fs.Visit(visit)
	maps.Copy(values, change)
	var shared, own []string
	for _, name := range slices.Sorted(maps.Keys(values)) {
		v := values[name]
		if name == "redis-url" {
			v = redactURL(v)
		}
		word := "--" + name
		switch {
		case bools[name] && v == "true":
		case bools[name]:
			word += "=" + v
		default:
			word += " " + shellWord(v)
		}
		if c.global.Lookup(name) != nil {
			shared = append(shared, word)
		} else {
			own = append(own, word)
		}
	}
	words := append(append(append([]string{"srq"}, shared...), strings.TrimPrefix(fs.Name(), "srq ")), own...)
	return strings.Join(words, " ")
}

// shellWord quotes s for a POSIX shell when it needs it: in single quotes, or, when it holds a
// control character, as a $'…' string with that character escaped (bash, zsh and ksh read those).
func shellWord(s string) string {
	plain := func(r rune) bool {
		return r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./:@%+=,", r))
	}
	switch {
	case s == "":
		return "''"
	case needsQuote(s):
		q := strconv.Quote(s)
		return "$'" + strings.ReplaceAll(q[1:len(q)-1], "'", `\'`) + "'"
	case strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0:
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// limitFlag registers --limit with its default, for commands that list a page.
func limitFlag(fs *flag.FlagSet, p *int, def int, what string) {
	fs.IntVar(p, "limit", def, fmt.Sprintf("most %s to list (1 to %d)", what, inspect.MaxLimit))
}

// checkLimit refuses a --limit outside [1, inspect.MaxLimit] with a usage error: the Inspector
// would read 0 as its default page size, which is not what "--limit 0" says.
func checkLimit(limit int) error {
	if limit < 1 || limit > inspect.MaxLimit {
		return usagef("--limit %d is outside [1, %d]", limit, inspect.MaxLimit)
	}
	return nil
}

// needQueue connects and checks that --queue was given.
func (c *cli) needQueue() error {
	if c.opts.queue == "" {
		return usagef("--queue is required (srq queues lists them)")
	}
	return c.connect()
}

// explain adds what to do to an error from the Inspector.
func (c *cli) explain(err error) error {
	if errors.Is(err, engine.ErrNotFound) && !strings.Contains(err.Error(), "task") {
		return fmt.Errorf("%w\nCheck --queue and --prefix; 'srq queues' lists the registered queues", err)
	}
	return err
}

// emitJSONLine writes v as one line of JSON (writeJSON).
func (c *cli) emitJSONLine(v any) error { return c.writeJSON(v, "") }

// emitJSON writes v as indented JSON (writeJSON).
func (c *cli) emitJSON(v any) error { return c.writeJSON(v, "  ") }

// writeJSON writes v as JSON, indented by indent, with every control character and bidirectional
// control in its strings as a \u escape: encoding/json escapes C0 controls but writes DEL, the C1
// controls and the bidirectional controls raw, which a terminal acts on. Outside strings JSON
// holds no such character, and the escapes decode to the same text. It fails with the encoder's
// or the writer's error.
func (c *cli) writeJSON(v any, indent string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(c.stdout, escapeText(buf.String()))
	return err
}

// confirm asks the user to confirm action unless --yes was given; a refusal is an error.
func (c *cli) confirm(action string) error {
	if c.opts.yes {
		return nil
	}
	fmt.Fprintf(c.stderr, "%s? Type 'yes' to go on: ", action)
	line, err := c.stdin.ReadString('\n')
	if strings.TrimSpace(line) == "yes" || strings.TrimSpace(line) == "y" {
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the confirmation: %w", err)
	}
	return errors.New("not confirmed; nothing was changed (pass --yes to skip the question)")
}

func (c *cli) queues(args []string) error {
	fs := c.flags("queues")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("queues takes no arguments"))
	}
	if err := c.connect(); err != nil {
		return err
	}
	qs, err := c.in.Queues(c.ctx)
	if err != nil {
		return err
	}
	out := make([]QueueJSON, len(qs))
	for i, q := range qs {
		out[i] = QueueJSON{Name: q.Name, Shards: q.Shards}
		if q.Err != nil {
			out[i].Error = q.Err.Error()
		}
	}
	if c.opts.json {
		return c.emitJSON(out)
	}
	return printQueues(c.stdout, out)
}

// cmpErr returns err when it is set, else alt.
func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

func (c *cli) stats(args []string) error {
	fs := c.flags("stats")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("stats takes no arguments"))
	}
	if c.opts.queue == "" {
		return c.statsSummary()
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	s, err := c.in.Stats(c.ctx, c.opts.queue)
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(s)
	}
	return printStats(c.stdout, s, nil)
}

func (c *cli) workers(args []string) error {
	fs := c.flags("workers")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("workers takes no arguments"))
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	ws, _, err := c.in.Workers(c.ctx, c.opts.queue)
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		if ws == nil {
			ws = []inspect.Worker{}
		}
		return c.emitJSON(ws)
	}
	return printWorkers(c.stdout, ws)
}

func (c *cli) partitions(args []string) error {
	fs := c.flags("partitions")
	by := fs.String("by", "depth", "order: depth, age, paused or held (by a dead letter)")
	var limit int
	limitFlag(fs, &limit, inspect.DefaultPartitionLimit, "partitions")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("partitions takes no arguments"))
	}
	if err := checkLimit(limit); err != nil {
		return err
	}
	orders := map[string]inspect.PartitionOrder{"depth": inspect.ByDepth, "age": inspect.ByAge, "paused": inspect.ByPaused,
		"held": inspect.ByHeld}
	order, ok := orders[*by]
	if !ok {
		return usagef("--by %q: want depth, age, paused or held", *by)
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	ps, err := c.in.Partitions(c.ctx, c.opts.queue, inspect.PartitionQuery{By: order, Limit: limit})
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(ps)
	}
	return printPartitions(c.stdout, ps)
}

func (c *cli) inflight(args []string) error {
	fs := c.flags("inflight")
	offset := fs.Int("offset", 0, "leases to skip")
	var limit int
	limitFlag(fs, &limit, inspect.DefaultPageLimit, "leases")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("inflight takes no arguments"))
	}
	if err := checkLimit(limit); err != nil {
		return err
	}
	if *offset < 0 || *offset > inspect.MaxOffset-limit {
		return usagef("--offset %d is outside [0, %d]", *offset, inspect.MaxOffset-limit)
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	// One more than the page when the Inspector allows it, to know whether another page follows.
	ask := limit
	if limit < inspect.MaxLimit && *offset+limit < inspect.MaxOffset {
		ask++
	}
	ts, err := c.in.InFlight(c.ctx, c.opts.queue, inspect.Page{Offset: *offset, Limit: ask})
	if err != nil {
		return c.explain(err)
	}
	more := len(ts) > limit || (ask == limit && len(ts) == limit)
	ts = ts[:min(len(ts), limit)]
	if c.opts.json {
		return c.emitJSON(ts)
	}
	// The hint names only a page the Inspector serves: offset+limit at most inspect.MaxOffset.
	next := ""
	if more && *offset+2*limit <= inspect.MaxOffset {
		next = c.again(fs, map[string]string{"offset": strconv.Itoa(*offset + limit), "limit": strconv.Itoa(limit)})
	}
	return printInFlight(c.stdout, ts, next)
}

func (c *cli) tasks(args []string) error {
	fs := c.flags("tasks")
	var q inspect.TaskQuery
	fs.BoolVar(&q.Delayed, "delayed", false, "the delayed tasks (of partitions with none available now), soonest first")
	fs.StringVar(&q.Cursor, "cursor", "", "continue where a previous page ended")
	limitFlag(fs, &q.Limit, inspect.DefaultPageLimit, "tasks")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("tasks takes no arguments"))
	}
	if err := checkLimit(q.Limit); err != nil {
		return err
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	page, err := c.in.PendingTasks(c.ctx, c.opts.queue, q)
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(page)
	}
	next := ""
	if page.Next != "" {
		next = c.again(fs, map[string]string{"cursor": page.Next})
	}
	return printTasks(c.stdout, page, q.Delayed, next)
}

// deadFilter registers the filter flags of the dead commands.
func deadFilter(fs *flag.FlagSet) *inspect.DeadQuery {
	q := &inspect.DeadQuery{}
	fs.StringVar(&q.Partition, "partition", "", "only letters of this partition")
	fs.BoolVar(&q.BasePartition, "base", false, "only letters of the base partition (the empty key)")
	fs.StringVar(&q.ErrorContains, "error", "", "only letters whose last error contains this (ASCII case ignored)")
	return q
}

func (c *cli) deadList(args []string) error {
	fs := c.flags("dead list")
	q := deadFilter(fs)
	fs.StringVar(&q.Cursor, "cursor", "", "continue where a previous page ended")
	limitFlag(fs, &q.Limit, inspect.DefaultPageLimit, "letters")
	fs.IntVar(&q.Window, "window", 0, "most letters to look at per shard when filtering (default 1000)")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("dead list takes no arguments"))
	}
	if err := checkLimit(q.Limit); err != nil {
		return err
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	page, err := c.in.DeadLetters(c.ctx, c.opts.queue, *q)
	if err != nil {
		return c.explain(err)
	}
	if c.opts.json {
		return c.emitJSON(page)
	}
	next := ""
	if page.Next != "" {
		next = c.again(fs, map[string]string{"cursor": page.Next})
	}
	return printDead(c.stdout, page, next)
}

func (c *cli) deadRequeue(args []string) error {
	return c.deadAction("requeue", "requeued", args)
}

func (c *cli) deadPurge(args []string) error {
	return c.deadAction("purge", "purged", args)
}

func (c *cli) deadAction(verb, done string, args []string) error {
	fs := c.flags("dead " + verb)
	q := deadFilter(fs)
	all := fs.Bool("all", false, "every dead letter")
	ids, err := parse(fs, args)
	if err != nil {
		return err
	}
	filtered := q.Partition != "" || q.BasePartition || q.ErrorContains != ""
	var sel inspect.DeadSelector
	switch {
	case len(ids) > 0 && !*all && !filtered:
		slices.Sort(ids)
		sel.IDs = slices.Compact(ids)
	case *all && len(ids) == 0 && !filtered:
		sel.All = true
	case filtered && len(ids) == 0 && !*all:
		sel.Filter = q
	default:
		return usagef("dead %s needs exactly one of: ids, --all, or a filter (--partition, --base, --error)", verb)
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	if sel.IDs == nil && !c.opts.yes {
		if err := c.confirmDead(verb, sel); err != nil {
			return err
		}
	}
	act := c.in.RequeueDead
	if verb == "purge" {
		act = c.in.PurgeDead
	}
	n, err := act(c.ctx, c.opts.queue, sel)
	if err != nil {
		return c.explain(fmt.Errorf("%w (%d %s before the error)", err, n, done))
	}
	if c.opts.json {
		err = c.emitJSON(ActionJSON{Action: verb, Count: n})
	} else {
		fmt.Fprintf(c.stdout, "%s %d dead letter%s\n", done, n, plural(n))
	}
	if missed := len(sel.IDs) - n; missed > 0 && err == nil {
		// The Inspector skips an id that names no dead letter; the command was asked to act on it.
		which, verbs, them := "the id given", "names", "it"
		if len(sel.IDs) > 1 {
			which = fmt.Sprintf("%d of the %d ids given", missed, len(sel.IDs))
			if missed > 1 {
				verbs, them = "name", "them"
			}
		}
		return fmt.Errorf("%s %s no dead letter of queue %q (an unknown task, or one that is not dead): "+
			"nothing was done with %s; 'srq task <id>' shows where a task is", which, verbs, c.opts.queue, them)
	}
	return err
}

// confirmDead asks before requeueing or purging every dead letter, or every one a filter
// matches, saying how many that is: the queue's count of dead letters, exact for --all and an
// upper bound for a filter (counting the matches would read every letter). Nothing is asked when
// the queue holds none.
func (c *cli) confirmDead(verb string, sel inspect.DeadSelector) error {
	st, err := c.in.Stats(c.ctx, c.opts.queue)
	if err != nil {
		return c.explain(err)
	}
	if st.Dead == 0 {
		return nil
	}
	n := int(st.Dead)
	verb = strings.ToUpper(verb[:1]) + verb[1:]
	if sel.All {
		return c.confirm(fmt.Sprintf("%s all %d dead letter%s of queue %q", verb, n, plural(n), c.opts.queue))
	}
	return c.confirm(fmt.Sprintf("%s the dead letters of queue %q that match the filter (at most %d, the queue's count of dead letters)",
		verb, c.opts.queue, n))
}

func (c *cli) pause(args []string) error  { return c.setPaused("pause", args) }
func (c *cli) resume(args []string) error { return c.setPaused("resume", args) }

func (c *cli) setPaused(verb string, args []string) error {
	fs := c.flags(verb)
	p := fs.String("partition", "", "the partition; without it the whole queue")
	base := fs.Bool("base", false, "the base partition (the empty key)")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return cmpErr(err, usagef("%s takes no arguments; name a partition with --partition", verb))
	}
	if *base && *p != "" {
		return usagef("--base and --partition name different partitions")
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	var err error
	target := fmt.Sprintf("queue %q", c.opts.queue)
	switch {
	case *p != "" || *base:
		target = fmt.Sprintf("partition %q of queue %q", *p, c.opts.queue)
		if verb == "pause" {
			err = c.in.PausePartition(c.ctx, c.opts.queue, partition.Key(*p))
		} else {
			err = c.in.ResumePartition(c.ctx, c.opts.queue, partition.Key(*p))
		}
	case verb == "pause":
		if err := c.confirm(fmt.Sprintf("Pause the whole queue %q: no consumer gets work until resumed", c.opts.queue)); err != nil {
			return err
		}
		err = c.in.PauseQueue(c.ctx, c.opts.queue)
	default:
		err = c.in.ResumeQueue(c.ctx, c.opts.queue)
	}
	if err != nil {
		return c.explain(err)
	}
	if *p != "" {
		c.warnSibling(partition.Key(*p), verb)
	}
	if c.opts.json {
		return c.emitJSON(ActionJSON{Action: verb, Count: 1})
	}
	fmt.Fprintf(c.stdout, "%sd %s\n", verb, target)
	return nil
}

func (c *cli) task(args []string) error {
	fs := c.flags("task")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("task needs exactly one task id")
	}
	if err := c.needQueue(); err != nil {
		return err
	}
	t, err := c.in.Task(c.ctx, c.opts.queue, pos[0])
	if err != nil {
		return c.explain(err)
	}
	tj := taskJSON(t)
	if c.opts.json {
		return c.emitJSON(tj)
	}
	return printTask(c.stdout, tj)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
