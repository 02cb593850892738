package trail

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func val(s string) Value { return Value{Text: s} }

var null = Value{Null: true}

// sampleRecords covers every op and the encoding's corners.
func sampleRecords() []struct {
	name string
	rec  Record
} {
	return []struct {
		name string
		rec  Record
	}{
		{"begin", Record{Op: OpBegin, LSN: 0x16B3748, XID: 770, Time: 1700000000123456789}},
		{"begin zero", Record{Op: OpBegin}},
		{"begin extremes", Record{Op: OpBegin, LSN: math.MaxUint64, XID: math.MaxUint32, Time: math.MinInt64}},
		{"commit", Record{Op: OpCommit, LSN: 0x16B3790, XID: 770, Time: 1700000000123456789}},
		{"commit negative time", Record{Op: OpCommit, LSN: 1, Time: -1}},
		{"insert", Record{Op: OpInsert, XID: 770, Schema: "public", Table: "orders",
			Columns: []string{"id", "customer", "amount", "note", "created"},
			Key:     []int{0},
			Values:  []Value{val("42"), val("7"), val("19.99"), null, val("2024-01-02 03:04:05+00")}}},
		{"insert empty strings and unicode", Record{Op: OpInsert, Schema: "", Table: "ünïcødé 表",
			Columns: []string{"", "名前", "emoji"},
			Key:     []int{1},
			Values:  []Value{val(""), val("日本語テキスト"), val("🚀\x00\xff")}}},
		{"insert no columns", Record{Op: OpInsert, Schema: "s", Table: "t"}},
		{"insert long value", Record{Op: OpInsert, Schema: "s", Table: "t",
			Columns: []string{"id", "body"}, Key: []int{0},
			Values: []Value{val("1"), val(strings.Repeat("x", 300))}}},
		{"update", Record{Op: OpUpdate, XID: 9, Schema: "public", Table: "orders",
			Columns: []string{"id", "status"}, Key: []int{0},
			Values: []Value{val("42"), val("shipped")}}},
		{"update key change", Record{Op: OpUpdate, XID: 9, Schema: "public", Table: "pairs",
			Columns: []string{"a", "b", "v"}, Key: []int{0, 1},
			Values: []Value{val("1"), val("2"), null},
			Old:    []Value{val("1"), null}}},
		{"delete", Record{Op: OpDelete, XID: 10, Schema: "public", Table: "pairs",
			Columns: []string{"a", "b"}, Key: []int{0, 1},
			Values: []Value{val("1"), val("")}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range sampleRecords() {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rec.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			prefix := []byte("prefix")
			b := AppendEncoded(append([]byte(nil), prefix...), &tc.rec)
			if !bytes.HasPrefix(b, prefix) {
				t.Fatalf("AppendEncoded lost the bytes it appends to")
			}
			p := b[len(prefix):]
			got, err := Decode(p)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.rec) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.rec)
			}
			var light Record
			if err := decode(p, &light, false); err != nil || light.Op != tc.rec.Op || light.LSN != tc.rec.LSN {
				t.Fatalf("decode without build: %+v, %v", light, err)
			}
			// Every strict prefix is short of something; one more byte is trailing.
			for i := range p {
				if _, err := Decode(p[:i]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decode of %d of %d bytes: err %v, want ErrCorrupt", i, len(p), err)
				}
			}
			if _, err := Decode(append(p[:len(p):len(p)], 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode with a trailing byte: err %v", err)
			}
		})
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpBegin: "begin", OpInsert: "insert", OpUpdate: "update",
		OpDelete: "delete", OpCommit: "commit", Op('X'): "Op(0x58)"} {
		if got := op.String(); got != want {
			t.Errorf("%q.String() = %q, want %q", byte(op), got, want)
		}
	}
}

// changeHead is a change payload up to and including the table name.
func changeHead(op Op) []byte {
	return []byte{byte(op), 0, 0, 0, 1, 's', 1, 't'}
}

