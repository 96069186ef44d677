package topology

import (
	"errors"
	"testing"
)

func TestKeyNullTellsNilKeysOfNilableTypes(t *testing.T) {
	one := 1
	cases := []struct {
		name string
		null func() bool
		want bool
	}{
		{"nil pointer", nullOf[*int](nil), true},
		{"pointer", nullOf(&one), false},
		{"nil byte slice", nullOf[[]byte](nil), true},
		{"empty byte slice is a key", nullOf([]byte{}), false},
		{"nil map", nullOf[map[string]int](nil), true},
		{"nil interface", nullOf[any](nil), true},
		{"interface holding a zero", nullOf[any](0), false},
		{"interface holding a nil pointer", nullOf[any]((*int)(nil)), false},
		{"nil error", nullOf[error](nil), true},
		{"error", nullOf(errors.New("x")), false},
		{"empty string is never null", nullOf(""), false},
		{"zero struct is never null", nullOf(struct{ A int }{}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.null(); got != c.want {
				t.Errorf("null = %v, want %v", got, c.want)
			}
		})
	}
	if keyNull[string]() != nil || keyNull[int64]() != nil {
		t.Error("keys of types that cannot be nil get a null test")
	}
}

func nullOf[K any](k K) func() bool {
	return func() bool { return isNull(keyNull[K](), k) }
}

func TestKeyNullDoesNotAllocate(t *testing.T) {
	f := keyNull[[]byte]()
	k := []byte("k")
	if n := testing.AllocsPerRun(100, func() { _ = isNull(f, k) }); n != 0 {
		t.Errorf("%v allocations per check, want 0", n)
	}
}
