package lua

import (
	"fmt"
	"regexp"
	"strings"
)

// The scripts can also run as one Redis Functions library (FUNCTION LOAD, FCALL), built from the
// same files: where Source makes every call of a script define the helpers of its includes again,
// the library defines them once, when it is loaded. Library builds it so:
//
//   - KEYS and ARGV are locals of the library, which each function sets from its arguments first
//     thing (a function gets them as arguments, not as globals): ARGV as it comes, KEYS as the
//     table of the fixed keys built from the one key it is given, the key base (keys.go);
//   - each include's helpers ("local function"s) are defined at the library's top level, once,
//     in the order the scripts include them;
//   - each include's other top-level statements, its state, become a function of the library,
//     init_<include>, that every function whose script includes it calls where the script had the
//     include line (an include without state has none, and its include line becomes a comment),
//     so each call starts from the state a fresh EVAL starts from: a top-level
//     "local a, b = x, y" is declared once at the library's top level and assigned in init, a
//     "local a" without a value is set to nil there, anything else runs there as it is;
//   - a constant, a one-line "local NAMES = literals" whose names are upper case and whose values
//     are number or quoted string literals, keeps its line at the library's top level and is not
//     assigned again by init: no script assigns a constant (TestLibraryConstantsAreKept checks the
//     library), so its value is the same at every call, and assigning it cost every call its
//     instructions;
//   - a line of an include that ends with "-- @eval-only" is left out: it is there for EVAL alone
//     (Functions always replicate a call's effects, so redis.replicate_commands has nothing to do);
//   - each script's own code becomes the body of its function, srq_<hash>_<script>, in place;
//   - the key names of common.lua are replaced by the KEYS entries they name (aliases.go), which
//     keeps the upvalues of each function under Lua's limit of 60.
//
// shake.go and cold.go do not apply: a helper defined once costs a call nothing. The library's
// name, srq_<hash>, and so its functions' names, change with its code, so servers shared by
// processes that run different versions of srq hold one library of each, and never call the
// functions of another version.

// stateLine is a top-level "local" statement of an include other than a helper: its names, then
// what follows them (an "= values" and/or a comment), if anything.
var stateLine = regexp.MustCompile(`^local ([A-Za-z_][A-Za-z0-9_]*(?:,[ \t]*[A-Za-z_][A-Za-z0-9_]*)*)[ \t]*(=.*|--.*)?$`)

// constLine is a constant (see Library): a one-line local of upper-case names set to number or
// quoted string literals (no comma or quote inside a string), with an optional comment.
var constLine = regexp.MustCompile(`^local ([A-Z][A-Z0-9_]*(?:, [A-Z][A-Z0-9_]*)*) = ` +
	`(-?[0-9]+|'[^',]*')(?:, (?:-?[0-9]+|'[^',]*'))*[ \t]*(?:--.*)?$`)

// evalOnly marks a line that the library leaves out (see Library).
var evalOnly = regexp.MustCompile(`(?m)^.*-- @eval-only[ \t]*\n`)

// libraryPlaceholder stands for the library's name while its hash is computed.
const libraryPlaceholder = "SRQ_LIBRARY_NAME"

// Library returns srq's scripts as one Redis Functions library: its name, "srq_" and the first 16
// hex digits of the SHA1 of its code, and its code, as FUNCTION LOAD takes it. Each script is
// registered as the function Function(name, script), with the flags flags returns for the
// script (nil for none; the flags are strings of FUNCTION LOAD, such as "no-writes"). It fails as
// Source does for a script that does not expand, and when two includes declare the same state
// name, when an include's state line does not parse, or when the library would not fit Lua's limit
// of 200 locals at its top level.
func Library(flags func(script string) []string) (name, code string, err error) {
	type script struct {
		name, text string
		includes   []string
	}
	var scripts []script
	var order []string // includes, in an order that keeps every script's
	for _, n := range Names() {
		raw, err := files.ReadFile(n + ".lua")
		if err != nil {
			return "", "", err
		}
		s := script{name: n, text: string(raw)}
		for _, m := range includeLine.FindAllStringSubmatch(s.text, -1) {
			s.includes = append(s.includes, m[1])
		}
		if order, err = mergeOrder(order, s.includes); err != nil {
			return "", "", err
		}
		scripts = append(scripts, s)
	}

	// The key aliases of every include, dropped and inlined everywhere (aliases.go).
	texts := map[string]string{}
	entries := map[string]string{}
	for _, inc := range order {
		body, err := files.ReadFile("includes/" + inc + ".lua")
		if err != nil {
			return "", "", fmt.Errorf("lua: include %q: %w", inc, err)
		}
		if includeLine.Match(body) {
			return "", "", fmt.Errorf("lua: include %q includes another; includes must be flat", inc)
		}
		text, ent := aliasEntries(string(body))
		for k, v := range ent {
			if old, ok := entries[k]; ok && old != v {
				return "", "", fmt.Errorf("lua: include %q makes %s an alias of %s, another of %s", inc, k, v, old)
			}
			entries[k] = v
		}
		texts[inc] = text
	}

	var b strings.Builder
	b.WriteString("#!lua name=" + libraryPlaceholder + "\n")
	b.WriteString("-- srq's scripts as one Redis Functions library, built by lua/library.go from lua/*.lua.\n")
	b.WriteString("local KEYS, ARGV\n")
	b.WriteString(keysetFunction())
	locals := 5
	declared := map[string]string{}
	stateless := map[string]bool{} // includes with no state: no init function, no call of one
	for _, inc := range order {
		var init strings.Builder
		b.WriteString("\n-- includes/" + inc + ".lua\n")
		for _, c := range splitHelpers(texts[inc]) {
			if c.name != "" {
				locals++
				b.WriteString(c.text)
				continue
			}
			names, consts, stmt, err := stateText(evalOnly.ReplaceAllString(c.text, ""))
			if err != nil {
				return "", "", fmt.Errorf("lua: include %q: %w", inc, err)
			}
			for _, n := range names {
				if other, ok := declared[n]; ok {
					return "", "", fmt.Errorf("lua: includes %q and %q both declare %s", other, inc, n)
				}
				declared[n] = inc
			}
			if len(names) > 0 {
				// Declared before the helpers that follow, which may capture them.
				b.WriteString("local " + strings.Join(names, ", ") + "\n")
				locals += len(names)
			}
			for _, line := range consts {
				b.WriteString(line)
				locals += strings.Count(constLine.FindStringSubmatch(strings.TrimRight(line, "\r\n"))[1], ",") + 1
			}
			init.WriteString(stmt)
		}
		if strings.TrimSpace(stripComments(init.String())) == "" {
			stateless[inc] = true
			continue
		}
		b.WriteString("local function init_" + inc + "()\n" + init.String() + "end\n")
		locals++
	}
	// Lua allows 200 locals in a function, the library's top level included. The registrations
	// below use registers for their temporaries, not locals: redis-server 7.0 loads a library of
	// 200 top-level locals and 40 registrations, and refuses 201. TestScriptsLoad loads this one.
	if locals > 200 {
		return "", "", fmt.Errorf("lua: the library would have %d locals at its top level", locals)
	}

	for _, s := range scripts {
		b.WriteString("\n-- " + s.name + ".lua\n")
		b.WriteString("redis.register_function{function_name = '" + Function(libraryPlaceholder, s.name) + "',")
		if fl := flags(s.name); len(fl) > 0 {
			b.WriteString(" flags = {'" + strings.Join(fl, "', '") + "'},")
		}
		b.WriteString(" callback = function(srq_keys, srq_argv)\nKEYS, ARGV = srq_keyset(srq_keys[1]), srq_argv\n")
		b.WriteString(includeLine.ReplaceAllStringFunc(s.text, func(line string) string {
			inc := includeLine.FindStringSubmatch(line)[1]
			if stateless[inc] {
				return "-- includes/" + inc + ".lua: no state"
			}
			return "init_" + inc + "()"
		}))
		b.WriteString("\nend}\n")
	}
	code = replaceWords(b.String(), entries)
	name = "srq_" + SHA1(code)[:16]
	return name, strings.ReplaceAll(code, libraryPlaceholder, name), nil
}

