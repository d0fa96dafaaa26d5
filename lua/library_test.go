package lua

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestLibraryRegistersEveryScript(t *testing.T) {
	t.Parallel()
	flags := func(script string) []string {
		if script == "stats" {
			return []string{"no-writes"}
		}
		return nil
	}
	name, code, err := Library(flags)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^srq_[0-9a-f]{16}$`).MatchString(name) {
		t.Fatalf("library name %q", name)
	}
	if !strings.HasPrefix(code, "#!lua name="+name+"\n") {
		t.Fatalf("code starts %q", code[:40])
	}
	for _, s := range Names() {
		reg := "function_name = '" + Function(name, s) + "',"
		if n := strings.Count(code, reg); n != 1 {
			t.Errorf("%s registered %d times", s, n)
		}
	}
	if !strings.Contains(code, "function_name = '"+Function(name, "stats")+"', flags = {'no-writes'},") {
		t.Error("stats is not flagged no-writes")
	}
	if strings.Contains(code, "-- @include") || strings.Contains(code, libraryPlaceholder) {
		t.Error("an include line or the name's placeholder was left")
	}
	if regexp.MustCompile(`\bK_(READY|LEASES|SEQ)\b`).MatchString(stripComments(code)) {
		t.Error("a key name was left: every use reads KEYS")
	}
	// The name follows the code: other flags, another library.
	other, _, err := Library(func(string) []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if other == name {
		t.Error("other flags, same library name")
	}
	again, code2, _ := Library(flags)
	if again != name || code2 != code {
		t.Error("the library is not built the same twice")
	}
}

func TestStateText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, out string
		names   []string
	}{
		{"local a = 1\n", "a = 1\n", []string{"a"}},
		{"local a, b -- two\n", "a, b = nil -- two\n", []string{"a", "b"}},
		{"local OK, NO =\n  0, 1\n", "OK, NO =\n  0, 1\n", []string{"OK", "NO"}},
		{"if x then\n  local y = 2\nend\n", "if x then\n  local y = 2\nend\n", nil},
		{"-- a comment\nlocal t = {}\n", "-- a comment\nt = {}\n", []string{"t"}},
		{"local A, B = 1, 'b' -- constants\nlocal c = 2\n", "c = 2\n", []string{"c"}},
		{"local A = {'0'}\n", "A = {'0'}\n", []string{"A"}},       // a table: state, made per call
		{"local A = B .. 'x'\n", "A = B .. 'x'\n", []string{"A"}}, // not a literal
		{"local Ab = 1\n", "Ab = 1\n", []string{"Ab"}},            // not upper case
	} {
		names, _, out, err := stateText(c.in)
		if err != nil || out != c.out || !slices.Equal(names, c.names) {
			t.Errorf("stateText(%q) = %v, %q, %v; want %v, %q", c.in, names, out, err, c.names, c.out)
		}
	}
	if _, consts, _, _ := stateText("local A, B = 1, -2\nlocal C = '' -- none\n"); !slices.Equal(consts,
		[]string{"local A, B = 1, -2\n", "local C = '' -- none\n"}) {
		t.Errorf("constants: got %q", consts)
	}
	if _, _, _, err := stateText("local x.y = 1\n"); err == nil {
		t.Error("want an error for a local line that does not parse")
	}
}

func TestMergeOrder(t *testing.T) {
	t.Parallel()
	var order []string
	for _, next := range [][]string{
		{"common"}, {"common", "fetch_tasks"}, {"common", "outcome", "flow", "ack_tasks", "fetch_tasks"},
		{"common", "outcome", "flow", "settle"}, {"common", "outcome", "flow", "ack_tasks"},
	} {
		var err error
		if order, err = mergeOrder(order, next); err != nil {
			t.Fatal(err)
		}
		// next's names keep their order in order.
		at := -1
		for _, n := range next {
			i := slices.Index(order, n)
			if i <= at {
				t.Fatalf("order %v breaks %v", order, next)
			}
			at = i
		}
	}
	if len(order) != 6 {
		t.Errorf("order %v", order)
	}
	if _, err := mergeOrder([]string{"a", "b"}, []string{"b", "a"}); err == nil {
		t.Error("want an error for includes in two orders")
	}
}

func TestConstantsKept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code string
		ok   bool
	}{
		{"local A, B = 1, 2\nif A == B then return {x = A, B = 3} end\nlocal t = {from = A, d = d}\n", true},
		{"local A = 1\nA = 2\n", false},
		{"local A, B = 1, 2\n  x, B = 3, 4\n", false},
		{"local A = 1\nif x then A = 2 end\n", false},
		{"local A = 1\nlocal y = 2; A = 3\n", false},
		{"local A = 1\nlocal A = 2\n", false},
	} {
		if err := constantsKept(c.code, []string{strings.Split(strings.TrimPrefix(c.code, "local "), " =")[0]}); (err == nil) != c.ok {
			t.Errorf("constantsKept(%q) = %v, want ok %v", c.code, err, c.ok)
		}
	}
}

// The library sets its constants once, at its top level, and leaves out the lines marked for EVAL
// alone; the scripts EVAL runs keep both as they are.
func TestLibraryConstantsAndEvalOnly(t *testing.T) {
	t.Parallel()
	_, code, err := Library(func(string) []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(code, "replicate_commands") {
		t.Error("the library calls redis.replicate_commands")
	}
	i := strings.Index(code, "local function init_common()")
	if i < 0 {
		t.Fatal("no init_common")
	}
	init := code[i : i+strings.Index(code[i:], "\nend\n")]
	for _, c := range []string{"local OK, STALE, NOTFOUND, DUPLICATE, NOTDEAD, DEAD = 0, 1, 2, 3, 4, 5\n", "local SEQ_SPLIT = 1000000000000000\n"} {
		if !strings.Contains(code[:i], c) {
			t.Errorf("the library's top level lacks %q", c)
		}
		if name := strings.Fields(c)[1]; regexp.MustCompile(`\b` + strings.TrimSuffix(name, ",") + `\b`).MatchString(init) {
			t.Errorf("init_common assigns %s", name)
		}
	}
	src, err := Source("publish")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "redis.replicate_commands()") || !strings.Contains(src, "local SEQ_SPLIT = 1000000000000000") {
		t.Error("the EVAL script lost a line the library treats differently")
	}
}

// TestLibraryConstantsAreKept: no script assigns a constant of the library (constantsKept).
func TestLibraryConstantsAreKept(t *testing.T) {
	t.Parallel()
	_, code, err := Library(func(string) []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var lists []string
	for _, line := range strings.Split(code, "\n") {
		if m := constLine.FindStringSubmatch(line); m != nil {
			lists = append(lists, m[1])
		}
	}
	if len(lists) < 5 {
		t.Fatalf("found %d constant lines in the library: %q", len(lists), lists)
	}
	if err := constantsKept(code, lists); err != nil {
		t.Fatal(err)
	}
}
