package lua

import (
	"path"
	"strings"
	"testing"
)

// TestSplitHelpersKeepsEveryLine checks that cutting an include into chunks loses and reorders
// nothing, and that every "local function" at column 0 starts a helper chunk.
func TestSplitHelpersKeepsEveryLine(t *testing.T) {
	t.Parallel()
	for file, body := range includeFiles(t) {
		var joined strings.Builder
		helpers := 0
		for _, c := range splitHelpers(body) {
			joined.WriteString(c.text)
			if c.name != "" {
				helpers++
				if !strings.Contains(c.text, "local function "+c.name+"(") {
					t.Errorf("%s: chunk %q does not hold its definition", file, c.name)
				}
			}
		}
		if joined.String() != body {
			t.Errorf("%s: the chunks do not add up to the include", file)
		}
		if want := strings.Count("\n"+body, "\nlocal function "); helpers != want {
			t.Errorf("%s: %d helper chunks, want %d", file, helpers, want)
		}
	}
}

// includeFiles returns the text of every include by file name.
func includeFiles(t *testing.T) map[string]string {
	t.Helper()
	entries, err := files.ReadDir("includes")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		body, err := files.ReadFile(path.Join("includes", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(body)
	}
	return out
}

// TestShakenScriptsCallOnlyKeptHelpers checks every script: no helper that was left out is named
// anywhere in what was kept, so none can be called (Redis would fail the call at run time with
// "attempted to access nonexistent global variable", on whatever rare path made it).
func TestShakenScriptsCallOnlyKeptHelpers(t *testing.T) {
	t.Parallel()
	var all []string // every helper of every include
	for _, body := range includeFiles(t) {
		for _, c := range splitHelpers(body) {
			if c.name != "" {
				all = append(all, c.name)
			}
		}
	}
	for _, name := range Names() {
		src, err := Source(name)
		if err != nil {
			t.Fatal(err)
		}
		present := map[string]bool{}
		words(present, src)
		code := stripComments(src)
		kept, lazy := 0, 0
		colds := map[string]bool{}
		for _, h := range all {
			cold := strings.Contains(src, "\nfunction "+lazyTable+"."+h+"(")
			defined := cold || strings.Contains(src, "\nlocal function "+h+"(")
			if defined {
				kept++
			}
			if present[h] && !defined {
				t.Errorf("%s: names helper %s, which was left out", name, h)
			}
			if cold {
				lazy++
				colds[h] = true
			}
		}
		// A cold helper is made only in the lazy table: every use must go through it. A use is the
		// name as a whole word (not within a longer one, digits included).
		wrong := map[string]bool{}
		eachWord(code, func(i, j int) {
			h := code[i:j]
			if !colds[h] || wrong[h] || i > 0 && wordByte(code[i-1]) {
				return
			}
			if !strings.HasSuffix(code[:i], lazyTable+".") {
				wrong[h] = true
				t.Errorf("%s: names cold helper %s other than as %s.%s", name, h, lazyTable, h)
			}
		})
		t.Logf("%-16s keeps %2d of %d helpers, %d of them cold", name, kept, len(all), lazy)
	}
}

func TestStripComments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"a() -- b()\nc()", "a() \nc()"},
		{"x = '--' .. y() -- z()", "x = '--' .. y() "},
		{`x = "it\"s -- not" .. f() -- g()`, `x = "it\"s -- not" .. f() `},
		{"x = 'a\\'' -- q\nr()", "x = 'a\\'' \nr()"},
		{"-- all\n-- of it", "\n"},
		{"n = a - -b", "n = a - -b"},
	} {
		if got := stripComments(tc.in); got != tc.want {
			t.Errorf("stripComments(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestShakeFollowsCalls checks the fixed point on a small include: a helper called only by a kept
// helper is kept, one named only in a comment or by nothing is not.
func TestShakeFollowsCalls(t *testing.T) {
	t.Parallel()
	inc := splitHelpers(`local state = 0
-- a calls b
local function a() return b() end
local function b()
  return 1
end
-- c is named only here, and by d
local function c() return 2 end
local function d() return c() end
`)
	keep := shake("return a() -- not d()\n", [][]chunk{inc})
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if keep[name] != want {
			t.Errorf("keep[%s] = %v, want %v", name, keep[name], want)
		}
	}
}

// TestShakeKeepsAllAroundLongBrackets checks the fallback: with a long string or comment, which
// stripComments does not parse, every helper is kept.
func TestShakeKeepsAllAroundLongBrackets(t *testing.T) {
	t.Parallel()
	inc := splitHelpers("local function f() return 1 end\nlocal function g() return 2 end\n")
	for _, own := range []string{"local s = [[--]] .. f()\n", "--[[ x ]] return f()\n", "return [==[a]==]\n"} {
		keep := shake(own, [][]chunk{inc})
		if !keep["f"] || !keep["g"] {
			t.Errorf("shake(%q) keeps %v, want every helper", own, keep)
		}
	}
}

// TestSplitHelpersEndLines checks where a helper ends: at "end" with a trailing comment or blanks,
// and never past the start of the next helper.
func TestSplitHelpersEndLines(t *testing.T) {
	t.Parallel()
	chunks := splitHelpers("local function a()\n  x()\nend -- a\nlocal function b()\n  y()\nend  \n" +
		"local function c()\n  z()\nlocal function d() return 1 end\n")
	var names []string
	for _, c := range chunks {
		if c.name != "" {
			names = append(names, c.name+":"+strings.TrimSpace(c.text[strings.LastIndex(strings.TrimRight(c.text, "\n"), "\n")+1:]))
		}
	}
	want := []string{"a:end -- a", "b:end", "c:z()", "d:local function d() return 1 end"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("helpers and their last lines %q, want %q", names, want)
	}
}

// FuzzSplitHelpers checks that cutting any text into chunks loses and reorders nothing.
func FuzzSplitHelpers(f *testing.F) {
	for _, body := range []string{"local function a()\n  x()\nend\n", "local function b() return 1 end\n-- c\nlocal x = 1\n", "end\nlocal function (\n"} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var joined strings.Builder
		for _, c := range splitHelpers(src) {
			joined.WriteString(c.text)
		}
		if joined.String() != src {
			t.Fatalf("chunks of %q add up to %q", src, joined.String())
		}
	})
}

// FuzzStripComments checks that stripping comments keeps every line and leaves text without "--"
// alone, and that shake never panics.
func FuzzStripComments(f *testing.F) {
	for _, s := range []string{"a() -- b\nc()", `x = "--\"" .. y -- z`, "'\\'--'", "--[[ a ]] f()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := stripComments(src)
		if strings.Count(out, "\n") != strings.Count(src, "\n") {
			t.Fatalf("stripComments(%q) = %q: lines changed", src, out)
		}
		if !strings.Contains(src, "--") && out != src {
			t.Fatalf("stripComments(%q) = %q, want it unchanged", src, out)
		}
		shake(src, [][]chunk{splitHelpers(src)})
	})
}
