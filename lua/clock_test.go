package lua

import (
	"strings"
	"testing"

	glua "github.com/yuin/gopher-lua"
)

// helperText returns the text of helper name of include inc (splitHelpers).
func helperText(t *testing.T, inc, name string) string {
	t.Helper()
	body, err := files.ReadFile("includes/" + inc + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range splitHelpers(string(body)) {
		if c.name == name {
			return c.text
		}
	}
	t.Fatalf("includes/%s.lua has no helper %s", inc, name)
	return ""
}

// TestNowMsClockString runs common.lua's now_ms on TIME replies of every width of the
// microseconds (Redis sends them without leading zeros): the clock's string, which int returns
// for the clock and the scripts send to Redis, must be the milliseconds, and the number the same.
func TestNowMsClockString(t *testing.T) {
	t.Parallel()
	code := "local clock_ms, clock_s\n" + helperText(t, "common", "now_ms") +
		"\nlocal ms = now_ms()\nreturn ms, clock_s, clock_ms\n"
	for _, c := range []struct{ us, want string }{
		{"999999", "1765000000999"}, {"123456", "1765000000123"}, {"100000", "1765000000100"},
		{"99999", "1765000000099"}, {"12345", "1765000000012"}, {"1234", "1765000000001"},
		{"999", "1765000000000"}, {"7", "1765000000000"}, {"0", "1765000000000"},
	} {
		L := glua.NewState()
		redis := L.NewTable()
		L.SetField(redis, "call", L.NewFunction(func(L *glua.LState) int {
			reply := L.NewTable()
			reply.Append(glua.LString("1765000000"))
			reply.Append(glua.LString(c.us))
			L.Push(reply)
			return 1
		}))
		L.SetGlobal("redis", redis)
		if err := L.DoString(code); err != nil {
			t.Fatalf("us %s: %v", c.us, err)
		}
		ms, s, cms := L.Get(-3), L.Get(-2), L.Get(-1)
		if s.String() != c.want || strings.TrimSpace(ms.String()) != c.want || cms.String() != c.want {
			t.Errorf("TIME 1765000000 %s: now_ms %v, clock_s %v, clock_ms %v; want %s", c.us, ms, s, cms, c.want)
		}
		L.Close()
	}
}
