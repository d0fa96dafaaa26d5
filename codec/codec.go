// Package codec turns task values into payload bytes and back. MsgPack is the default; JSON and
// Raw (for []byte values) are there too, and any type with these two methods will do.
package codec

import (
	"errors"
	"fmt"
)

// Codec encodes values to bytes and decodes them back. Implementations must be safe for concurrent
// use.
type Codec interface {
	// Name identifies the codec in errors and logs.
	Name() string
	// Marshal encodes v.
	Marshal(v any) ([]byte, error)
	// Unmarshal decodes data into the value v points to.
	Unmarshal(data []byte, v any) error
}

// ErrDecode is wrapped by every error the codecs return for a payload they cannot decode. A worker
// dead-letters such a task at once: retrying cannot fix its bytes.
var ErrDecode = errors.New("srq/codec: cannot decode payload")

func decodeError(name string, err error) error {
	return fmt.Errorf("%w with %s: %w", ErrDecode, name, err)
}
