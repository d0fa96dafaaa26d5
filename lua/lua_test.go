package lua

import (
	"strings"
	"testing"
)

func TestEveryScriptExpands(t *testing.T) {
	t.Parallel()
	names := Names()
	if len(names) == 0 {
		t.Fatal("no scripts embedded")
	}
	for _, name := range names {
		src, err := Source(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(src, "-- @include") {
			t.Errorf("%s: an include was left unexpanded", name)
		}
		for _, part := range []string{"KEYS:", "ARGV", "Returns:"} {
			if !strings.Contains(src, part) {
				t.Errorf("%s: header does not state %q", name, part)
			}
		}
	}
}

func TestUnknownScript(t *testing.T) {
	t.Parallel()
	if _, err := Source("no_such_script"); err == nil {
		t.Fatal("want an error for a script that does not exist")
	}
}

func TestPrologueIsSourceWithoutTheScriptsOwnCode(t *testing.T) {
	t.Parallel()
	for _, name := range Names() {
		src, err := Source(name)
		if err != nil {
			t.Fatal(err)
		}
		pro, err := Prologue(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(src, pro) {
			t.Errorf("%s: the prologue is not the start of the source", name)
		}
		if len(strings.TrimSpace(src[len(pro):])) == 0 {
			t.Errorf("%s: the prologue holds the script's own code", name)
		}
		if !strings.Contains(pro, "redis.replicate_commands") {
			t.Errorf("%s: the prologue lacks common.lua", name)
		}
	}
	pro, _ := Prologue("publish")
	if strings.Contains(pro, "seq_reserve((#ARGV") {
		t.Error("publish: the prologue holds the script's own first line")
	}
	if _, err := Prologue("no_such_script"); err == nil {
		t.Error("want an error for a script that does not exist")
	}
}
