package engine

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/internal/redistest"
)

// libraryFunctions returns the functions of the library as the server behind c lists them, with
// their flags, or nil when it does not hold the library.
func libraryFunctions(ctx context.Context, t *testing.T, c redis.Cmdable) map[string][]string {
	t.Helper()
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: library().name}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) == 0 {
		return nil
	}
	out := map[string][]string{}
	for _, f := range libs[0].Functions {
		out[f.Name] = f.Flags
	}
	return out
}

// TestLibraryCallsEveryFunction loads the library into a real Redis, checks that it registers
// every script with its flags, and calls every function once, with the queue's keys and key base
// and no other argument, next to the same call of the script with EVAL on a twin queue: both must
// succeed with the same reply (sameReply), or both fail.
func TestLibraryCallsEveryFunction(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Scripts: ScriptsFunction})
	if !b.server.Real() {
		t.Skip("miniredis has no functions")
	}
	if err := b.eng.LoadScripts(b.ctx); err != nil {
		t.Fatal(err)
	}
	fns := libraryFunctions(b.ctx, t, b.client)
	if len(fns) != len(scripts) {
		t.Fatalf("library %s has %d functions, want %d", library().name, len(fns), len(scripts))
	}
	twin, err := New(b.client, Config{Queue: b.eng.cfg.Queue + "-eval", Scripts: ScriptsEval})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(scripts))
	for name := range scripts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := scripts[name]
		flags, ok := fns[s.fn()]
		if !ok {
			t.Errorf("%s: no function %s", name, s.fn())
			continue
		}
		if want := libraryFlags(name); !slices.Equal(flags, want) && len(flags)+len(want) > 0 {
			t.Errorf("%s: flags %v, want %v", name, flags, want)
		}
		got, errF := b.eng.send(b.ctx, s, formFunction, nil)
		want, errE := twin.send(b.ctx, s, formSource, nil)
		if isNoScript(errF) {
			t.Errorf("%s: %v", name, errF)
		}
		if (errF == nil) != (errE == nil) {
			t.Errorf("%s: function: %v, %v; EVAL: %v, %v", name, got, errF, want, errE)
			continue
		}
		if errF == nil && !sameReply(got, want) {
			t.Errorf("%s: function returned %v, EVAL %v", name, got, want)
		}
	}
	if b.eng.fn.mode.Load() != fnOn {
		t.Errorf("mode %d after the library was loaded, want %d", b.eng.fn.mode.Load(), fnOn)
	}
}

// sameReply says whether two script replies are equal, but for server times in ms (integers past
// 10^12), which may differ by up to a second.
func sameReply(a, b any) bool {
	switch a := a.(type) {
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameReply(a[i], b[i]) {
				return false
			}
		}
		return true
	case int64:
		if b, ok := b.(int64); ok && a > 1e12 && b > 1e12 {
			return max(a-b, b-a) <= 1000
		}
	}
	return reflect.DeepEqual(a, b)
}

// scriptCalls returns the EVAL and EVALSHA calls of the server behind c so far.
func scriptCalls(ctx context.Context, t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	st := redistest.ParseCommandStats(info)
	return st["eval"].Calls + st["evalsha"].Calls
}

// TestFunctionFlushRecovered: a server that lost the library (FUNCTION FLUSH, as after a restart
// without persistence or a failover to a node without it) gets it again at the next call, for
// single calls and inside pipelines, and the calls go by function, not by EVAL. A transaction
// (the schedules' firing) gets the missing function as the error of its call, not an aborted
// EXEC. It flushes functions, so it runs on a server of its own.
func TestFunctionFlushRecovered(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "FUNCTION FLUSH of a server of its own")
	c := srv.Client(t)
	e, err := New(c, Config{Queue: redistest.Queue(t), Scripts: ScriptsFunction})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	flush := func() {
		t.Helper()
		if err := c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	has := func(when string) {
		t.Helper()
		if libraryFunctions(ctx, t, c) == nil {
			t.Fatalf("%s: the server has no library %s", when, library().name)
		}
	}

	flush()
	if _, err := e.Publish(ctx, []Message{{ID: "a"}}); err != nil {
		t.Fatalf("publish on a server without the library: %v", err)
	}
	has("after the first publish")
	flush()
	if _, err := e.Publish(ctx, []Message{{ID: "b"}}); err != nil {
		t.Fatalf("publish after FUNCTION FLUSH: %v", err)
	}
	has("after FUNCTION FLUSH and a publish")

	flush()
	res, err := e.runPipelined(ctx, []call{{script: scriptStats}, {script: scriptTask, args: []any{"a"}}, {script: scriptStats}})
	if err != nil {
		t.Fatalf("pipeline after FUNCTION FLUSH: %v", err)
	}
	if _, ok := res[1].([]any); len(res) != 3 || !ok {
		t.Fatalf("pipeline results %v, want the record of a in the second", res)
	}
	has("after FUNCTION FLUSH and a pipeline")

	flush()
	var pub *redis.Cmd
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		pub, _ = e.command(ctx, scriptPublish, false, tickBatches(publishArgsOf(Message{ID: "c"})))
		return p.Process(ctx, pub)
	})
	if !isFunctionMissing(pub.Err()) || !isFunctionMissing(err) {
		t.Fatalf("publish in a transaction after FUNCTION FLUSH: %v (EXEC: %v), want the missing function", pub.Err(), err)
	}

	if n := scriptCalls(ctx, t, c); n != 0 {
		t.Errorf("%d calls went by EVAL or EVALSHA", n)
	}
	if st, err := e.Stats(ctx); err != nil || st.Pending != 2 {
		t.Fatalf("stats %+v, %v: want 2 pending", st, err)
	}
	if e.fn.mode.Load() != fnOn {
		t.Errorf("mode %d, want functions", e.fn.mode.Load())
	}
}

