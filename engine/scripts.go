package engine

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/lua"
)

// script is one Lua script with its includes expanded and its SHA1, as EVALSHA wants it.
type script struct {
	name string
	src  string
	sha  string
}

// scripts holds every script of package lua by name. They are embedded, so a broken one is a
// build defect; TestScriptsLoad loads every one into a real Redis.
var scripts = func() map[string]*script {
	m := make(map[string]*script)
	for _, name := range lua.Names() {
		src, err := lua.Source(name)
		if err != nil {
			panic(err)
		}
		m[name] = &script{name: name, src: src, sha: lua.SHA1(src)}
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
)

// LoadScripts loads every script into Redis with SCRIPT LOAD (on every master of a cluster). Calling
// it is optional: a script missing from the server's cache is loaded on first use and again after
// a restart, failover or SCRIPT FLUSH.
func (e *Engine) LoadScripts(ctx context.Context) error {
	for _, s := range scripts {
		if err := e.load(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func (e *Engine) load(ctx context.Context, s *script) error {
	sha, err := e.client.ScriptLoad(ctx, s.src).Result()
	if err != nil {
		return fmt.Errorf("srq: load script %s: %w", s.name, err)
	}
	if sha != s.sha {
		return fmt.Errorf("srq: load script %s: server computed SHA %s, want %s", s.name, sha, s.sha)
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

func (e *Engine) evalArgs(args []any) []any {
	return append([]any{e.argBaseV.Load().(string)}, args...)
}

// run executes one script with EVALSHA and, when the server does not know it (NOSCRIPT), once more
// with EVAL, which also caches it. EVAL goes where the keys live, like EVALSHA; SCRIPT LOAD would go
// to every node of a cluster and fail while any one of them is down.
func (e *Engine) run(ctx context.Context, s *script, args ...any) (any, error) {
	res, err := e.client.EvalSha(ctx, s.sha, e.scriptKeys, e.evalArgs(args)...).Result()
	if isNoScript(err) {
		res, err = e.client.Eval(ctx, s.src, e.scriptKeys, e.evalArgs(args)...).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("srq: %s: %w", s.name, err)
	}
	return res, nil
}

// runPipelined executes several scripts in one round trip. A call that failed with NOSCRIPT did
// not run, so those are sent again, once, with EVAL (see run). Results come back in call order;
// the error is the first call's error, if any.
//
//lint:ignore U1000 kept for sharded queues; see call.
func (e *Engine) runPipelined(ctx context.Context, calls []call) ([]any, error) {
	cmds := make([]*redis.Cmd, len(calls))
	send := func(idx []int, eval bool) {
		// Pipeline errors are per command; Exec's own error repeats the first of them.
		_, _ = e.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range idx {
				if eval {
					cmds[i] = p.Eval(ctx, calls[i].script.src, e.scriptKeys, e.evalArgs(calls[i].args)...)
				} else {
					cmds[i] = p.EvalSha(ctx, calls[i].script.sha, e.scriptKeys, e.evalArgs(calls[i].args)...)
				}
			}
			return nil
		})
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	send(all, false)

	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		send(again, true)
	}

	out := make([]any, len(calls))
	var first error
	for i, cmd := range cmds {
		res, err := cmd.Result()
		if err != nil && first == nil {
			first = fmt.Errorf("srq: %s: %w", calls[i].script.name, err)
		}
		out[i] = res
	}
	return out, first
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}
