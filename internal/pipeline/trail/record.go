package trail

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Op is a record's kind.
type Op byte

const (
	OpBegin  Op = 'B' // a source transaction starts: XID, LSN = the transaction's final (commit) LSN, Time = commit time
	OpInsert Op = 'I'
	OpUpdate Op = 'U'
	OpDelete Op = 'D'
	OpCommit Op = 'C' // the transaction ends: LSN = the commit's end LSN (the position a source may be confirmed up to), Time = commit time
)

// String names the op: "begin", "insert", "update", "delete", "commit".
func (o Op) String() string {
	switch o {
	case OpBegin:
		return "begin"
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpCommit:
		return "commit"
	}
	return fmt.Sprintf("Op(0x%02x)", byte(o))
}

func (o Op) valid() bool {
	return o == OpBegin || o == OpCommit || o.isChange()
}

// isChange reports whether records of this op carry a row.
func (o Op) isChange() bool {
	return o == OpInsert || o == OpUpdate || o == OpDelete
}

// Value is one column's value in PostgreSQL's text format; Null marks SQL NULL (Text is then "").
type Value struct {
	Null bool
	Text string
}

// Record is one entry of a trail: a transaction boundary or a row change.
type Record struct {
	Op      Op
	LSN     uint64 // see Op
	XID     uint32
	Time    int64    // source commit time, Unix nanoseconds (begin and commit records)
	Schema  string   // changes only
	Table   string   // changes only
	Columns []string // changes: the column names, in table order (delete: the key columns only)
	Key     []int    // changes: indexes into Columns of the replica-identity (primary key) columns
	Values  []Value  // changes: the new row (insert, update) or the key (delete); len == len(Columns)
	Old     []Value  // update only, optional: the old key values when the key changed (len == len(Key)), else nil
}

var (
	// ErrInvalid marks a record that breaks Record's rules (Validate).
	ErrInvalid = errors.New("invalid trail record")
	// ErrCorrupt marks bytes that are not a valid frame or payload.
	ErrCorrupt = errors.New("corrupt trail data")
)

// Validate checks the rules the encoding relies on, so that what Append
// writes always decodes back to the same record. Schema, Table, Columns, Key,
// Values and Old of begin and commit records are not encoded, hence not
// checked.
func (r *Record) Validate() error {
	if !r.Op.valid() {
		return fmt.Errorf("%w: unknown op %v", ErrInvalid, r.Op)
	}
	if !r.Op.isChange() {
		return nil
	}
	if len(r.Values) != len(r.Columns) {
		return fmt.Errorf("%w: %d values for %d columns", ErrInvalid, len(r.Values), len(r.Columns))
	}
	for _, k := range r.Key {
		if k < 0 || k >= len(r.Columns) {
			return fmt.Errorf("%w: key index %d out of range [0,%d)", ErrInvalid, k, len(r.Columns))
		}
	}
	if r.Old != nil && r.Op != OpUpdate {
		return fmt.Errorf("%w: old key values on a %v", ErrInvalid, r.Op)
	}
	if len(r.Old) != 0 && len(r.Old) != len(r.Key) {
		return fmt.Errorf("%w: %d old key values for %d key columns", ErrInvalid, len(r.Old), len(r.Key))
	}
	// A NULL with text would not survive the round trip (NULL encodes no text).
	for _, v := range r.Values {
		if v.Null && v.Text != "" {
			return fmt.Errorf("%w: NULL value with text", ErrInvalid)
		}
	}
	for _, v := range r.Old {
		if v.Null && v.Text != "" {
			return fmt.Errorf("%w: NULL old value with text", ErrInvalid)
		}
	}
	return nil
}

// AppendEncoded appends r's encoding (the payload, without framing) to b.
// r should be valid (see Validate): an invalid record may encode to bytes
// that Decode rejects or reads differently. It does not allocate beyond
// growing b.
func AppendEncoded(b []byte, r *Record) []byte {
	b = append(b, byte(r.Op))
	b = binary.AppendUvarint(b, r.LSN)
	b = binary.AppendUvarint(b, uint64(r.XID))
	b = binary.AppendVarint(b, r.Time)
	if !r.Op.isChange() {
		return b
	}
	b = appendString(b, r.Schema)
	b = appendString(b, r.Table)
	b = binary.AppendUvarint(b, uint64(len(r.Columns)))
	for i, c := range r.Columns {
		b = appendString(b, c)
		var v Value
		if i < len(r.Values) { // keeps an invalid record from panicking here
			v = r.Values[i]
		}
		b = appendValue(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Key)))
	for _, k := range r.Key {
		b = binary.AppendUvarint(b, uint64(k))
	}
	if r.Op == OpUpdate {
		b = binary.AppendUvarint(b, uint64(len(r.Old)))
		for _, v := range r.Old {
			b = appendValue(b, v)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendValue(b []byte, v Value) []byte {
	if v.Null {
		return append(b, 1, 0) // flag NULL, empty text
	}
	b = append(b, 0)
	return appendString(b, v.Text)
}

// Decode parses one payload produced by AppendEncoded. It rejects truncated,
// malformed or non-canonical input with an error wrapping ErrCorrupt, never
// panics, and never allocates more than the payload's size justifies.
func Decode(p []byte) (Record, error) {
	var r Record
	if err := decode(p, &r, true); err != nil {
		return Record{}, err
	}
	return r, nil
}

// decoder walks a payload. When building, strings are cut from s, one copy
// of the payload, so a record costs one string allocation however many
// columns it has.
type decoder struct {
	p   []byte
	s   string
	off int
}

func (d *decoder) fail(what string) error {
	return fmt.Errorf("record: %s at payload byte %d: %w", what, d.off, ErrCorrupt)
}

func (d *decoder) byte() (byte, error) {
	if d.off >= len(d.p) {
		return 0, d.fail("truncated")
	}
	c := d.p[d.off]
	d.off++
	return c, nil
}

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.p[d.off:])
	switch {
	case n == 0:
		return 0, d.fail("truncated varint")
	case n < 0:
		return 0, d.fail("varint overflows 64 bits")
	case n > 1 && d.p[d.off+n-1] == 0:
		// A redundant high group: another encoding of a shorter varint.
		return 0, d.fail("non-minimal varint")
	}
	d.off += n
	return v, nil
}

