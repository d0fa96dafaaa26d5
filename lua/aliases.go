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
	var b strings.Builder
	b.Grow(len(src))
	last := 0 // the end of what b holds of src
	for i := 0; i < len(src); {
		n := strings.IndexByte(src[i:], '\n')
		if n < 0 {
			break // a last line without its "\n" is not an alias line
		}
		end := i + n + 1
		// Only lines that may be alias lines go through the regular expression: running it over
		// the whole source took a third of the time of expanding a script.
		if line := src[i:end]; strings.HasPrefix(line, "local ") && strings.Contains(line, "= KEYS[") {
			if m := aliasLine.FindStringSubmatch(line); m != nil {
				names, values := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
				if len(names) == len(values) { // else not a plain alias list: left to Lua
					for k, name := range names {
						entry[name] = values[k]
					}
					b.WriteString(src[last:i])
					last = end
				}
			}
		}
		i = end
	}
	b.WriteString(src[last:])
	return b.String(), entry
}

// replaceWords writes entry[w] for every word w of src that entry has.
func replaceWords(src string, entry map[string]string) string {
	if len(entry) == 0 {
		return src
	}
	var b strings.Builder
	b.Grow(len(src))
	last := 0 // the end of what b holds of src
	eachWord(src, func(i, j int) {
		if e, ok := entry[src[i:j]]; ok {
			b.WriteString(src[last:i])
			b.WriteString(e)
			last = j
		}
	})
	b.WriteString(src[last:])
	return b.String()
}
