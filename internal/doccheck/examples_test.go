package doccheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesBuildOutsideTheModule copies each program under examples/ into a module of its own,
// which requires srq as a user's module would (replaced by this checkout), and builds it there
// with the go command that runs this test: an example that imports an internal package, or
// anything else a user's module cannot import, fails to build. The copy's go.sum is the repo's,
// and -mod=mod lets the go command add the requirements the copy's imports need; GOFLAGS (less
// any -mod flag), GOPROXY and the rest of the go command's environment are kept.
func TestExamplesBuildOutsideTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds every example as a module of its own with the go command, which may fetch modules")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// go test puts its own GOROOT/bin first in the PATH of the tests it runs: this finds the go
	// command that built this test.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	goVersion := moduleGoVersion(t, filepath.Join(root, "go.mod"))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	env := goEnv(t, gobin, root)

	dirs := exampleDirs(t, root)
	for _, name := range dirs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), name)
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples", name))); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				t.Fatalf("examples/%s has a go.mod of its own: an example is a directory of the srq module", name)
			}
			gomod := "module example.com/x\n\ngo " + goVersion + "\n\n" +
				"require github.com/srqueue/srq v0.0.0\n\n" +
				"replace github.com/srqueue/srq => " + root + "\n"
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), gobin, "build", "-o", filepath.Join(t.TempDir(), "bin")+string(filepath.Separator), "./...")
			cmd.Dir = dir
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go build in a copy of examples/%s as module example.com/x: %v\n%s", name, err, out)
			}
		})
	}
}

// TestExamplesReadAsPrograms checks what makes each examples/*/main.go a program to copy: a
// package doc comment that says what it shows and gives the command that runs it, and a
// DeleteQueue, so that a run on a real Redis leaves no queue behind.
func TestExamplesReadAsPrograms(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range exampleDirs(t, root) {
		path := filepath.Join(root, "examples", name, "main.go")
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			t.Errorf("examples/%s: %v", name, err)
			continue
		}
		doc := f.Doc.Text()
		if !strings.HasPrefix(doc, "Command "+name+" shows ") && !strings.HasPrefix(doc, "Command "+name+" runs ") {
			t.Errorf("examples/%s/main.go: the package doc comment should start %q and say what the example shows; it is %q",
				name, "Command "+name+" shows", firstLine(doc))
		}
		if run := "go run ./examples/" + name; !strings.Contains(doc, run) {
			t.Errorf("examples/%s/main.go: the package doc comment should give the command that runs it, %q", name, run)
		}
		if !callsDeleteQueue(f) {
			t.Errorf("examples/%s/main.go: calls no srq.DeleteQueue, so a run on a real Redis leaves its queue behind", name)
		}
	}
}

// exampleDirs returns the names of the directories under examples/ that hold Go files, and fails
// the test when there are none (the tests above would then check nothing).
func exampleDirs(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		gofiles, err := filepath.Glob(filepath.Join(root, "examples", e.Name(), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(gofiles) > 0 {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no example under examples/")
	}
	return dirs
}

// moduleGoVersion returns the go directive of the go.mod at path.
func moduleGoVersion(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(src), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s has no go directive", path)
	return ""
}

// goEnv returns the environment for the go command in a copied example: this process's, with
// GOFLAGS as the go command sees it here (the variable or the go env file) less any -mod flag,
// plus -mod=mod, and no workspace.
func goEnv(t *testing.T, gobin, root string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), gobin, "env", "GOFLAGS")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v\n%s", err, stderr.Bytes())
	}
	flags := []string{"-mod=mod"}
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") {
			flags = append(flags, f)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "GOWORK=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOFLAGS="+strings.Join(flags, " "), "GOWORK=off")
}

// callsDeleteQueue reports whether f calls srq.DeleteQueue.
func callsDeleteQueue(f *ast.File) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "DeleteQueue" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "srq" {
				found = true
			}
		}
		return !found
	})
	return found
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
