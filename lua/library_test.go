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
	} {
		names, out, err := stateText(c.in)
		if err != nil || out != c.out || !slices.Equal(names, c.names) {
			t.Errorf("stateText(%q) = %v, %q, %v; want %v, %q", c.in, names, out, err, c.names, c.out)
		}
	}
	if _, _, err := stateText("local x.y = 1\n"); err == nil {
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
