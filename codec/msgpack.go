package codec

import "github.com/vmihailenco/msgpack/v5"

// MsgPack encodes values with MessagePack (github.com/vmihailenco/msgpack/v5): compact and fast.
// It is the default codec.
type MsgPack struct{}

// Name returns "msgpack".
func (MsgPack) Name() string { return "msgpack" }

// Marshal encodes v; it fails for values msgpack cannot encode, such as channels or functions.
func (MsgPack) Marshal(v any) ([]byte, error) { return msgpack.Marshal(v) }

// Unmarshal decodes data into v; it fails with ErrDecode for bytes that are not a msgpack value of
// v's type, or that declare a string, map or array longer than the bytes they hold (which the
// decoder would allocate before finding out). An integer is converted to v's integer type as Go
// converts it, without a range check: 300 decodes into an int8 as 44.
func (MsgPack) Unmarshal(data []byte, v any) error {
	if err := unmarshalGuarded(data, v); err != nil {
		return decodeError("msgpack", err)
	}
	return nil
}
