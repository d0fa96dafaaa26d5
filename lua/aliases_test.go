package lua

import (
	"regexp"
	"testing"
)

func TestInlineAliases(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"keys become entries, the line goes",
			"local K_A, K_B = KEYS[1], KEYS[2]\nlocal function f() return K_A .. K_B end\n",
			"local function f() return KEYS[1] .. KEYS[2] end\n"},
		{"whole words only",
			"local K_A = KEYS[3]\nlocal K_AB, x_K_A = 1, 2\nreturn K_A\n",
			"local K_AB, x_K_A = 1, 2\nreturn KEYS[3]\n"},
		{"a comment after the line",
			"local K_A = KEYS[1] -- ready\nreturn K_A\n",
			"return KEYS[1]\n"},
		{"ARGV entries stay locals",
			"local BASE = ARGV[1]\nreturn BASE\n",
			"local BASE = ARGV[1]\nreturn BASE\n"},
		{"lower-case names stay locals",
			"local ready = KEYS[1]\nreturn ready\n",
			"local ready = KEYS[1]\nreturn ready\n"},
		{"not at the top level",
			"  local K_A = KEYS[1]\nreturn K_A\n",
			"  local K_A = KEYS[1]\nreturn K_A\n"},
		{"more names than entries",
			"local K_A, K_B = KEYS[1]\nreturn K_A\n",
			"local K_A, K_B = KEYS[1]\nreturn K_A\n"},
		{"anything else on the right",
			"local K_A = KEYS[1] .. 'x'\nreturn K_A\n",
			"local K_A = KEYS[1] .. 'x'\nreturn K_A\n"},
	}
	for _, c := range cases {
		if got := inlineAliases(c.in); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestScriptsReadKeysDirectly: no expanded script captures a key name; each reads KEYS where it
// uses one.
func TestScriptsReadKeysDirectly(t *testing.T) {
	t.Parallel()
	keyName := regexp.MustCompile(`\bK_(READY|SCHED|INFLIGHT|DEAD|STATS|SEQ|WAKE|DEDUP|CTL|DEPTH|HEADS|CONSUMERS|QPAUSE|PPAUSE)\b`)
	for _, name := range Names() {
		src, err := Source(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := keyName.FindString(stripComments(src)); m != "" {
			t.Errorf("%s: still names %s", name, m)
		}
	}
}
