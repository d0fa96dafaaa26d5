package lua

import (
	"strconv"
	"strings"
	"testing"

	glua "github.com/yuin/gopher-lua"
)

// TestNextSeqPastTheReservationWritesTheCounter runs common.lua's counter helpers on a fake Redis:
// a script that reserved 2 values and hands out 4 (a publish whose duplicate child wakes its
// parent takes values the reservation did not count) must leave the counter at or past the last
// value it handed out, or a later script hands out the same values again.
func TestNextSeqPastTheReservationWritesTheCounter(t *testing.T) {
	t.Parallel()
	body, err := files.ReadFile("includes/common.lua")
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	code.WriteString("local K_SEQ = 'seq'\nlocal clock_ms, clock_s\n")
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "local SEQ_") || strings.HasPrefix(line, "local seq_") {
			code.WriteString(line + "\n")
		}
	}
	for _, h := range []string{"now_ms", "int", "seq_split", "seq_norm", "seq_string", "seq_reserve",
		"seq_floor", "seq_load", "next_seq"} {
		code.WriteString(helperText(t, "common", h) + "\n")
	}
	// The script: reserve 2, hand out 4, then what finish does with the counter.
	code.WriteString(`seq_reserve(2)
local last
for i = 1, 4 do last = next_seq() end
if seq_dirty then redis.call('SET', K_SEQ, seq_string(seq_hi, seq_lo)) end
return last
`)
	const start = 1765000000123000 + 500000 // above the clock's floor
	counter := int64(start)
	L := glua.NewState()
	defer L.Close()
	call := L.NewFunction(func(L *glua.LState) int {
		switch cmd := L.CheckString(1); cmd {
		case "TIME":
			reply := L.NewTable()
			reply.Append(glua.LString("1765000000"))
			reply.Append(glua.LString("123456"))
			L.Push(reply)
		case "INCRBY":
			n, _ := strconv.ParseInt(L.CheckString(3), 10, 64)
			counter += n
			L.Push(glua.LNumber(counter))
		case "GET":
			L.Push(glua.LString(strconv.FormatInt(counter, 10)))
		case "SET":
			counter, _ = strconv.ParseInt(L.CheckString(3), 10, 64)
			L.Push(glua.LString("OK"))
		default:
			t.Errorf("unexpected command %s", cmd)
			L.Push(glua.LNil)
		}
		return 1
	})
	redis := L.NewTable()
	L.SetField(redis, "call", call)
	L.SetField(redis, "pcall", call)
	L.SetGlobal("redis", redis)
	if err := L.DoString(code.String()); err != nil {
		t.Fatal(err)
	}
	last, err := strconv.ParseInt(L.Get(-1).String(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if last != start+4 {
		t.Fatalf("the 4th value handed out is %d, want %d", last, start+4)
	}
	if counter < last {
		t.Fatalf("the counter is %d after the script handed out %d: the next script hands out its values again", counter, last)
	}
}