// Function returns the name of script's function in the library called lib (Library).
func Function(lib, script string) string { return lib + "_" + script }

// mergeOrder returns order with the names of next that it lacks inserted so that next's order is
// kept: each one right after the name next has before it (at the end when that is the last). It
// fails when order has two names of next the other way round: no order keeps both.
func mergeOrder(order, next []string) ([]string, error) {
	at := 0 // where the next new name goes
	for _, n := range next {
		if i := indexOf(order, n); i >= 0 {
			if i < at {
				return nil, fmt.Errorf("lua: includes %v come in another order elsewhere (%v)", next, order)
			}
			at = i + 1
			continue
		}
		order = append(order[:at], append([]string{n}, order[at:]...)...)
		at++
	}
	return order, nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// stateText turns a chunk of an include that is not a helper into the statements that set its
// state at the start of a call: each top-level "local names = values" line loses its "local", a
// "local names" without values becomes "names = nil"; it returns the names so declared. A
// statement of several lines keeps its other lines as they are. A constant line (constLine) is
// returned as it is, in consts, and adds nothing to names or stmt.
func stateText(text string) (names, consts []string, stmt string, err error) {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		body := strings.TrimRight(line, "\r\n")
		if !strings.HasPrefix(body, "local ") {
			b.WriteString(line)
			continue
		}
		if constLine.MatchString(body) {
			consts = append(consts, body+"\n")
			continue
		}
		m := stateLine.FindStringSubmatch(body)
		if m == nil {
			return nil, nil, "", fmt.Errorf("top-level line %q is neither a helper nor a plain local", body)
		}
		for _, n := range strings.Split(m[1], ",") {
			names = append(names, strings.TrimSpace(n))
		}
		rest := m[2]
		if !strings.HasPrefix(rest, "=") {
			rest = "= nil " + rest
		}
		b.WriteString(m[1] + " " + rest + line[len(body):])
	}
	return names, consts, b.String(), nil
}

// constantsKept fails when code assigns one of the constants after its declaration, the first
// line that names it: the library sets a constant once, when it is loaded. An assignment is a
// statement at the start of a line, or after then, do, else or a semicolon. lists holds the names
// of each constant line as it lists them ("A, B"). An assignment lies within one line, so the
// regular expression of a name runs only on the lines that hold the name. It takes longer than
// building the library, which a process's first script call waits for: the tests run it.
func constantsKept(code string, lists []string) error {
	lines := strings.SplitAfter(code, "\n")
	for _, list := range lists {
		for _, n := range strings.Split(list, ", ") {
			assign := regexp.MustCompile(`(?m)(?:^[ \t]*|\b(?:then|do|else)[ \t]+|;[ \t]*)(?:local[ \t]+)?` +
				`(?:[A-Za-z_][A-Za-z0-9_]*[ \t]*,[ \t]*)*` + n + `(?:[ \t]*,[ \t]*[A-Za-z_][A-Za-z0-9_]*)*[ \t]*=[^=]`)
			seen := 0
			for i, line := range lines {
				if !strings.Contains(line, n) {
					continue
				}
				if seen += len(assign.FindAllStringIndex(line, 2)); seen > 1 {
					return fmt.Errorf("lua: the library assigns the constant %s again (line %d)", n, i+1)
				}
			}
		}
	}
	return nil
}
