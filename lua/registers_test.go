package lua

import (
	"strings"
	"testing"

	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// embeddedMaxRegisters is gopher-lua's limit of registers a function may use (its maxRegisters):
// the embedded Redis (miniredis) compiles every script with gopher-lua, and a script that needs
// more fails there with "register overflow", though redis-server runs it.
const embeddedMaxRegisters = 200

// TestScriptsFitTheEmbeddedRedis compiles every script as EVAL sends it with gopher-lua, the Lua
// of the embedded Redis, so a script past its limit of registers fails here, naming the script,
// in every run, not only in the runs on the embedded Redis. A script's top level holds every
// helper of its includes that it uses (shake.go) and its own top-level locals: a script at the
// limit takes no new helper until it drops a local.
func TestScriptsFitTheEmbeddedRedis(t *testing.T) {
	t.Parallel()
	for _, n := range Names() {
		src, err := Source(n)
		if err != nil {
			t.Fatal(err)
		}
		chunk, err := parse.Parse(strings.NewReader(src), n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		p, err := glua.Compile(chunk, n)
		if err != nil {
			t.Errorf("%s: gopher-lua does not compile it: %v", n, err)
			continue
		}
		if p.NumUsedRegisters > embeddedMaxRegisters {
			t.Errorf("%s: %d registers, over gopher-lua's %d", n, p.NumUsedRegisters, embeddedMaxRegisters)
		}
	}
}