func TestDecodeInvalid(t *testing.T) {
	uv := binary.AppendUvarint
	for _, tc := range []struct {
		name string
		p    []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"unknown op", []byte{'X', 0, 0, 0}, "unknown op"},
		{"begin trailing", []byte{'B', 0, 0, 0, 0}, "trailing"},
		{"non-minimal varint", []byte{'B', 0x80, 0x00, 0, 0}, "non-minimal"},
		{"varint overflow", append([]byte{'B'}, bytes.Repeat([]byte{0xff}, 11)...), "overflow"},
		{"xid overflow", append(uv([]byte{'B', 0}, 1<<32), 0), "xid"},
		{"huge column count", uv(changeHead(OpInsert), 1<<40), "column count"},
		{"column count beyond data", append(uv(changeHead(OpInsert), 2), 0, 0, 0, 0), "column count"},
		{"string beyond data", append(changeHead(OpInsert)[:6], 50, 't'), "truncated string"},
		{"bad null flag", append(changeHead(OpInsert), 1, 1, 'a', 2, 0, 0), "flag"},
		{"null with text", append(changeHead(OpInsert), 1, 1, 'a', 1, 1, 'x', 0), "NULL value with text"},
		{"key out of range", AppendEncoded(nil, &Record{Op: OpInsert, Columns: []string{"a"}, Values: []Value{val("1")}, Key: []int{1}}), "key index"},
		{"huge key count", uv(append(changeHead(OpDelete), 0), 1<<50), "key count"},
		{"old count mismatch", AppendEncoded(nil, &Record{Op: OpUpdate, Columns: []string{"a", "b"}, Values: []Value{val("1"), val("2")}, Key: []int{0}, Old: []Value{val("1"), val("2")}}), "old key values"},
		{"update missing old count", append(changeHead(OpUpdate), 0, 0), "truncated"},
		{"delete with old count", append(changeHead(OpDelete), 0, 0, 0), "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.p)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode(% x): err %v, want ErrCorrupt mentioning %q", tc.p, err, tc.want)
			}
			var r Record
			if err := decode(tc.p, &r, false); err == nil {
				t.Fatalf("decode without build accepted what Decode refuses")
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cols := []string{"a", "b"}
	vals := []Value{val("1"), val("2")}
	for _, tc := range []struct {
		name string
		rec  Record
	}{
		{"unknown op", Record{Op: 'X'}},
		{"values mismatch", Record{Op: OpInsert, Columns: cols, Values: vals[:1]}},
		{"key out of range", Record{Op: OpInsert, Columns: cols, Values: vals, Key: []int{2}}},
		{"negative key", Record{Op: OpDelete, Columns: cols, Values: vals, Key: []int{-1}}},
		{"old on insert", Record{Op: OpInsert, Columns: cols, Values: vals, Key: []int{0}, Old: []Value{val("0")}}},
		{"old length", Record{Op: OpUpdate, Columns: cols, Values: vals, Key: []int{0}, Old: vals}},
		{"null with text", Record{Op: OpInsert, Columns: cols, Values: []Value{val("1"), {Null: true, Text: "x"}}}},
		{"old null with text", Record{Op: OpUpdate, Columns: cols, Values: vals, Key: []int{0}, Old: []Value{{Null: true, Text: "x"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rec.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: err %v, want ErrInvalid", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, tc := range sampleRecords() {
		f.Add(AppendEncoded(nil, &tc.rec))
	}
	f.Add([]byte{})
	f.Add([]byte{'U', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := Decode(p)
		var light Record
		if lerr := decode(p, &light, false); (lerr == nil) != (err == nil) {
			t.Fatalf("Decode err %v but validation-only decode err %v", err, lerr)
		}
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded an invalid record: %v", err)
		}
		// The encoding is canonical: what decodes re-encodes to the same bytes.
		if again := AppendEncoded(nil, &r); !bytes.Equal(again, p) {
			t.Fatalf("re-encoding differs:\n got % x\nwant % x", again, p)
		}
	})
}