// varint undoes binary.AppendVarint's zig-zag on top of uvarint, so the
// minimality check applies to it too.
func (d *decoder) varint() (int64, error) {
	u, err := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x, err
}

// count reads a count of items each taking at least size bytes, refusing
// counts the rest of the payload cannot hold: garbage must not make us
// allocate gigabytes.
func (d *decoder) count(size int, what string) (int, error) {
	at := d.off
	v, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if v > uint64((len(d.p)-d.off)/size) {
		d.off = at
		return 0, d.fail(fmt.Sprintf("%s count %d exceeds the %d bytes left", what, v, len(d.p)-at))
	}
	return int(v), nil
}

func (d *decoder) str(build bool) (string, error) {
	n, err := d.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(len(d.p)-d.off) {
		return "", d.fail("truncated string")
	}
	var s string
	if build {
		s = d.s[d.off : d.off+int(n)]
	}
	d.off += int(n)
	return s, nil
}

func (d *decoder) value(build bool) (Value, error) {
	flag, err := d.byte()
	if err != nil {
		return Value{}, err
	}
	if flag > 1 {
		d.off--
		return Value{}, d.fail(fmt.Sprintf("bad NULL flag %d", flag))
	}
	at := d.off
	s, err := d.str(build)
	if err != nil {
		return Value{}, err
	}
	if flag == 1 {
		if d.off != at+1 {
			d.off = at
			return Value{}, d.fail("NULL value with text")
		}
		return Value{Null: true}, nil
	}
	return Value{Text: s}, nil
}

// decode parses p into r. Without build it only validates p and fills Op,
// LSN, XID and Time, allocating nothing: recovery and frame copying need no
// more.
func decode(p []byte, r *Record, build bool) error {
	d := decoder{p: p}
	c, err := d.byte()
	if err != nil {
		return err
	}
	op := Op(c)
	if !op.valid() {
		d.off--
		return d.fail(fmt.Sprintf("unknown op %v", op))
	}
	r.Op = op
	if r.LSN, err = d.uvarint(); err != nil {
		return err
	}
	at := d.off
	xid, err := d.uvarint()
	if err != nil {
		return err
	}
	if xid > math.MaxUint32 {
		d.off = at
		return d.fail(fmt.Sprintf("xid %d overflows 32 bits", xid))
	}
	r.XID = uint32(xid)
	if r.Time, err = d.varint(); err != nil {
		return err
	}
	if op.isChange() {
		if err := d.change(r, build); err != nil {
			return err
		}
	}
	if d.off != len(p) {
		return d.fail(fmt.Sprintf("%d trailing bytes", len(p)-d.off))
	}
	return nil
}

func (d *decoder) change(r *Record, build bool) error {
	if build {
		d.s = string(d.p)
	}
	var err error
	if r.Schema, err = d.str(build); err != nil {
		return err
	}
	if r.Table, err = d.str(build); err != nil {
		return err
	}
	// A column takes at least 3 bytes: name length, flag, value length.
	ncol, err := d.count(3, "column")
	if err != nil {
		return err
	}
	if build && ncol > 0 {
		r.Columns = make([]string, ncol)
		r.Values = make([]Value, ncol)
	}
	for i := range ncol {
		name, err := d.str(build)
		if err != nil {
			return err
		}
		v, err := d.value(build)
		if err != nil {
			return err
		}
		if build {
			r.Columns[i] = name
			r.Values[i] = v
		}
	}
	nkey, err := d.count(1, "key")
	if err != nil {
		return err
	}
	if build && nkey > 0 {
		r.Key = make([]int, nkey)
	}
	for i := range nkey {
		at := d.off
		k, err := d.uvarint()
		if err != nil {
			return err
		}
		if k >= uint64(ncol) {
			d.off = at
			return d.fail(fmt.Sprintf("key index %d out of range [0,%d)", k, ncol))
		}
		if build {
			r.Key[i] = int(k)
		}
	}
	if r.Op != OpUpdate {
		return nil
	}
	at := d.off
	// An old value takes at least 2 bytes: flag, text length.
	nold, err := d.count(2, "old value")
	if err != nil {
		return err
	}
	if nold != 0 && nold != nkey {
		d.off = at
		return d.fail(fmt.Sprintf("%d old key values for %d key columns", nold, nkey))
	}
	if build && nold > 0 {
		r.Old = make([]Value, nold)
	}
	for i := range nold {
		v, err := d.value(build)
		if err != nil {
			return err
		}
		if build {
			r.Old[i] = v
		}
	}
	return nil
}
