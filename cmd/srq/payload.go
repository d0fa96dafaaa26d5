package main

import (
	"fmt"

	"github.com/srqueue/srq/internal/payload"
)

// payloadWidth is the most runes of a payload srq task shows; --json has it whole.
const payloadWidth = 500

// payloadText is how srq task shows a payload: a JSON payload as compact JSON, a msgpack one (the
// default codec's) decoded and shown as JSON, anything else as an escaped Go string (see
// payload.Decode for how the format is recognised).
func payloadText(p []byte) string {
	head := fmt.Sprintf("%d byte%s", len(p), plural(len(p)))
	switch format, js := payload.Decode(p); format {
	case payload.FormatEmpty:
		return head
	case payload.FormatJSON:
		return head + ", JSON: " + oneLine(escapeText(string(js)), payloadWidth)
	case payload.FormatMsgpack:
		return head + ", msgpack: " + oneLine(escapeText(string(js)), payloadWidth)
	}
	return head + ": " + oneLine(fmt.Sprintf("%q", p), payloadWidth)
}
