package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/lua"
)

// script is one Lua script of package lua: its source with the includes expanded and its SHA1, as
// EVAL and EVALSHA want them, and the name of its function in the library (functions.go). The
// three are made at their first use, not at the process's start: expanding every script takes
// a few milliseconds each (about a second under the race detector), and an engine on the
// functions path never needs the sources.
type script struct {
	name string
	code func() (src, sha string)
	fn   func() string
}

// src is s's expanded source.
func (s *script) src() string { src, _ := s.code(); return src }

// sha is the SHA1 of s's source.
func (s *script) sha() string { _, sha := s.code(); return sha }

// scripts holds every script of package lua by name. They are embedded, so a broken one is a
// build defect, which panics at the script's first use; TestScriptsLoad loads every one into a
// real Redis.
var scripts = func() map[string]*script {
	m := make(map[string]*script)
	for _, name := range lua.Names() {
		m[name] = &script{
			name: name,
			code: sync.OnceValues(func() (string, string) {
				src, err := lua.Source(name)
				if err != nil {
					panic(err)
				}
				return src, lua.SHA1(src)
			}),
			fn: sync.OnceValue(func() string { return lua.Function(library().name, name) }),
		}
	}
	return m
}()

func mustScript(name string) *script {
	s, ok := scripts[name]
	if !ok {
		panic("srq: no embedded script " + name)
	}
	return s
}

var (
	scriptPublish   = mustScript("publish")
	scriptPubUsual  = mustScript("publish_usual")
	scriptFetch     = mustScript("fetch")
	scriptAck       = mustScript("ack")
	scriptAckFetch  = mustScript("ack_fetch")
	scriptReject    = mustScript("reject")
	scriptExtend    = mustScript("extend")
	scriptKill      = mustScript("kill")
	scriptRecover   = mustScript("recover")
	scriptDeadList  = mustScript("dead_list")
	scriptRequeue   = mustScript("requeue")
	scriptPurge     = mustScript("purge")
	scriptSetPaused = mustScript("set_paused")
	scriptSetLimit  = mustScript("set_limit")
	scriptStats     = mustScript("stats")
	scriptTask      = mustScript("task")
	scriptRateLimit = mustScript("ratelimit")
	scriptOutcome   = mustScript("outcome")
	scriptFlowPub   = mustScript("flow_publish")
	scriptFlowApply = mustScript("flow_apply")
	scriptCancel    = mustScript("cancel")
	scriptProbe     = mustScript("probe")
	scriptSpawn     = mustScript("spawn")
	scriptSignal    = mustScript("signal")
	scriptProgress  = mustScript("progress")
)

// LoadScripts loads every script into Redis with SCRIPT LOAD (on every master of a cluster) and,
// unless the engine runs its scripts with EVALSHA (Config.Scripts), the library of functions with
// FUNCTION LOAD (likewise). Calling it is optional: a script or a library missing from the server
// is loaded on first use and again after a restart, failover, SCRIPT FLUSH or FUNCTION FLUSH. It
// fails with the first error of a load; a server that refuses FUNCTION LOAD turns the engine to
// EVALSHA rather than failing it.
func (e *Engine) LoadScripts(ctx context.Context) error {
	for _, s := range scripts {
		if err := e.load(ctx, s); err != nil {
			return err
		}
	}
	if e.fn.mode.Load() == fnOff {
		return nil
	}
	e.fn.mu.Lock()
	defer e.fn.mu.Unlock()
	if err := e.loadLibrary(ctx, true); err != nil {
		return err
	}
	e.fn.loads.Add(1)
	e.fn.mode.CompareAndSwap(fnUnknown, fnOn) // unless the load was refused
	return nil
}

func (e *Engine) load(ctx context.Context, s *script) error {
	src, want := s.code()
	sha, err := e.client.ScriptLoad(ctx, src).Result()
	if err != nil {
		return fmt.Errorf("srq: load script %s: %w", s.name, err)
	}
	if sha != want {
		return fmt.Errorf("srq: load script %s: server computed SHA %s, want %s", s.name, sha, want)
	}
	return nil
}

// call is one script invocation with its ARGV after the key base. The pipelined path
// (runPipelined) is kept ready for sharded queues, which send one script call per shard in one
// round trip; scripts_test.go exercises its NOSCRIPT reload.
//
//lint:ignore U1000 kept for sharded queues, see above.
type call struct {
	script *script
	args   []any
}

