package lua

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/yuin/gopher-lua/ast"
	"github.com/yuin/gopher-lua/parse"
)

// redisGlobals are the globals Redis gives a script or a library: the Lua libraries it loads and
// its own (redis, KEYS, ARGV, cjson, cmsgpack, bit, struct).
var redisGlobals = map[string]bool{
	"redis": true, "KEYS": true, "ARGV": true, "cjson": true, "cmsgpack": true, "bit": true,
	"struct": true, "string": true, "table": true, "math": true, "os": true, "tonumber": true,
	"tostring": true, "type": true, "pairs": true, "ipairs": true, "next": true, "select": true,
	"unpack": true, "error": true, "pcall": true, "xpcall": true, "assert": true,
	"setmetatable": true, "getmetatable": true, "rawget": true, "rawset": true, "rawequal": true,
}

// TestScriptsUseNoUndefinedGlobal parses every script as it is sent (EVAL) and the Functions
// library, and fails on any name that is neither a local in scope where it is used nor one of
// Redis's globals. Redis refuses a script that creates a global, but it reads an undefined one as
// nil: a helper called before its "local function" line, or a misspelt local, fails only when
// that line runs.
func TestScriptsUseNoUndefinedGlobal(t *testing.T) {
	t.Parallel()
	check := func(name, src string) {
		chunk, err := parse.Parse(strings.NewReader(src), name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		var g globals
		g.block(chunk)
		for _, u := range g.sorted() {
			t.Errorf("%s: undefined global %s", name, u)
		}
	}
	for _, n := range Names() {
		src, err := Source(n)
		if err != nil {
			t.Fatal(err)
		}
		check(n, src)
	}
	_, code, err := Library(func(string) []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	// FUNCTION LOAD's shebang line is not Lua.
	_, code, _ = strings.Cut(code, "\n")
	check("library", code)
}

// TestGlobalsFindsUndefinedNames keeps the checker honest: each source uses one name that is not
// defined where it is used.
func TestGlobalsFindsUndefinedNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{"local function a() return b() end\nlocal function b() return 1 end\nreturn a()", "b"},
		{"local x = 1\nreturn y + x", "y"},
		{"for i = 1, 2 do end\nreturn i", "i"},
		{"do local z = 1 end\nreturn z", "z"},
		{"local function f(p) return p end\nreturn f(q)", "q"},
		{"w = 1", "w"},
		{"local t = {}\nfunction t.m() return u end\nreturn t", "u"},
		{"if true then local v = 1 else return v end", "v"},
	} {
		chunk, err := parse.Parse(strings.NewReader(tc.src), "t")
		if err != nil {
			t.Fatal(err)
		}
		var g globals
		g.block(chunk)
		if got := g.sorted(); len(got) != 1 || !strings.HasPrefix(got[0], tc.want+" ") {
			t.Errorf("%q: undefined %v, want %s", tc.src, got, tc.want)
		}
	}
	// A local function calls itself; a for loop's names live in its body.
	chunk, err := parse.Parse(strings.NewReader(
		"local function f(n) if n > 0 then return f(n - 1) end return 0 end\n"+
			"for k, v in pairs({}) do f(k) f(v) end\nreturn f(1)"), "t")
	if err != nil {
		t.Fatal(err)
	}
	var g globals
	g.block(chunk)
	if got := g.sorted(); len(got) != 0 {
		t.Errorf("undefined %v, want none", got)
	}
}

// globals walks a chunk with its scopes of locals and collects the names used outside them.
type globals struct {
	scopes    []map[string]bool
	undefined map[string]int // name → line of its first use
}

func (g *globals) sorted() []string {
	var out []string
	for n, line := range g.undefined {
		out = append(out, fmt.Sprintf("%s (line %d)", n, line))
	}
	sort.Strings(out)
	return out
}

func (g *globals) declare(names ...string) {
	for _, n := range names {
		g.scopes[len(g.scopes)-1][n] = true
	}
}

func (g *globals) use(name string, line int) {
	for i := len(g.scopes) - 1; i >= 0; i-- {
		if g.scopes[i][name] {
			return
		}
	}
	if redisGlobals[name] {
		return
	}
	if g.undefined == nil {
		g.undefined = map[string]int{}
	}
	if _, seen := g.undefined[name]; !seen {
		g.undefined[name] = line
	}
}

