package web

import (
	"encoding/hex"
	"fmt"
	"html/template"
	"math"
	"time"
	"unicode"
	"unicode/utf8"
)

// funcs are the template functions. Each returns plain text: html/template escapes it for the
// context it lands in.
var funcs = template.FuncMap{
	"utc":     utc,
	"ago":     ago,
	"until":   until,
	"payload": newPayloadView,
}

// utc formats t for a tooltip; empty for the zero time.
func utc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// ago says how long before now t was ("12s ago"), or how long after ("in 3s").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in " + human(-d)
	}
	return human(d) + " ago"
}

// until says how long after now t is ("in 20s"), or that it passed ("3s ago").
func until(now, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	d := t.Sub(now)
	if d < 0 {
		return human(-d) + " ago"
	}
	return "in " + human(d)
}

// human rounds d to a short, readable figure: 850ms, 12s, 4m10s, 3h05m, 2d4h.
func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", math.Floor(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Payload display limits: text up to payloadTextMax bytes, binary as a hex dump of up to
// payloadHexMax bytes.
const (
	payloadTextMax = 16 << 10
	payloadHexMax  = 4 << 10
)

// payloadView is a payload as the task page shows it: text when it is printable UTF-8, else a
// hex dump; long payloads are cut.
type payloadView struct {
	Size      int
	Shown     int
	Hex       bool
	Truncated bool
	Text      string
}

func newPayloadView(b []byte) payloadView {
	v := payloadView{Size: len(b)}
	if printable(b) {
		cut := min(len(b), payloadTextMax)
		for cut > 0 && cut < len(b) && !utf8.RuneStart(b[cut]) {
			cut--
		}
		v.Shown, v.Text = cut, string(b[:cut])
	} else {
		v.Shown, v.Hex = min(len(b), payloadHexMax), true
		v.Text = hex.Dump(b[:v.Shown])
	}
	v.Truncated = v.Shown < v.Size
	return v
}

// printable reports whether b is valid UTF-8 without control characters other than tab and
// newlines: JSON and plain text, not MessagePack.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}
