package web

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/srqueue/srq/internal/payload"
)

// funcs are the template functions. Each returns plain text: html/template escapes it for the
// context it lands in.
var funcs = template.FuncMap{
	"utc":     utc,
	"ago":     ago,
	"until":   until,
	"payload": newPayloadView,
	"add": func(xs ...int) int {
		n := 0
		for _, x := range xs {
			n += x
		}
		return n
	},
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

// payloadView is a payload as the task page shows it: a JSON payload, or a msgpack one (the
// default codec's), as indented JSON; other printable UTF-8 as text; anything else as a hex dump.
// The record does not name the codec that wrote the payload: payload.Decode recognises it from the
// bytes. Long payloads are cut.
type payloadView struct {
	Size      int
	Format    string // "JSON", "msgpack" (shown as JSON), "text" or "hex"
	Shown     int    // bytes of Text shown (of the payload itself for text and hex)
	Hex       bool
	Truncated bool
	Text      string
}

func newPayloadView(b []byte) payloadView {
	v := payloadView{Size: len(b)}
	format, js := payload.Decode(b)
	switch format {
	case payload.FormatJSON, payload.FormatMsgpack:
		var out bytes.Buffer
		if json.Indent(&out, js, "", "  ") == nil {
			v.Format = "JSON"
			if format == payload.FormatMsgpack {
				v.Format = "msgpack"
			}
			text := out.Bytes()
			v.Shown, v.Text = cutText(text, payloadTextMax)
			v.Truncated = v.Shown < len(text)
			return v
		}
	case payload.FormatEmpty, payload.FormatText:
		if printable(b) {
			v.Format = "text"
			v.Shown, v.Text = cutText(b, payloadTextMax)
			v.Truncated = v.Shown < v.Size
			return v
		}
	}
	v.Format, v.Hex = "hex", true
	v.Shown = min(len(b), payloadHexMax)
	v.Text = hex.Dump(b[:v.Shown])
	v.Truncated = v.Shown < v.Size
	return v
}

// cutText returns the first bytes of b, at most most and not inside a UTF-8 sequence.
func cutText(b []byte, most int) (int, string) {
	cut := min(len(b), most)
	for cut > 0 && cut < len(b) && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return cut, string(b[:cut])
}

// printable reports whether b is valid UTF-8 without control characters other than tab and
// newlines.
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
