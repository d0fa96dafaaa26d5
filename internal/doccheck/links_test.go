package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownLinks checks every relative link of the module's Markdown files (outside testdata and
// dot directories): the file or directory it names must exist, and an anchor (#section) must be
// the slug of a heading of the Markdown file it points to, as GitHub makes them. Links inside code
// (fenced blocks, backticks) and links with a scheme (https:, mailto:) are not checked.
func TestMarkdownLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown files found")
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		a := headingSlugs(string(src))
		anchors[path] = a
		return a, nil
	}
	checked := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for _, l := range links(string(src)) {
			checked++
			target, anchor, _ := strings.Cut(l.target, "#")
			dest := file
			if target != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link to %q: no such file", rel, l.line, l.target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Errorf("%s:%d: link to %q: %v", rel, l.line, l.target, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link to %q: no heading with that anchor", rel, l.line, l.target)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the parser is broken")
	}
}

// TestMarkdownParsing checks the link and heading parsers on a sample, so the link test cannot
// pass by finding nothing.
func TestMarkdownParsing(t *testing.T) {
	t.Parallel()
	src := "# Top: the `srq` Guide\n\nSee [a](a.md#top-the-srq-guide), ![img](x.png) and " +
		"[web](https://example.com).\n`[code](no.md)`\n```go\n[fenced](no.md)\n# not a heading\n```\n" +
		"## 2. The task hash\n### ack_fetch.lua\n## Top: the `srq` Guide\n[b](b.md)\n"
	var got []string
	for _, l := range links(src) {
		got = append(got, l.target)
	}
	if strings.Join(got, " ") != "a.md#top-the-srq-guide x.png b.md" {
		t.Errorf("links: %q", got)
	}
	slugs := headingSlugs(src)
	for _, want := range []string{"top-the-srq-guide", "2-the-task-hash", "ack_fetchlua", "top-the-srq-guide-1"} {
		if !slugs[want] {
			t.Errorf("no slug %q in %v", want, slugs)
		}
	}
	if slugs["not-a-heading"] {
		t.Error("a line in a fenced block was taken for a heading")
	}
}

type link struct {
	target string
	line   int
}

var (
	linkRE   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineRE = regexp.MustCompile("`[^`]*`")
	schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative link targets of src outside code, with their line numbers.
func links(src string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = inlineRE.ReplaceAllString(line, "")
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if schemeRE.MatchString(m[1]) {
				continue
			}
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// headingSlugs returns the anchors GitHub gives the ATX headings of src: lower case, backticks
// and punctuation other than '-' and '_' dropped, spaces made '-', and "-1", "-2", … appended to
// repeats.
func headingSlugs(src string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			slugs[slug+"-"+itoa(n)] = true
		} else {
			slugs[slug] = true
		}
		seen[slug]++
	}
	return slugs
}