// publishArgsOf returns the publish arguments of msgs, as messageArgs makes them.
func publishArgsOf(msgs ...Message) []any {
	var args []any
	for i := range msgs {
		args, _ = messageArgs(args, msgs[i].ID, &msgs[i])
	}
	return args
}

// TestFunctionsFallBack: an engine set to use functions runs its scripts with EVALSHA where the
// server has no FCALL (miniredis) or where an ACL denies FUNCTION LOAD or FCALL.
func TestFunctionsFallBack(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, c *redis.Client) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e, err := New(c, Config{Queue: redistest.Queue(t), Scripts: ScriptsFunction})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b"} {
			if _, err := e.Publish(ctx, []Message{{ID: id}}); err != nil {
				t.Fatalf("publish %s: %v", id, err)
			}
		}
		if st, err := e.Stats(ctx); err != nil || st.Pending != 2 {
			t.Fatalf("stats %+v, %v: want 2 pending", st, err)
		}
		if e.fn.mode.Load() != fnOff {
			t.Errorf("mode %d, want EVALSHA", e.fn.mode.Load())
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		check(t, c)
	})
	srv := redistest.StartReal(t, "ACL users of a server of its own")
	admin := srv.Client(t)
	for _, acl := range []struct {
		user  string
		rules []any
	}{
		{"noload", []any{"-function"}},            // FCALL allowed, FUNCTION LOAD not: nothing to call
		{"nofcall", []any{"-fcall", "-fcall_ro"}}, // no FCALL at all
	} {
		t.Run(acl.user, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", acl.user, "on", ">pw", "~*", "&*", "+@all"}, acl.rules...)...).Err(); err != nil {
				t.Fatal(err)
			}
			opt := srv.Options()
			opt.Username, opt.Password = acl.user, "pw"
			c := redis.NewClient(opt)
			t.Cleanup(func() { _ = c.Close() })
			check(t, c)
		})
	}
}

