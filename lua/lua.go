// Package lua holds srq's Redis scripts, one file per operation, and expands their includes.
//
// Each script starts with a header stating its KEYS, ARGV and return values. A line of the form
//
//	-- @include name
//
// is replaced by the text of includes/name.lua, so helpers are written once. The engine package
// loads the expanded scripts; this package is not a stable API.
package lua

import (
	"embed"
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

// Source returns the script called name with its includes expanded. It fails when the script or
// one of its includes does not exist, or when an include includes another.
func Source(name string) (string, error) {
	raw, err := files.ReadFile(name + ".lua")
	if err != nil {
		return "", fmt.Errorf("lua: no script %q: %w", name, err)
	}
	var expandErr error
	src := includeLine.ReplaceAllStringFunc(string(raw), func(line string) string {
		inc := includeLine.FindStringSubmatch(line)[1]
		body, err := files.ReadFile(path.Join("includes", inc+".lua"))
		if err != nil {
			expandErr = fmt.Errorf("lua: script %q includes %q: %w", name, inc, err)
			return line
		}
		if includeLine.Match(body) {
			expandErr = fmt.Errorf("lua: include %q includes another; includes must be flat", inc)
		}
		return string(body)
	})
	if expandErr != nil {
		return "", expandErr
	}
	return src, nil
}