// block walks stmts in a scope of their own, after declaring names in it.
func (g *globals) block(stmts []ast.Stmt, names ...string) {
	g.scopes = append(g.scopes, map[string]bool{})
	g.declare(names...)
	for _, s := range stmts {
		g.stmt(s)
	}
	g.scopes = g.scopes[:len(g.scopes)-1]
}

func (g *globals) stmt(s ast.Stmt) {
	switch s := s.(type) {
	case *ast.AssignStmt:
		g.exprs(s.Rhs)
		g.exprs(s.Lhs)
	case *ast.LocalAssignStmt:
		// The parser gives "local function f" as "local f = function": f is in scope in its own
		// body, as it is for the real statement.
		if len(s.Names) == 1 && len(s.Exprs) == 1 {
			if _, ok := s.Exprs[0].(*ast.FunctionExpr); ok {
				g.declare(s.Names...)
			}
		}
		g.exprs(s.Exprs)
		g.declare(s.Names...)
	case *ast.FuncCallStmt:
		g.expr(s.Expr)
	case *ast.DoBlockStmt:
		g.block(s.Stmts)
	case *ast.WhileStmt:
		g.expr(s.Condition)
		g.block(s.Stmts)
	case *ast.RepeatStmt:
		// The condition sees the body's locals.
		g.scopes = append(g.scopes, map[string]bool{})
		for _, st := range s.Stmts {
			g.stmt(st)
		}
		g.expr(s.Condition)
		g.scopes = g.scopes[:len(g.scopes)-1]
	case *ast.IfStmt:
		g.expr(s.Condition)
		g.block(s.Then)
		g.block(s.Else)
	case *ast.NumberForStmt:
		g.expr(s.Init)
		g.expr(s.Limit)
		if s.Step != nil {
			g.expr(s.Step)
		}
		g.block(s.Stmts, s.Name)
	case *ast.GenericForStmt:
		g.exprs(s.Exprs)
		g.block(s.Stmts, s.Names...)
	case *ast.FuncDefStmt:
		g.expr(s.Name.Func)
		if s.Name.Receiver != nil {
			g.expr(s.Name.Receiver)
		}
		names := s.Func.ParList.Names
		if s.Name.Method != "" {
			names = append([]string{"self"}, names...)
		}
		g.block(s.Func.Stmts, names...)
	case *ast.ReturnStmt:
		g.exprs(s.Exprs)
	case *ast.BreakStmt, *ast.LabelStmt, *ast.GotoStmt:
	default:
		panic(fmt.Sprintf("globals: statement %T", s))
	}
}

func (g *globals) exprs(es []ast.Expr) {
	for _, e := range es {
		g.expr(e)
	}
}

func (g *globals) expr(e ast.Expr) {
	switch e := e.(type) {
	case nil, *ast.TrueExpr, *ast.FalseExpr, *ast.NilExpr, *ast.NumberExpr, *ast.StringExpr,
		*ast.Comma3Expr:
	case *ast.IdentExpr:
		g.use(e.Value, e.Line())
	case *ast.AttrGetExpr:
		g.expr(e.Object)
		g.expr(e.Key)
	case *ast.TableExpr:
		for _, f := range e.Fields {
			g.expr(f.Key)
			g.expr(f.Value)
		}
	case *ast.FuncCallExpr:
		g.expr(e.Func)
		g.expr(e.Receiver)
		g.exprs(e.Args)
	case *ast.LogicalOpExpr:
		g.expr(e.Lhs)
		g.expr(e.Rhs)
	case *ast.RelationalOpExpr:
		g.expr(e.Lhs)
		g.expr(e.Rhs)
	case *ast.StringConcatOpExpr:
		g.expr(e.Lhs)
		g.expr(e.Rhs)
	case *ast.ArithmeticOpExpr:
		g.expr(e.Lhs)
		g.expr(e.Rhs)
	case *ast.UnaryMinusOpExpr:
		g.expr(e.Expr)
	case *ast.UnaryNotOpExpr:
		g.expr(e.Expr)
	case *ast.UnaryLenOpExpr:
		g.expr(e.Expr)
	case *ast.FunctionExpr:
		g.block(e.Stmts, e.ParList.Names...)
	default:
		panic(fmt.Sprintf("globals: expression %T", e))
	}
}
