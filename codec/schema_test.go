package codec_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/srqueue/srq/codec"
)

// The versions of one payload type, as a service changes it over time.
type (
	payV1 struct {
		User   string
		Amount int
	}
	payAdded struct { // a field added
		User     string
		Amount   int
		Currency string
	}
	payRemoved struct { // Amount removed
		User string
	}
	payRenamed struct { // User renamed in Go, its encoded name kept by a tag
		Customer string `json:"User" msgpack:"User"`
		Amount   int
	}
	payRenamedBare struct { // User renamed without a tag
		Customer string
		Amount   int
	}
	payWidened struct { // Amount from int to int64
		User   string
		Amount int64
	}
	payRetyped struct { // Amount from int to string
		User   string
		Amount string
	}
)

// TestSchemaChanges: what getting-started.md says a changed payload type does to the tasks already
// encoded with the old one, for MsgPack and JSON. Fields are matched by name: an added field is
// zero, a removed one is ignored (JSON with DisallowUnknownFields refuses it), a field renamed in
// Go keeps its value only under a tag with the old name, a widened number decodes, and a field of
// another kind is a decode error (ErrDecode: the task is dead-lettered).
func TestSchemaChanges(t *testing.T) {
	t.Parallel()
	v1 := payV1{User: "ann", Amount: 42}
	for _, c := range []codec.Codec{codec.MsgPack{}, codec.JSON{}} {
		old, err := c.Marshal(v1)
		if err != nil {
			t.Fatal(err)
		}
		var added payAdded
		if err := c.Unmarshal(old, &added); err != nil || added != (payAdded{User: "ann", Amount: 42}) {
			t.Errorf("%s, a field added: %+v, %v", c.Name(), added, err)
		}
		var removed payRemoved
		if err := c.Unmarshal(old, &removed); err != nil || removed != (payRemoved{User: "ann"}) {
			t.Errorf("%s, a field removed: %+v, %v", c.Name(), removed, err)
		}
		var renamed payRenamed
		if err := c.Unmarshal(old, &renamed); err != nil || renamed != (payRenamed{Customer: "ann", Amount: 42}) {
			t.Errorf("%s, a field renamed under a tag: %+v, %v", c.Name(), renamed, err)
		}
		var bare payRenamedBare
		if err := c.Unmarshal(old, &bare); err != nil || bare != (payRenamedBare{Amount: 42}) {
			t.Errorf("%s, a field renamed without a tag: %+v, %v; want its value lost", c.Name(), bare, err)
		}
		var widened payWidened
		if err := c.Unmarshal(old, &widened); err != nil || widened != (payWidened{User: "ann", Amount: 42}) {
			t.Errorf("%s, a number widened: %+v, %v", c.Name(), widened, err)
		}
		var retyped payRetyped
		if err := c.Unmarshal(old, &retyped); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("%s, a field's kind changed: %+v, %v; want ErrDecode", c.Name(), retyped, err)
		}
	}
	old, _ := codec.JSON{}.Marshal(v1)
	var removed payRemoved
	if err := (codec.JSON{DisallowUnknownFields: true}).Unmarshal(old, &removed); !errors.Is(err, codec.ErrDecode) {
		t.Errorf("JSON with DisallowUnknownFields, a field removed: %v; want ErrDecode", err)
	}
}

// A number narrowed: MsgPack converts a value out of the new range as Go does, without an error;
// JSON refuses it (getting-started.md's table, MsgPack.Unmarshal).
func TestSchemaNarrowedNumber(t *testing.T) {
	t.Parallel()
	type big struct{ N int64 }
	type small struct{ N int8 }
	type unsigned struct{ N uint }
	for _, tc := range []struct {
		from int64
		into any
		want any
	}{
		{300, &small{}, &small{N: 44}},
		{-1, &unsigned{}, &unsigned{N: ^uint(0)}},
	} {
		b, err := codec.MsgPack{}.Marshal(big{N: tc.from})
		if err != nil {
			t.Fatal(err)
		}
		if err := (codec.MsgPack{}).Unmarshal(b, tc.into); err != nil || !reflect.DeepEqual(tc.into, tc.want) {
			t.Errorf("msgpack, %d narrowed: %+v, %v; want %+v wrapped, no error", tc.from, tc.into, err, tc.want)
		}
		j, _ := codec.JSON{}.Marshal(big{N: tc.from})
		if err := (codec.JSON{}).Unmarshal(j, tc.into); !errors.Is(err, codec.ErrDecode) {
			t.Errorf("json, %d narrowed: %v; want ErrDecode", tc.from, err)
		}
	}
}
