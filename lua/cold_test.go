package lua

import (
	"strings"
	"testing"
)

func TestCallCold(t *testing.T) {
	t.Parallel()
	cold := map[string]bool{"place": true, "schedule": true}
	cases := []struct{ name, in, want string }{
		{"a call", "place(p, now)\n", "lazy.place(p, now)\n"},
		{"nested calls", "place(schedule(p))\n", "lazy.place(lazy.schedule(p))\n"},
		{"fields and methods stay", "t.place(p) t:place(p)\n", "t.place(p) t:place(p)\n"},
		{"whole words only", "replace(p) place_new(p) placed(p)\n", "replace(p) place_new(p) placed(p)\n"},
		{"the definition in the lazy table", "function lazy.place(p)\n", "function lazy.place(p)\n"},
	}
	for _, c := range cases {
		if got := callCold(c.in, cold); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if got := callCold("place(p)\n", nil); got != "place(p)\n" {
		t.Errorf("no cold helpers: got %q", got)
	}
}

func TestColdNames(t *testing.T) {
	t.Parallel()
	includes := [][]chunk{splitHelpers("local function place(p) return p end\nlocal function meta(p) return p end\n")}
	got, err := coldNames("-- @cold place\n-- @cold meta\n", includes)
	if err != nil || !got["place"] || !got["meta"] || len(got) != 2 {
		t.Fatalf("got %v, %v; want place and meta", got, err)
	}
	if _, err := coldNames("-- @cold plcae\n", includes); err == nil || !strings.Contains(err.Error(), "plcae") {
		t.Fatalf("a name no include defines: got %v, want an error naming it", err)
	}
}

// TestLazyDefinitions checks the table the cold helpers are made in: each helper becomes a field,
// and its comment stays with it.
func TestLazyDefinitions(t *testing.T) {
	t.Parallel()
	got := lazyDefinitions([]string{"-- place puts p, as local function put would.\nlocal function place(p) return p end\n"})
	for _, want := range []string{
		"lazy = setmetatable({}, {__index = function(t, name)\n",
		"  setmetatable(t, nil)\n",
		"-- place puts p, as local function put would.\nfunction lazy.place(p) return p end\n",
		"  return rawget(t, name)\nend})\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// TestColdHelpersOfPublish checks what publish.lua's @cold lines do to its expansion: the helpers
// are defined in the lazy table only, after the includes and before the script's own code.
func TestColdHelpersOfPublish(t *testing.T) {
	t.Parallel()
	src, err := Source("publish")
	if err != nil {
		t.Fatal(err)
	}
	pro, err := Prologue("publish")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"place", "schedule", "levels_of"} {
		if strings.Contains(src, "\nlocal function "+h+"(") {
			t.Errorf("%s is cold but defined on every call", h)
		}
		if !strings.Contains(pro, "\nfunction lazy."+h+"(") {
			t.Errorf("%s is not in the lazy table of the prologue", h)
		}
	}
	if decl := strings.Index(src, "\nlocal lazy"); decl < 0 {
		t.Error("the lazy table is not declared")
	} else if decl > strings.Index(src, "local function k_task(") {
		t.Error("the lazy table is declared after the helpers that call through it")
	}
	if !strings.Contains(src, "lazy.place(p, now)") {
		t.Error("place_new does not call place through the lazy table")
	}
}
