package doccheck

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsNameRealFlagsAndFiles checks what the guide names besides links. Every file or directory
// of the module that a page names in code (`internal/pool/settle.go`, `examples/quickstart`,
// `schedule.go`) exists: a path with a slash from the module's root (or the page's directory), a
// bare file name anywhere in the module. Every flag docs/cli.md names (`--partition`) is one the
// srq command knows: it is in `srq --help`, or in the help of one of its commands (`srq web
// --help`). A path that leaves the module (`../shared/…`) is not checked.
func TestDocsNameRealFlagsAndFiles(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no pages in docs/: %v", err)
	}
	pages = append(pages, docs...)

	t.Run("files", func(t *testing.T) {
		t.Parallel()
		names := baseNames(t, root)
		checked := 0
		for _, page := range pages {
			src, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, page)
			for _, ref := range fileRefs(string(src)) {
				checked++
				if strings.HasPrefix(ref.name, "../") {
					continue // outside the module
				}
				if !strings.Contains(ref.name, "/") {
					if !names[ref.name] {
						t.Errorf("%s:%d: names %q: no file of that name in the module", rel, ref.line, ref.name)
					}
					continue
				}
				p := filepath.FromSlash(strings.TrimSuffix(ref.name, "/"))
				if !exists(filepath.Join(root, p)) && !exists(filepath.Join(filepath.Dir(page), p)) {
					t.Errorf("%s:%d: names %q: no such file or directory", rel, ref.line, ref.name)
				}
			}
		}
		if checked < 50 {
			t.Fatalf("only %d file names found in the pages: the parser is broken", checked)
		}
	})

	t.Run("flags", func(t *testing.T) {
		t.Parallel()
		bin := filepath.Join(t.TempDir(), "srq")
		build := exec.Command("go", "build", "-o", bin, "./cmd/srq")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/srq: %v\n%s", err, out)
		}
		top := help(t, bin)
		helps := top
		for _, cmd := range commandsOf(top) {
			helps += help(t, bin, cmd)
		}
		known := map[string]bool{}
		for _, f := range helpFlagRE.FindAllStringSubmatch(helps, -1) {
			known[f[1]] = true
		}
		src, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		for _, f := range docFlagRE.FindAllStringSubmatch(string(src), -1) {
			named[f[1]] = true
		}
		if len(named) < 20 || len(known) < 20 {
			t.Fatalf("%d flags named in cli.md, %d in the help: a parser is broken", len(named), len(known))
		}
		for _, f := range slices.Sorted(func(yield func(string) bool) {
			for f := range named {
				if !yield(f) {
					return
				}
			}
		}) {
			if !known[f] {
				t.Errorf("docs/cli.md names --%s, which neither srq --help nor a command's help has", f)
			}
		}
	})
}

var (
	// fileRE matches an inline code span that is a file of the module: a path with a known
	// extension, or one under a directory of the module.
	fileRE = regexp.MustCompile("`((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*\\.(?:go|lua|md|svg|png|yml)|(?:\\.ci|bench|cmd|codec|devredis|engine|examples|faults|inspect|internal|lua|middleware|partition|srqtest|web)/[A-Za-z0-9_./-]*)`")
	// docFlagRE matches a flag as cli.md writes it; helpFlagRE as the help does: "--name" at the
	// top, "-name" in a command's flag set.
	docFlagRE  = regexp.MustCompile(`(?:^|[\s\x60(\[|])--([a-z][a-z-]*[a-z])`)
	helpFlagRE = regexp.MustCompile(`(?m)(?:^|[\s,(\[|/])--?([a-z][a-z-]*[a-z])`)
)

type fileRef struct {
	name string
	line int
}

// fileRefs returns the files src names in inline code, outside fenced blocks (code to copy, whose
// names are the reader's).
func fileRefs(src string) []fileRef {
	var out []fileRef
	fenced := false
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range fileRE.FindAllStringSubmatch(line, -1) {
			out = append(out, fileRef{name: m[1], line: i + 1})
		}
	}
	return out
}

// baseNames returns the names of every file and directory of the module, outside dot directories.
func baseNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		names[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// help returns what bin prints for args and --help, whatever its exit code.
func help(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%s %v --help: %v", bin, args, err)
		}
	}
	return string(out) + "\n"
}

// commandsOf returns the first word of each command the top-level help lists.
func commandsOf(top string) []string {
	var cmds []string
	in := false
	for _, line := range strings.Split(top, "\n") {
		switch {
		case strings.HasPrefix(line, "Commands:"):
			in = true
			continue
		case in && strings.TrimSpace(line) == "":
			return cmds
		}
		if in && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			if w := strings.Fields(line); len(w) > 0 && !slices.Contains(cmds, w[0]) {
				cmds = append(cmds, w[0])
			}
		}
	}
	return cmds
}
