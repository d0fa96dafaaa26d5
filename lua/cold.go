package lua

import (
	"fmt"
	"regexp"
	"strings"
)

// A helper that a script keeps but seldom calls still costs every call of the script its closure
// and the upvalues it captures (shake.go). A script can name such helpers in a header line
//
//	-- @cold place schedule earliest
//
// and they are then made only when one of them is first used in a call: the expanded script keeps
// them in a table, lazy, whose __index makes all of them at once, and calls them as lazy.name(…).
// A call that uses none pays for the table and one closure instead of theirs. Which helpers are
// cold is a choice per script, for speed only: a wrong one costs a call that uses it a little
// more, never a different result (bench/cmd/instr measures both).

// coldLine is a script's "-- @cold name …" line.
var coldLine = regexp.MustCompile(`(?m)^-- @cold ([A-Za-z_][A-Za-z0-9_]*(?: [A-Za-z_][A-Za-z0-9_]*)*)[ \t]*$`)

// lazyTable is the name of the table that holds the cold helpers in the expanded script.
const lazyTable = "lazy"

// helperLine is the start of a helper's definition line in its chunk (splitHelpers: the chunk
// holds one helper, after its comment lines).
var helperLine = regexp.MustCompile(`(?m)^local function `)

// coldNames returns the helpers a script's @cold lines name. It fails for a name that is no
// helper of the script's includes: a typo would otherwise leave the helper made on every call.
func coldNames(script string, includes [][]chunk) (map[string]bool, error) {
	helpers := keepAll(includes) // every helper of the includes
	cold := map[string]bool{}
	for _, m := range coldLine.FindAllStringSubmatch(script, -1) {
		for _, name := range strings.Fields(m[1]) {
			if !helpers[name] {
				return nil, fmt.Errorf("@cold names %q, which no include defines", name)
			}
			cold[name] = true
		}
	}
	return cold, nil
}

// lazyDefinitions returns the statement that makes the cold helpers' table: texts are the
// helpers' chunks as their include has them ("local function name(…").
func lazyDefinitions(texts []string) string {
	var b strings.Builder
	b.WriteString("-- The cold helpers (@cold), made at the first use of one of them in this call.\n")
	b.WriteString(lazyTable + " = setmetatable({}, {__index = function(t, name)\n")
	b.WriteString("  setmetatable(t, nil)\n")
	for _, text := range texts {
		// The definition's line, not a comment above it that happens to say "local function".
		b.WriteString(helperLine.ReplaceAllString(text, "function "+lazyTable+"."))
	}
	b.WriteString("  return rawget(t, name)\nend})\n")
	return b.String()
}

// callCold rewrites every call of a cold helper in src, "name(", as "lazy.name(". A name preceded
// by "." or ":" is a field, not the helper, and stays. The rewrite is textual: "name(" in a comment
// is rewritten too, harmlessly, and so would be one in a string literal, which no script has. Any
// other use of the name (a value, "name (", a local of that name) is left as it is and fails
// TestShakenScriptsCallOnlyKeptHelpers.
func callCold(src string, cold map[string]bool) string {
	if len(cold) == 0 {
		return src
	}
	var b strings.Builder
	last := 0
	eachWord(src, func(i, j int) {
		if j == len(src) || src[j] != '(' || !cold[src[i:j]] {
			return
		}
		if i > 0 && (wordByte(src[i-1]) || src[i-1] == '.' || src[i-1] == ':') {
			return // within a longer word (a number's digits before it), or a field
		}
		b.WriteString(src[last:i])
		b.WriteString(lazyTable + ".")
		last = i
	})
	b.WriteString(src[last:])
	return b.String()
}
