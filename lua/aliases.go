package lua

import (
	"regexp"
	"strings"
)

// Every local that a script's helpers capture is an upvalue Redis creates anew on each call, and
// creating one walks the list of upvalues already open, which is longest for the locals declared
// first: the key names of common.lua, captured by most helpers. So a top-level line that only
// names entries of KEYS,
//
//	local K_READY, K_SCHED = KEYS[1], KEYS[2]
//
// is dropped from the expanded script and each use of its names reads the entry itself: a global
// and an array look-up where a name is used, instead of captures on every call whether it is used
// or not. Single publishes run about 4 % fewer instructions in Redis. The key base (ARGV[1]) stays a local: it is read for every task, and reading ARGV there
// cost as much as its captures saved.
var aliasLine = regexp.MustCompile(`(?m)^local ([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*) = (KEYS\[\d+\](?:, KEYS\[\d+\])*)[ \t]*(?:--[^\n]*)?\n`)

// inlineAliases drops the key alias lines of src and writes their entries where the names are used. A
// name declared again in another way (a parameter, a local of its own) becomes an entry there,
// which Lua refuses to load; every test that loads the scripts would report it.
func inlineAliases(src string) string {
	src, entry := aliasEntries(src)
	return replaceWords(src, entry)
}

// aliasEntries drops the key alias lines of src and returns the rest, with the entry each dropped
// name stands for.
func aliasEntries(src string) (string, map[string]string) {
	entry := map[string]string{}
	src = aliasLine.ReplaceAllStringFunc(src, func(line string) string {
		m := aliasLine.FindStringSubmatch(line)
		names, values := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
		if len(names) != len(values) {
			return line // not a plain alias list: leave it to Lua
		}
		for i, n := range names {
			entry[n] = values[i]
		}
		return ""
	})
	return src, entry
}

// replaceWords writes entry[w] for every word w of src that entry has.
func replaceWords(src string, entry map[string]string) string {
	if len(entry) == 0 {
		return src
	}
	return luaWord.ReplaceAllStringFunc(src, func(w string) string {
		if e, ok := entry[w]; ok {
			return e
		}
		return w
	})
}
