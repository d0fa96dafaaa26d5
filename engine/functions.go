package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/srqueue/srq/lua"
)

// ScriptMode says how an engine runs its Lua scripts (Config.Scripts).
type ScriptMode string

// Script modes.
const (
	// ScriptsDefault is the zero value: the mode the SRQ_SCRIPTS environment variable names
	// ("function" or "eval"), else DefaultScripts.
	ScriptsDefault ScriptMode = ""
	// ScriptsFunction loads srq's scripts once per server as a Redis Functions library (FUNCTION
	// LOAD) and calls them with FCALL and FCALL_RO, so the helpers the scripts share are defined
	// once per load rather than on every call. A server that lacks the library (after a restart,
	// a failover, FUNCTION FLUSH) gets it again at the first call that misses it. Where the server
	// has no functions (Redis before 7.0, the embedded miniredis) or refuses them (an ACL, a managed
	// service), the engine falls back to ScriptsEval for the rest of its life.
	ScriptsFunction ScriptMode = "function"
	// ScriptsEval calls each script with EVALSHA, and with EVAL when the server's script cache
	// lacks it.
	ScriptsEval ScriptMode = "eval"
)

// DefaultScripts is the mode of an engine whose Config.Scripts is ScriptsDefault and whose
// environment sets no SRQ_SCRIPTS: functions, which cost Redis 5–17 % fewer instructions per task
// than EVALSHA on the hot paths (make instr: bench/cmd/instr), where the server has them.
const DefaultScripts = ScriptsFunction

// scriptsEnv names the environment variable that picks the mode of engines configured with
// ScriptsDefault.
const scriptsEnv = "SRQ_SCRIPTS"

// resolveScripts returns the mode m stands for, or an error wrapping ErrInvalid.
func resolveScripts(m ScriptMode) (ScriptMode, error) {
	if m == ScriptsDefault {
		m = ScriptMode(os.Getenv(scriptsEnv))
		if m == ScriptsDefault {
			return DefaultScripts, nil
		}
		if m != ScriptsFunction && m != ScriptsEval {
			return "", invalidf("%s=%q: want %q or %q", scriptsEnv, string(m), ScriptsFunction, ScriptsEval)
		}
	}
	if m != ScriptsFunction && m != ScriptsEval {
		return "", invalidf("Scripts %q: want %q or %q", string(m), ScriptsFunction, ScriptsEval)
	}
	return m, nil
}

// libraryFlags returns the function flags of script: "no-writes" for a read-only one, so it runs
// with FCALL_RO and on replicas; "allow-oom" for one that settles or removes tasks, which EVAL
// lets run on a server at its maxmemory because its first write frees memory (EVAL refuses a
// script at its first write that may use memory, when nothing was written before it; a function
// without the flag is refused whole); none for the others, which such a server refuses with
// either (TestOutOfMemory).
func libraryFlags(script string) []string {
	switch {
	case readOnly[script]:
		return []string{"no-writes"}
	case allowOOM[script]:
		return []string{"allow-oom"}
	}
	return nil
}

// allowOOM names the scripts flagged "allow-oom" (libraryFlags).
var allowOOM = map[string]bool{"ack": true, "ack_fetch": true, "reject": true, "kill": true, "recover": true,
	"purge": true, "cancel": true}

// library is srq's scripts as one Redis Functions library (lua.Library), built at its first use
// (about 10 ms; a process that never calls a script never pays it). It is built from the embedded
// scripts, so a broken one is a build defect, which panics there; TestLibraryCallsEveryFunction
// loads it into a real Redis.
var library = sync.OnceValue(func() libraryCode {
	name, code, err := lua.Library(libraryFlags)
	if err != nil {
		panic(err)
	}
	return libraryCode{name, code}
})

// libraryCode is the library's name and code.
type libraryCode struct{ name, code string }

// LibraryName returns the name of the Redis Functions library that engines in ScriptsFunction
// mode load: "srq_" and a hash of its code, so servers shared by processes that run different
// versions of srq hold one library of each (FUNCTION DELETE removes a version no process runs).
func LibraryName() string { return library().name }

// Modes of an engine's functions state.
const (
	fnUnknown int32 = iota // ScriptsFunction, not yet seen the server answer an FCALL
	fnOn                   // the server runs the library's functions
	fnOff                  // EVALSHA: ScriptsEval, or a server without functions
)

// functions is an engine's state of the function path.
type functions struct {
	mode atomic.Int32
	// loads counts the library loads of this engine; a call that missed the library loads it
	// again only when no load happened since it was sent.
	loads atomic.Uint64
	mu    sync.Mutex // serializes loads
}