// readOnly names the scripts that change nothing: their calls go without a sendOnce, so go-redis
// may send them again after a lost reply, as running them twice does no harm.
var readOnly = map[string]bool{"dead_list": true, "dead_scan": true, "inflight": true, "overview": true,
	"partitions": true, "stats": true, "task": true, "outcome": true, "schedule_due": true, "schedule_list": true,
	"probe": true}

// command returns one call of s as a command: by its function (FCALL, or FCALL_RO for a
// read-only script) where the engine is known to run functions, else by its SHA (EVALSHA), or,
// with eval, by its source (EVAL); then the keys, then the key base and args. Unless s is
// read-only, the key base goes as a sendOnce that guards the command, also returned (else nil).
func (e *Engine) command(ctx context.Context, s *script, eval bool, args []any) (*redis.Cmd, *sendOnce) {
	f := formSource
	if !eval {
		f = e.stored(false)
	}
	return e.commandAs(ctx, s, f, args)
}

// commandAs is command with the form of the call given.
func (e *Engine) commandAs(ctx context.Context, s *script, f form, args []any) (*redis.Cmd, *sendOnce) {
	out := make([]any, 0, 4+len(e.keyArgs)+len(args))
	switch {
	case f == formSource:
		out = append(out, "eval", s.src())
	case f == formSHA:
		out = append(out, "evalsha", s.sha())
	case readOnly[s.name]:
		out = append(out, "fcall_ro", s.fn())
	default:
		out = append(out, "fcall", s.fn())
	}
	out = append(out, len(e.keyArgs))
	out = append(out, e.keyArgs...)
	var g *sendOnce
	base := &e.arg
	if readOnly[s.name] {
		out = append(out, base.s)
	} else {
		g = &sendOnce{base: base.b}
		out = append(out, g)
	}
	cmd := redis.NewCmd(ctx, append(out, args...)...)
	cmd.SetFirstKeyPos(3) // as go-redis's Eval, EvalSha and FCall do, for a cluster client's routing
	if g != nil {
		g.cmd = cmd
	}
	return cmd, g
}

// sendOnce stops go-redis from sending again a script call that may have run. go-redis sends a
// command again after a read timeout or a broken connection (Options.MaxRetries), although the
// server may have run it; a script run twice answers for its second run (a publish reports its
// messages as duplicates, an ack ErrNotFound, a reject ErrStaleToken), and its caller would take
// those answers for the truth. go-redis writes an argument that implements
// encoding.BinaryMarshaler by calling MarshalBinary each time it writes the command. An error
// there ends the write midway and the call without a retry (it is neither a timeout nor a Redis
// error), and go-redis closes the connection, as after any error that is no Redis reply: the
// server runs only whole commands, so it never runs a command cut short.
//
// A call's first write always goes through. A later one goes through only when the command's
// recorded error says that the server refused the previous write without running it: a cluster
// redirect (MOVED, ASK) or an error go-redis sends again by design (TRYAGAIN, LOADING, READONLY,
// MASTERDOWN, CLUSTERDOWN, max clients). go-redis records a command's error between two writes
// in a cluster client's retries and redirects and in pipelines, but not in the retries of a
// single client (Client, Sentinel's failover client): there every write after the first is
// refused, also after an error that left the command unrun, which the caller then sees as
// ErrReplyLost. A connection that could not be had (pool timeout, dial error) writes nothing and
// counts for nothing. Once sendOnce refused a write it refuses every later one.
type sendOnce struct {
	base    []byte
	cmd     *redis.Cmd
	written bool
	refused bool
}

// MarshalBinary returns the key base for a write that may go, else errResend.
func (g *sendOnce) MarshalBinary() ([]byte, error) {
	if g.written && !g.refused && !notRun(g.cmd.Err()) {
		g.refused = true
	}
	if g.refused {
		return nil, errResend
	}
	g.written = true
	return g.base, nil
}

// String is the key base, for hooks that log commands.
func (g *sendOnce) String() string { return string(g.base) }

// errResend is what MarshalBinary refuses a write with. It must not look like an error go-redis
// retries (a timeout, or a Redis error such as LOADING): the call ends with it, or, where go-redis
// recorded the failure after which it would have sent the call again, with that failure.
var errResend = errors.New("srq: go-redis was about to send the call again")

// lost turns err, the final error of the call g guards, into one wrapping ErrReplyLost when the
// call was written and no reply was read: the call may have run. An error the server replied with
// stays as it is.
func (g *sendOnce) lost(err error) error {
	var reply redis.Error
	if err == nil || g == nil || !g.written || errors.As(err, &reply) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrReplyLost, err)
}