// TestScriptModes: Config.Scripts and SRQ_SCRIPTS pick the mode; an unknown one is invalid.
func TestScriptModes(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	mode := func(cfg Config) (ScriptMode, error) {
		cfg.Queue = "q"
		e, err := New(c, cfg)
		if err != nil {
			return "", err
		}
		return e.Config().Scripts, nil
	}
	t.Setenv(scriptsEnv, "")
	if m, err := mode(Config{}); err != nil || m != DefaultScripts {
		t.Errorf("default: %q, %v; want %q", m, err, DefaultScripts)
	}
	for _, m := range []ScriptMode{ScriptsFunction, ScriptsEval} {
		if got, err := mode(Config{Scripts: m}); err != nil || got != m {
			t.Errorf("Scripts %q: %q, %v", m, got, err)
		}
		t.Setenv(scriptsEnv, string(m))
		if got, err := mode(Config{}); err != nil || got != m {
			t.Errorf("%s=%s: %q, %v", scriptsEnv, m, got, err)
		}
	}
	t.Setenv(scriptsEnv, string(ScriptsFunction))
	if got, err := mode(Config{Scripts: ScriptsEval}); err != nil || got != ScriptsEval {
		t.Errorf("Scripts %q over %s=function: %q, %v", ScriptsEval, scriptsEnv, got, err)
	}
	if _, err := mode(Config{Scripts: "fcall"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Scripts \"fcall\": %v, want ErrInvalid", err)
	}
	t.Setenv(scriptsEnv, "lua")
	if _, err := mode(Config{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("%s=lua: %v, want ErrInvalid", scriptsEnv, err)
	}
}

// TestOutOfMemory: on a server at its maxmemory, the calls that settle or remove tasks run and
// the others that write are refused, with functions as with EVAL (the library's "allow-oom"
// flags), and reads run.
func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := redistest.StartReal(t, "sets maxmemory of a server of its own")
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	modes := []ScriptMode{ScriptsFunction, ScriptsEval}
	engines := map[ScriptMode]*Engine{}
	deliveries := map[ScriptMode][]Delivery{}
	for _, m := range modes {
		e, err := New(c, Config{Queue: redistest.Queue(t) + "-" + string(m), Scripts: m})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.LoadScripts(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Publish(ctx, []Message{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "e"}, {ID: "f"}}); err != nil {
			t.Fatal(err)
		}
		if deliveries[m], err = e.Fetch(ctx, "c", 4, time.Minute); err != nil || len(deliveries[m]) != 4 {
			t.Fatalf("fetch: %v, %v", deliveries[m], err)
		}
		engines[m] = e
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer c.ConfigSet(context.Background(), "maxmemory", "0")
	for _, op := range []struct {
		name string
		runs bool
		call func(e *Engine, ds []Delivery) error
	}{
		{"ack", true, func(e *Engine, ds []Delivery) error { _, err := e.Ack(ctx, []Receipt{ds[0].Receipt()}); return err }},
		{"reject", true, func(e *Engine, ds []Delivery) error {
			_, err := e.Reject(ctx, []Rejection{{Receipt: ds[1].Receipt()}})
			return err
		}},
		{"kill", true, func(e *Engine, ds []Delivery) error {
			_, err := e.Kill(ctx, []Failure{{Receipt: ds[2].Receipt()}})
			return err
		}},
		{"cancel", true, func(e *Engine, _ []Delivery) error { _, err := e.Cancel(ctx, []string{"f"}, "x"); return err }},
		{"stats", true, func(e *Engine, _ []Delivery) error { _, err := e.Stats(ctx); return err }},
		{"extend", false, func(e *Engine, ds []Delivery) error {
			_, _, err := e.Extend(ctx, []Receipt{ds[3].Receipt()}, time.Minute)
			return err
		}},
		{"fetch", false, func(e *Engine, _ []Delivery) error { _, err := e.Fetch(ctx, "c", 1, time.Minute); return err }},
		{"publish", false, func(e *Engine, _ []Delivery) error { _, err := e.Publish(ctx, []Message{{ID: "g"}}); return err }},
		{"pause", false, func(e *Engine, _ []Delivery) error { return e.Pause(ctx, "p") }},
	} {
		for _, m := range modes {
			err := op.call(engines[m], deliveries[m])
			if op.runs && err != nil {
				t.Errorf("%s, %s: %v at maxmemory", op.name, m, err)
			}
			if !op.runs && (err == nil || !strings.Contains(err.Error(), "OOM")) {
				t.Errorf("%s, %s: %v at maxmemory, want OOM", op.name, m, err)
			}
		}
	}
}

// TestClusterLibraryReloaded: LoadScripts loads the library on every master of a cluster, and a
// master that lost it gets it again, for single calls and inside pipelines. It deletes the
// library on a master of the shared cluster: other tests' engines there load it again.
func TestClusterLibraryReloaded(t *testing.T) {
	t.Parallel()
	c := redistest.SharedCluster(t)
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const i = 2
	e, err := New(cl, Config{Queue: queueOnMaster(t, c, i), Scripts: ScriptsFunction})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	for _, addr := range c.Masters() {
		if libraryFunctions(ctx, t, c.Admin(addr)) == nil {
			t.Errorf("master %s lacks the library after LoadScripts", addr)
		}
	}
	owner := c.Admin(c.Masters()[i])
	drop := func() {
		t.Helper()
		if err := owner.FunctionDelete(ctx, library().name).Err(); err != nil && !strings.Contains(err.Error(), "not exist") {
			t.Fatal(err)
		}
	}
	drop()
	if _, err := e.Publish(ctx, []Message{{ID: "a"}}); err != nil {
		t.Fatalf("publish after FUNCTION DELETE on the owning master: %v", err)
	}
	if libraryFunctions(ctx, t, owner) == nil {
		t.Fatal("the owning master did not get the library back")
	}
	drop()
	checkPipelined(ctx, t, e)
	if libraryFunctions(ctx, t, owner) == nil {
		t.Fatal("the owning master did not get the library back after a pipeline")
	}
	if e.fn.mode.Load() != fnOn {
		t.Errorf("mode %d, want functions", e.fn.mode.Load())
	}
}
