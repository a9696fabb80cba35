package scenarios

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// The scenario-file schema is written once, as a table per struct: each
// key's name, how its value node decodes into the Go field, and how the
// field encodes back. The same table drives decoding (keys in table
// order), unknown-key messages (the allowed keys are the table's) and
// MarshalJSON (keys in table order).

// key is one key of a struct's mapping.
type key[T any] struct {
	name string
	// dec reads the key's value n (resolved; nil when the key is absent
	// or null) into v; m is the mapping holding the key.
	dec func(m *mapping, n ast.Node, path string, v *T)
	// enc returns the value to write for v, and whether to write it.
	enc func(v *T) (any, bool)
	// need, when set, is the error of a mapping without the key (or with
	// it empty).
	need string
}

// keys is a struct's table.
type keys[T any] []key[T]

// decode reads n as a mapping into v and reports the keys not in the
// table.
func (ks keys[T]) decode(d *decoder, n ast.Node, path string, v *T) {
	m := d.mapping(n, path)
	ks.read(m, v)
	m.done()
}

// read takes the table's keys from m into v, in order. A mapping that
// was no mapping at all (already reported) lacks no key: one error per
// cause.
func (ks keys[T]) read(m *mapping, v *T) {
	for _, k := range ks {
		n, path := m.take(k.name)
		if n == nil && k.need != "" && !m.notMapping {
			m.d.fail(m.node, m.path, "%s", k.need)
		}
		k.dec(m, n, path, v)
	}
}

// encode writes v's keys in table order.
func (ks keys[T]) encode(v *T) object {
	var o object
	for _, k := range ks {
		if x, ok := k.enc(v); ok {
			o = append(o, kv{k.name, x})
		}
	}
	return o
}

// names are the table's keys, in order.
func (ks keys[T]) names() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.name
	}
	return out
}

// needs returns k, whose mapping must hold it (msg is the error).
func (k key[T]) needs(msg string) key[T] { k.need = msg; return k }

// then returns k followed by check, which runs after k is read, present
// or not (path is k's).
func (k key[T]) then(check func(m *mapping, path string, v *T)) key[T] {
	dec := k.dec
	k.dec = func(m *mapping, n ast.Node, path string, v *T) {
		dec(m, n, path, v)
		check(m, path, v)
	}
	return k
}

// unless returns k, left out of the encoding when skip(v).
func (k key[T]) unless(skip func(v *T) bool) key[T] {
	enc := k.enc
	k.enc = func(v *T) (any, bool) {
		if skip(v) {
			return nil, false
		}
		return enc(v)
	}
	return k
}

// get takes key name from m and reads it as k into dst; a union's
// mapping (respond) reads its keys so.
func get[F comparable](m *mapping, name string, k kind[F], dst *F) {
	if n, path := m.take(name); n != nil {
		if x, ok := k.read(m.d, n, path); ok {
			*dst = x
		}
	}
}

// omit says whether a field's zero value is left out of the encoding.
type omit bool

const (
	always   omit = false
	omitZero omit = true
)

// kind is how a value of type F is read from a node and written back
// (write nil: as it is).
type kind[F comparable] struct {
	read  func(d *decoder, n ast.Node, path string) (F, bool)
	write func(F) any
}

func (k kind[F]) encode(x F) any {
	if k.write == nil {
		return x
	}
	return k.write(x)
}

// parsed is a kind read from a scalar's text by parse; want names what
// it takes ("a rate like 100/s").
func parsed[F comparable](want string, parse func(string) (F, error), write func(F) any) kind[F] {
	return kind[F]{
		read: func(d *decoder, n ast.Node, path string) (F, bool) {
			var zero F
			s, ok := scalarText(n)
			if !ok {
				d.fail(n, path, "want %s, got %s", want, describe(n))
				return zero, false
			}
			v, err := parse(s)
			if err != nil {
				d.fail(n, path, "%v", err)
				return zero, false
			}
			return v, true
		},
		write: write,
	}
}

// field is a key whose value is one Go field, at(v), of kind k.
func field[T any, F comparable](name string, at func(*T) *F, k kind[F], o omit) key[T] {
	return key[T]{
		name: name,
		dec: func(m *mapping, n ast.Node, path string, v *T) {
			if n == nil {
				return
			}
			if x, ok := k.read(m.d, n, path); ok {
				*at(v) = x
			}
		},
		enc: func(v *T) (any, bool) {
			var zero F
			x := *at(v)
			return k.encode(x), o == always || x != zero
		},
	}
}

