package partition

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPartitionValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  Key
		ok   bool
	}{
		{"base", Base, true},
		{"plain", "user-42", true},
		{"ordered", "!user-42", true},
		{"ordered of bang", "!!", true},
		{"bare bang", "!", false},
		{"bang inside", "a!", true},
		{"colon", "a:b", true},
		{"colon only", ":", true},
		{"ordered with colon", "!k:1", true},
		{"braces", "{x}", true},
		{"open brace", "{", true},
		{"close brace", "}", true},
		{"star", "*", true},
		{"glob chars", "a*b?[c]\\", true},
		{"spaces", " a b ", true},
		{"space only", " ", true},
		{"newline and tab", "a\nb\tc", true},
		{"nul byte", "a\x00b", true},
		{"unicode", "ü", true},
		{"ordered unicode", "!日本語", true},
		{"emoji", "🙂", true},
		{"max length", Key(strings.Repeat("a", MaxLen)), true},
		{"max length ordered", Key("!" + strings.Repeat("a", MaxLen-1)), true},
		{"max length multibyte", Key(strings.Repeat("ü", MaxLen/2)), true},
		{"too long", Key(strings.Repeat("a", MaxLen+1)), false},
		{"too long ordered", Key("!" + strings.Repeat("a", MaxLen)), false},
		{"invalid utf8", "\xff", false},
		{"invalid utf8 after bang", "!\xff", false},
		{"truncated rune", Key("ü"[:1]), false},
		{"surrogate", "\xed\xa0\x80", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.key.Validate()
			if tt.ok {
				if err != nil {
					t.Fatalf("Validate(%q) = %v, want nil", string(tt.key), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%q) = nil, want an error", string(tt.key))
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate(%q) = %v, does not wrap ErrInvalid", string(tt.key), err)
			}
		})
	}
}

func TestPartitionIsOrderedName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key     Key
		ordered bool
		name    string
	}{
		{Base, false, ""},
		{"user-42", false, "user-42"},
		{"!user-42", true, "user-42"},
		{"!", true, ""},
		{"!!", true, "!"},
		{"a!", false, "a!"},
		{" !a", false, " !a"},
		{"!k:1", true, "k:1"},
		{"!ü", true, "ü"},
		{"ü", false, "ü"},
		{"¡", false, "¡"}, // U+00A1 is not '!'
	}
	for _, tt := range tests {
		t.Run(string(tt.key), func(t *testing.T) {
			t.Parallel()
			if got := tt.key.IsOrdered(); got != tt.ordered {
				t.Errorf("Key(%q).IsOrdered() = %v, want %v", string(tt.key), got, tt.ordered)
			}
			if got := tt.key.Name(); got != tt.name {
				t.Errorf("Key(%q).Name() = %q, want %q", string(tt.key), got, tt.name)
			}
			if got := tt.key.String(); got != string(tt.key) {
				t.Errorf("Key(%q).String() = %q", string(tt.key), got)
			}
		})
	}
}

func TestPartitionOrdered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		want  Key
		valid bool
	}{
		{"user-42", "!user-42", true},
		{"", "!", false},
		{"!", "!!", true},
		{"a:b", "!a:b", true},
		{"{x}", "!{x}", true},
		{"ü", "!ü", true},
		{strings.Repeat("a", MaxLen-1), Key("!" + strings.Repeat("a", MaxLen-1)), true},
		{strings.Repeat("a", MaxLen), Key("!" + strings.Repeat("a", MaxLen)), false},
		{"\xff", "!\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := Ordered(tt.name)
			if k != tt.want {
				t.Fatalf("Ordered(%q) = %q, want %q", tt.name, string(k), string(tt.want))
			}
			if !k.IsOrdered() {
				t.Errorf("Ordered(%q).IsOrdered() = false", tt.name)
			}
			if k.Name() != tt.name {
				t.Errorf("Ordered(%q).Name() = %q", tt.name, k.Name())
			}
			if err := k.Validate(); (err == nil) != tt.valid {
				t.Errorf("Ordered(%q).Validate() = %v, want valid %v", tt.name, err, tt.valid)
			}
		})
	}
}

// FuzzValidate checks that Validate never panics, agrees with its documented rules, and that a
// valid key stays valid, and the same key, after a round trip through string.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		"", "!", "!!", "a", "!a", "a:b", "!k:1", "{x}", "{", "}", "*", " ", "ü", "!ü", "\xff", "!\xff",
		"a\x00b", "\xed\xa0\x80", strings.Repeat("a", MaxLen), strings.Repeat("a", MaxLen+1),
		"!" + strings.Repeat("ü", MaxLen/2),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := Key(s)
		err := k.Validate()
		want := len(s) <= MaxLen && utf8.ValidString(s) && s != OrderedPrefix
		if (err == nil) != want {
			t.Fatalf("Validate(%q) = %v, want valid %v", s, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate(%q) = %v, does not wrap ErrInvalid", s, err)
			}
			return
		}
		back := Key(k.String())
		if back != k {
			t.Fatalf("Key(%q.String()) = %q", s, string(back))
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("round-tripped key %q is invalid: %v", s, err)
		}
		if back.IsOrdered() != k.IsOrdered() || back.Name() != k.Name() {
			t.Fatalf("round trip of %q changed IsOrdered or Name", s)
		}
		if k.IsOrdered() {
			if Ordered(k.Name()) != k {
				t.Fatalf("Ordered(%q.Name()) = %q", s, string(Ordered(k.Name())))
			}
		} else if k.Name() != s {
			t.Fatalf("unordered %q has Name %q", s, k.Name())
		}
	})
}
