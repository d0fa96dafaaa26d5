package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Human output shows text that publishers and handlers chose (queue names, partition keys, task
// and consumer ids, errors, headers): printed raw, an escape sequence in it would drive the
// operator's terminal (colours, the window title, a cleared screen, a hyperlink), and a
// right-to-left override would make it read differently from what it is. Every value of a table
// goes through show, every message through escapeText, and --json output through escapeText too
// (writeJSON), after JSON's own escaping.

// unsafeRune reports whether r, written raw to a terminal, could act on it or reorder the text
// around it: C0 and C1 controls and DEL (escape sequences, bells, carriage returns), and the
// Unicode bidirectional controls.
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == '\u200e', r == '\u200f', r == '\u061c':
		return true
	}
	return false
}

// needsQuote reports whether s holds an unsafe rune or a byte that is not UTF-8.
func needsQuote(s string) bool {
	for i, r := range s {
		if unsafeRune(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return true
		}
	}
	return false
}

// show returns s for a table cell or a line of human output: as it is when it is safe to print,
// else as a Go string literal ("\x1b[31mred"), which escapes every control and non-printable rune.
func show(s string) string {
	if needsQuote(s) {
		return strconv.Quote(s)
	}
	return s
}

// escapeText replaces each unsafe rune of s, except the line breaks, with its \u escape (a byte
// that is not UTF-8 with \x), for messages that are several lines of text of which only parts come
// from elsewhere, and for JSON shown to a person (\u escapes are JSON's too).
func escapeText(s string) string {
	if !needsQuote(strings.ReplaceAll(s, "\n", "")) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r != '\n' && unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
