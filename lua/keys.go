package lua

import (
	"regexp"
	"strconv"
	"strings"
)

// Every script is called with two keys, the queue's key base ("<prefix>:{<queue>}:") first and its
// seq key (engine.Keys.ScriptKeys says why two): they route the call to the queue's slot on a
// Cluster, and the scripts build their fixed keys from the base, as they build the per-partition
// and per-task keys. Declaring the sixteen fixed keys would cost every call about as much as a
// whole publish of the seed library: the client formats and sends them, Redis parses them and
// turns each into a Lua string. A script reads its keys as KEYS[1] to KEYS[16] (common.lua's
// names for them are inlined as those entries, aliases.go), so the line
//
//	-- @keys
//
// in common.lua makes KEYS hold them: with EVAL and EVALSHA it fills the KEYS table Redis gives
// the call (its first entry, the base, becomes the first key), and in the Functions library
// (library.go) each function takes a table made once per key base and kept by the library.

// KeySuffixes are the fixed keys of a queue, in the order of KEYS: each is the key base followed by
// the suffix. engine.Keys builds the same names for Go callers.
var KeySuffixes = []string{"ready", "sched", "inflight", "dead", "stats", "seq", "wake", "dedup", "ctl",
	"depth", "heads", "consumers", "qpause", "ppause", "leases", "prio"}

var keysLine = regexp.MustCompile(`(?m)^-- @keys[ \t]*\n`)

// keysFill is what the @keys line becomes in a script run by EVAL or EVALSHA: KEYS[1], the key
// base, and the fixed keys built from it, in place.
func keysFill() string {
	var b strings.Builder
	b.WriteString("do local b = KEYS[1]")
	for i, s := range KeySuffixes {
		b.WriteString("; KEYS[" + strconv.Itoa(i+1) + "] = b .. '" + s + "'")
	}
	b.WriteString(" end\n")
	return b.String()
}

// keysetsMax bounds the key tables the library keeps: past it, it forgets them all and builds
// them again as calls come. A server holds few queues; a test server may see thousands.
const keysetsMax = 1000

// keysetFunction is the library's srq_keyset(base): the table of the fixed keys of the queue whose
// key base is base, made at its first use and kept.
func keysetFunction() string {
	var b strings.Builder
	b.WriteString("local srq_keysets, srq_keysets_n = {}, 0\n")
	b.WriteString("local function srq_keyset(b)\n  local k = srq_keysets[b]\n  if k then return k end\n")
	b.WriteString("  if srq_keysets_n >= " + strconv.Itoa(keysetsMax) + " then srq_keysets, srq_keysets_n = {}, 0 end\n")
	b.WriteString("  k = {")
	for i, s := range KeySuffixes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("b .. '" + s + "'")
	}
	b.WriteString("}\n  srq_keysets[b] = k\n  srq_keysets_n = srq_keysets_n + 1\n  return k\nend\n")
	return b.String()
}
