package codec

import (
	"bytes"
	"encoding/json"
)

// JSON encodes values with encoding/json: readable in redis-cli and by other languages.
type JSON struct {
	// DisallowUnknownFields makes Unmarshal fail on object keys the target struct lacks.
	DisallowUnknownFields bool
}

// Name returns "json".
func (JSON) Name() string { return "json" }

// Marshal encodes v; it fails for values encoding/json cannot encode.
func (JSON) Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data into v; it fails with ErrDecode for bytes that are not JSON of v's type,
// or that carry anything after the value.
func (j JSON) Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if j.DisallowUnknownFields {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError("json", err)
	}
	if dec.More() {
		return decodeError("json", errTrailing)
	}
	return nil
}
