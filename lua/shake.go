package lua

import (
	"regexp"
	"strings"
)

// Every helper an include defines is a closure that Redis creates anew on each call of the script,
// with an object for each local it captures: defining all of common.lua's 41 helpers costs about
// 10 µs per call, more than many scripts' own work. So a script keeps only
// the helpers it can reach: its own code, the includes' other top-level statements, and, to a fixed
// point, every helper whose name occurs as a word in what is kept. The scan is textual, so it can
// only keep too much (a name in a comment or a string), never too little; where it could misread
// the code (a long bracket, "[[" or "[=[", which stripComments does not parse) it keeps every
// helper.

var (
	// helperStart opens a top-level helper: "local function name(".
	helperStart = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)
	// helperEnd closes a helper: "end" at column 0, nothing after it but blanks or a comment.
	helperEnd = regexp.MustCompile(`^end\s*(--.*)?$`)
	// longBracket opens a long string or comment.
	longBracket = regexp.MustCompile(`\[=*\[`)
)

// chunk is a piece of an include: a helper (name set) with the comment lines right above it, or
// any other run of lines, which is always kept.
type chunk struct {
	name string
	text string
}

// splitHelpers cuts an include into chunks. A helper is a line "local function name(…" at column
// 0, through the first line that is "end" at column 0 (helperEnd), or that line alone when it ends
// in " end" (a one-line helper). A helper never runs past the start of the next one: one whose end
// is not found so is cut there, and Lua then refuses to load the script, which every test that
// loads the scripts reports.
func splitHelpers(src string) []chunk {
	lines := strings.SplitAfter(src, "\n")
	var out []chunk
	var plain []string
	flush := func() {
		if len(plain) > 0 {
			out = append(out, chunk{text: strings.Join(plain, "")})
			plain = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		m := helperStart.FindStringSubmatch(lines[i])
		if m == nil {
			plain = append(plain, lines[i])
			continue
		}
		// The comment lines right above belong to the helper.
		k := len(plain)
		for k > 0 && strings.HasPrefix(plain[k-1], "--") {
			k--
		}
		comment := plain[k:]
		plain = plain[:k]
		flush()
		end := i
		if !strings.HasSuffix(strings.TrimRight(lines[i], " \t\r\n"), " end") {
			end = len(lines) - 1 // an unclosed helper runs to the end; Lua will say so
			for j := i + 1; j < len(lines); j++ {
				if helperEnd.MatchString(strings.TrimRight(lines[j], "\r\n")) {
					end = j
					break
				}
				if helperStart.MatchString(lines[j]) {
					end = j - 1
					break
				}
			}
		}
		out = append(out, chunk{name: m[1], text: strings.Join(comment, "") + strings.Join(lines[i:end+1], "")})
		i = end
	}
	flush()
	return out
}

// words adds the identifiers in text's code to set: comments are skipped, strings are not (a name
// in a string keeps a helper it need not, which is harmless).
func words(set map[string]bool, text string) {
	text = stripComments(text)
	eachWord(text, func(i, j int) { set[text[i:j]] = true })
}

// eachWord calls f with the bounds of every identifier of src, [A-Za-z_][A-Za-z0-9_]*, in order
// (every use of a helper is one), as the leftmost matches of that regular expression would give
// them: a scan by hand, as the regular expression took most of the time of expanding the scripts.
func eachWord(src string, f func(i, j int)) {
	for i := 0; i < len(src); {
		if !wordStart(src[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(src) && wordByte(src[j]) {
			j++
		}
		f(i, j)
		i = j
	}
}

// wordStart reports whether c may start an identifier, wordByte whether it may be in one.
func wordStart(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' }
func wordByte(c byte) bool  { return wordStart(c) || '0' <= c && c <= '9' }

// stripComments removes Lua's "--" comments, up to the end of their line, that start outside a
// quoted string. It does not parse long brackets (shake keeps every helper where one occurs).
func stripComments(src string) string {
	var b strings.Builder
	var quote byte // the open string's quote, or 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case quote != 0:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(src) {
				i++
				b.WriteByte(src[i])
			} else if c == quote || c == '\n' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
			b.WriteByte(c)
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			if i < len(src) {
				b.WriteByte('\n')
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// shake returns which helpers of the includes to keep, given the script's own text (own) and the
// chunks of its includes.
func shake(own string, includes [][]chunk) map[string]bool {
	keep := map[string]bool{}
	if longBracket.MatchString(own) {
		return keepAll(includes)
	}
	for _, inc := range includes {
		for _, c := range inc {
			if longBracket.MatchString(c.text) {
				return keepAll(includes)
			}
		}
	}
	used := map[string]bool{}
	words(used, own)
	for _, inc := range includes {
		for _, c := range inc {
			if c.name == "" {
				words(used, c.text)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, inc := range includes {
			for _, c := range inc {
				if c.name != "" && !keep[c.name] && used[c.name] {
					keep[c.name] = true
					words(used, c.text)
					changed = true
				}
			}
		}
	}
	return keep
}

// keepAll keeps every helper of the includes.
func keepAll(includes [][]chunk) map[string]bool {
	keep := map[string]bool{}
	for _, inc := range includes {
		for _, c := range inc {
			if c.name != "" {
				keep[c.name] = true
			}
		}
	}
	return keep
}
