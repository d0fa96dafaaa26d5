// Package lua holds srq's Redis scripts, one file per operation, and expands their includes.
//
// Each script starts with a header stating its KEYS, ARGV and return values. A line of the form
//
//	-- @include name
//
// is replaced by the text of includes/name.lua, so helpers are written once, less the helpers the
// script cannot reach (shake.go): each one kept costs every call of the script a closure. The key
// names common.lua gives to KEYS entries are then replaced by the entries (aliases.go), so no
// helper captures them, and the helpers a script names in "-- @cold" lines are made only at their
// first use in a call (cold.go). Library builds one Redis Functions library of all the scripts
// from the same files, with the helpers defined once per load (library.go). The engine package
// loads the expanded scripts or the library; this package is not a stable API.
package lua

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

//go:embed *.lua includes/*.lua
var files embed.FS

var includeLine = regexp.MustCompile(`(?m)^-- @include ([a-z_]+)\s*$`)

// Names returns the names of all scripts (the file names without ".lua"), sorted.
func Names() []string {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".lua") {
			names = append(names, strings.TrimSuffix(e.Name(), ".lua"))
		}
	}
	sort.Strings(names)
	return names
}

// SHA1 returns the SHA1 of src in hex, the name EVALSHA, SCRIPT EXISTS and Redis's command
// statistics give the script with that source (Source's result).
func SHA1(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// Source returns the script called name with its includes expanded, each include without the
// helpers (top-level "local function"s) that the script cannot reach (shake.go), its key names
// replaced by the KEYS entries they name (aliases.go), and its cold helpers made at their first
// use (cold.go). It fails when the script or one of its includes does not exist, when an include
// includes another, or when an "@cold" line names a helper no include defines.
func Source(name string) (string, error) { return expand(name, false) }

// Prologue returns what Source returns for the script called name up to the end of its last
// include: its header and the includes as that script keeps them, without the script's own code.
// Run with "return 1" after it, it costs what defining the script's helpers costs every call of
// it, which bench/cmd/instr measures. It fails as Source does.
func Prologue(name string) (string, error) { return expand(name, true) }

// expand is Source, or Prologue when prologue is set.
func expand(name string, prologue bool) (string, error) {
	raw, err := files.ReadFile(name + ".lua")
	if err != nil {
		return "", fmt.Errorf("lua: no script %q: %w", name, err)
	}
	script := string(raw)
	// The includes, cut into chunks, by the position of their include line in the script.
	lines := includeLine.FindAllStringSubmatchIndex(script, -1)
	var includes [][]chunk
	for _, m := range lines {
		inc := script[m[2]:m[3]]
		body, err := files.ReadFile(path.Join("includes", inc+".lua"))
		if err != nil {
			return "", fmt.Errorf("lua: script %q includes %q: %w", name, inc, err)
		}
		if includeLine.Match(body) {
			return "", fmt.Errorf("lua: include %q includes another; includes must be flat", inc)
		}
		includes = append(includes, splitHelpers(string(body)))
	}
	keep := shake(includeLine.ReplaceAllString(script, ""), includes)
	cold, err := coldNames(script, includes)
	if err != nil {
		return "", fmt.Errorf("lua: script %q: %w", name, err)
	}
	for n := range cold {
		if !keep[n] {
			delete(cold, n) // not reachable: not there at all
		}
	}
	if prologue && len(lines) > 0 {
		script = script[:lines[len(lines)-1][1]]
	}
	i := 0
	var coldTexts []string
	expanded := includeLine.ReplaceAllStringFunc(script, func(string) string {
		var b strings.Builder
		if i == 0 && len(cold) > 0 {
			b.WriteString("local " + lazyTable + " -- the cold helpers (lua/cold.go)\n")
		}
		for _, c := range includes[i] {
			switch {
			case cold[c.name]:
				coldTexts = append(coldTexts, c.text)
			case c.name == "" || keep[c.name]:
				b.WriteString(c.text)
			}
		}
		if i == len(includes)-1 && len(cold) > 0 {
			b.WriteString(lazyDefinitions(coldTexts))
		}
		i++
		return b.String()
	})
	return keysLine.ReplaceAllString(inlineAliases(callCold(expanded, cold)), keysFill()), nil
}
