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