// custom is a hand-written key: dec as in key, enc writes v, and skip
// (nil: never) says when to leave it out.
func custom[T any](name string, dec func(m *mapping, n ast.Node, path string, v *T), enc func(v *T) any, skip func(v *T) bool) key[T] {
	return key[T]{name: name, dec: dec, enc: func(v *T) (any, bool) {
		if skip != nil && skip(v) {
			return nil, false
		}
		return enc(v), true
	}}
}

// sub is a key whose value is a nested struct, at(v), of table ks; read
// in place, so it keeps the defaults already in it. With omitZero an empty
// encoding is left out.
func sub[T, S any](name string, at func(*T) *S, ks keys[S], o omit) key[T] {
	return key[T]{
		name: name,
		dec: func(m *mapping, n ast.Node, path string, v *T) {
			if n != nil {
				ks.decode(m.d, n, path, at(v))
			}
		},
		enc: func(v *T) (any, bool) {
			e := ks.encode(at(v))
			return e, o == always || len(e) > 0
		},
	}
}

// list is a key whose value is a sequence of structs of table ks, each
// finished by fill (nil: none) once read; an empty list is left out with
// omitZero.
func list[T, S any](name string, at func(*T) *[]S, ks keys[S], fill func(*S), o omit) key[T] {
	return key[T]{
		name: name,
		dec: func(m *mapping, n ast.Node, path string, v *T) {
			for i, item := range m.d.sequence(n, path) {
				var s S
				ks.decode(m.d, item, m.d.item(path, i, item), &s)
				if fill != nil {
					fill(&s)
				}
				*at(v) = append(*at(v), s)
			}
		},
		enc: func(v *T) (any, bool) { return encodeAll(*at(v), ks), o == always || len(*at(v)) > 0 },
	}
}

// encodeAll writes each of xs by table ks.
func encodeAll[S any](xs []S, ks keys[S]) []object {
	out := make([]object, 0, len(xs))
	for i := range xs {
		out = append(out, ks.encode(&xs[i]))
	}
	return out
}

// The kinds of plain values.
var (
	// strKind: a string; numbers and booleans are taken as written.
	strKind = kind[string]{
		read: func(d *decoder, n ast.Node, path string) (string, bool) {
			s, ok := scalarText(n)
			if !ok {
				d.fail(n, path, "want a string, got %s", describe(n))
			}
			return s, ok
		},
	}
	boolKind = kind[bool]{
		read: func(d *decoder, n ast.Node, path string) (bool, bool) {
			b, ok := n.(*ast.BoolNode)
			if !ok {
				d.fail(n, path, "want true or false, got %s", quoteNode(n))
				return false, false
			}
			return b.Value, true
		},
	}
	// methodKind: an upper-case HTTP method.
	methodKind = kind[string]{
		read: func(d *decoder, n ast.Node, path string) (string, bool) {
			s, _ := scalarText(n)
			if !methodRE.MatchString(s) {
				d.fail(n, path, "want an upper-case HTTP method like GET or POST, got %s", quoteNode(n))
				return "", false
			}
			return s, true
		},
	}
)

// choice: a string that must be one of allowed.
func choice(allowed ...string) kind[string] {
	return kind[string]{
		read: func(d *decoder, n ast.Node, path string) (string, bool) {
			s, ok := scalarText(n)
			if !ok || !slices.Contains(allowed, s) {
				d.fail(n, path, "want one of %s, got %s", strings.Join(allowed, ", "), quoteNode(n))
				return "", false
			}
			return s, true
		},
	}
}

// integer: an integer in [lo, hi].
func integer(lo, hi int) kind[int] {
	return kind[int]{
		read: func(d *decoder, n ast.Node, path string) (int, bool) { return d.intValue(n, path, lo, hi) },
	}
}

// duration: a Go duration in [lo, hi], written as Go writes it.
func duration(lo, hi time.Duration) kind[time.Duration] {
	return kind[time.Duration]{
		read: func(d *decoder, n ast.Node, path string) (time.Duration, bool) {
			return d.durationValue(n, path, lo, hi)
		},
		write: func(v time.Duration) any { return v.String() },
	}
}

// object is a JSON object that keeps its keys in order.
type object []kv

type kv struct {
	k string
	v any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.k)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