// notRun says whether err is a reply with which Redis refuses a command without running it, and
// which go-redis answers by sending the command again, to the same node or the one named.
func notRun(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	for _, prefix := range []string{"MOVED ", "ASK ", "TRYAGAIN ", "LOADING ", "READONLY ", "MASTERDOWN ",
		"CLUSTERDOWN ", "ERR max number of clients reached"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// run executes one script: with FCALL where the engine runs functions (functions.go), else with
// EVALSHA. When the server lacks the library, run loads it there and calls the function again;
// when it lacks the script (NOSCRIPT) or still lacks the function, run sends the call once more
// with EVAL, which also caches the script. EVAL goes where the keys live, like EVALSHA; SCRIPT
// LOAD would go to every node of a cluster and fail while any one of them is down. A call of a
// script that changes the queue fails with an error wrapping ErrReplyLost when it was sent and
// its reply did not come (sendOnce).
func (e *Engine) run(ctx context.Context, s *script, args ...any) (any, error) {
	f := e.stored(true)
	loads := e.fn.loads.Load()
	res, err := e.send(ctx, s, f, args)
	if f == formFunction {
		e.observe(err)
		if isFunctionMissing(err) && e.reload(ctx, loads) == nil && e.fn.mode.Load() != fnOff {
			res, err = e.send(ctx, s, formFunction, args) // a new command, with a sendOnce of its own
		}
		if isFunctionRefused(err) || (isFunctionMissing(err) && e.fn.mode.Load() == fnOff) {
			res, err = e.send(ctx, s, formSHA, args) // it did not run
		}
	}
	if isNoScript(err) {
		res, err = e.send(ctx, s, formSource, args)
	}
	if err != nil {
		return nil, fmt.Errorf("srq: %s: %w", s.name, err)
	}
	return res, nil
}

// send sends one call of s in the form f.
func (e *Engine) send(ctx context.Context, s *script, f form, args []any) (any, error) {
	cmd, g := e.commandAs(ctx, s, f, args)
	_ = e.client.Process(ctx, cmd) // its error is cmd's
	res, err := cmd.Result()
	return res, g.lost(err)
}

// runPipelined executes several scripts in one round trip. Calls that did not run because the
// server lacks the library, the script or FCALL are sent again as run sends them: the library is
// loaded and those calls go once more by function, then the ones still missing go with EVAL.
// Results come back in call order; the error is the first call's error, if any.
//
//lint:ignore U1000 kept for sharded queues; see call.
func (e *Engine) runPipelined(ctx context.Context, calls []call) ([]any, error) {
	cmds := make([]*redis.Cmd, len(calls))
	guards := make([]*sendOnce, len(calls))
	send := func(idx []int, f form) {
		p := e.client.Pipeline()
		for _, i := range idx {
			cmds[i], guards[i] = e.commandAs(ctx, calls[i].script, f, calls[i].args)
			_ = p.Process(ctx, cmds[i]) // queues it
		}
		_, _ = p.Exec(ctx) // pipeline errors are per command
	}
	// missing returns the calls of idx that did not run for want of what pred names.
	missing := func(idx []int, pred func(error) bool) []int {
		var out []int
		for _, i := range idx {
			if pred(cmds[i].Err()) {
				out = append(out, i)
			}
		}
		return out
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	f := e.stored(true)
	loads := e.fn.loads.Load()
	send(all, f)
	if f == formFunction {
		for _, cmd := range cmds {
			e.observe(cmd.Err())
		}
		if again := missing(all, isFunctionMissing); len(again) > 0 && e.reload(ctx, loads) == nil &&
			e.fn.mode.Load() != fnOff {
			send(again, formFunction)
		}
		if again := missing(all, func(err error) bool {
			return isFunctionRefused(err) || (e.fn.mode.Load() == fnOff && isFunctionMissing(err))
		}); len(again) > 0 {
			send(again, formSHA)
		}
	}
	if again := missing(all, isNoScript); len(again) > 0 {
		send(again, formSource)
	}

	out := make([]any, len(calls))
	var first error
	for i, cmd := range cmds {
		res, err := cmd.Result()
		if err = guards[i].lost(err); err != nil && first == nil {
			first = fmt.Errorf("srq: %s: %w", calls[i].script.name, err)
		}
		out[i] = res
	}
	return out, first
}

// isNoScript says whether err is the answer of a server that did not run a call for want of its
// script (NOSCRIPT), of the library's function, or of FCALL itself: the call can go again, in
// another form.
func isNoScript(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "NOSCRIPT") || isFunctionMissing(err) || isFunctionRefused(err))
}
