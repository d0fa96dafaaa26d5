package codec

import (
	"errors"
	"fmt"
)

var errTrailing = errors.New("data after the value")

// Raw passes []byte values through unchanged, for payloads that are already bytes.
type Raw struct{}

// Name returns "raw".
func (Raw) Name() string { return "raw" }

// Marshal returns v itself when v is a []byte (or *[]byte); any other type is an error.
func (Raw) Marshal(v any) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case *[]byte:
		if b == nil {
			return nil, nil
		}
		return *b, nil
	}
	return nil, fmt.Errorf("srq/codec: raw codec encodes only []byte, not %T", v)
}

// Unmarshal copies data into v, which must be a non-nil *[]byte. It fails with an error wrapping
// ErrDecode for any other v.
func (Raw) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return decodeError("raw", fmt.Errorf("raw codec decodes only into *[]byte, not %T", v))
	}
	if b == nil {
		return decodeError("raw", errors.New("raw codec cannot decode into a nil *[]byte"))
	}
	*b = append((*b)[:0], data...)
	return nil
}