// form is how one script call is sent.
type form int

const (
	formSHA      form = iota // EVALSHA
	formSource               // EVAL
	formFunction             // FCALL or FCALL_RO
)

// stored returns the form of a call that names its script rather than sending its source:
// FCALL where the engine uses functions, else EVALSHA. With probe, an engine that has not yet
// seen the server answer an FCALL sends one (run and runPipelined, which fall back); without, it
// sends EVALSHA (a call inside a transaction, where an unknown command would abort the whole
// transaction).
func (e *Engine) stored(probe bool) form {
	switch e.fn.mode.Load() {
	case fnOn:
		return formFunction
	case fnUnknown:
		if probe {
			return formFunction
		}
	}
	return formSHA
}

// isFunctionMissing says whether err is the server's answer to an FCALL of a function it does
// not have: it holds no srq library of this version.
func isFunctionMissing(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "Function not found") // it drops a leading "ERR "
}

// isFunctionRefused says whether err is the answer of a server that will not run FCALL: it has no
// such command (Redis before 7.0, miniredis) or the user may not run it (NOPERM).
func isFunctionRefused(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return strings.HasPrefix(msg, "NOPERM") ||
		(strings.HasPrefix(msg, "ERR unknown command") && strings.Contains(strings.ToLower(msg), "fcall"))
}

// observe records what the answer err to an FCALL says of the server: that it runs functions
// (any answer but a refusal or a missing function, including a script's own error), or that it
// refuses them.
func (e *Engine) observe(err error) {
	var reply redis.Error
	switch {
	case isFunctionRefused(err):
		e.fn.mode.Store(fnOff)
	case isFunctionMissing(err):
	case err == nil || errors.As(err, &reply):
		e.fn.mode.CompareAndSwap(fnUnknown, fnOn)
	}
}

// reload loads the library on the server that answered an FCALL sent after the engine's loads-th
// load that the function is missing, unless another load happened since. A server that refuses
// FUNCTION LOAD turns the engine to EVALSHA for good; reload returns nil then. Another error
// (the server is unreachable) is returned, and the call falls back to EVAL.
func (e *Engine) reload(ctx context.Context, loads uint64) error {
	e.fn.mu.Lock()
	defer e.fn.mu.Unlock()
	if e.fn.loads.Load() != loads {
		return nil
	}
	err := e.loadLibrary(ctx, false)
	if err == nil {
		e.fn.loads.Add(1)
		e.fn.mode.CompareAndSwap(fnUnknown, fnOn)
	}
	return err
}

// loadLibrary loads the library (FUNCTION LOAD REPLACE) where the queue's keys live: on the
// master that serves their slot in a cluster, or with all, on every master (every shard of a
// Ring). A server that refuses it with a reply turns the engine to EVALSHA, and loadLibrary
// returns nil; another error is returned.
func (e *Engine) loadLibrary(ctx context.Context, all bool) error {
	load := func(ctx context.Context, c *redis.Client) error {
		return c.FunctionLoadReplace(ctx, library().code).Err()
	}
	var err error
	switch c := e.client.(type) {
	case *redis.ClusterClient:
		if all {
			err = c.ForEachMaster(ctx, load)
			break
		}
		var node *redis.Client
		if node, err = c.MasterForKey(ctx, e.keys.Ready()); err == nil {
			err = load(ctx, node)
		}
	case *redis.Ring:
		err = c.ForEachShard(ctx, load)
	default:
		err = e.client.FunctionLoadReplace(ctx, library().code).Err()
	}
	if refusesLoad(err) {
		e.fn.mode.Store(fnOff) // no FUNCTION command, an ACL or a managed service that denies it
		return nil
	}
	if err != nil {
		return fmt.Errorf("srq: load library %s: %w", library().name, err)
	}
	return nil
}

// refusesLoad says whether err, the answer to FUNCTION LOAD, is a reply that refuses it for good:
// any reply but those of a server that cannot take it now (loading, busy, at its maxmemory,
// unable to persist, a replica, a cluster redirect or failure). A library that does not compile
// would be refused so too; TestLibraryCallsEveryFunction loads it into a real Redis.
func refusesLoad(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) || notRun(err) {
		return false
	}
	for _, prefix := range []string{"LOADING", "BUSY", "OOM", "MISCONF"} {
		if strings.HasPrefix(reply.Error(), prefix) {
			return false
		}
	}
	return true
}
