package history

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The JSON form is written by hand (AppendJSON) rather than by
// encoding/json: the driver records every operation, and appending into a
// reused buffer costs a fraction of a microsecond and no allocation.

// AppendJSON appends op's JSON line (without the newline) to b.
func (op *Op) AppendJSON(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(op.Index), 10)
	b = append(b, `,"process":`...)
	b = strconv.AppendInt(b, int64(op.Process), 10)
	b = append(b, `,"node":`...)
	b = appendString(b, op.Node)
	b = append(b, `,"type":`...)
	b = appendString(b, string(op.Type))
	b = append(b, `,"f":`...)
	b = appendString(b, op.F)
	b = append(b, `,"invoke_ns":`...)
	b = strconv.AppendInt(b, op.InvokeNs, 10)
	b = append(b, `,"complete_ns":`...)
	b = strconv.AppendInt(b, op.CompleteNs, 10)
	if op.CommitNs != 0 {
		b = append(b, `,"commit_ns":`...)
		b = strconv.AppendInt(b, op.CommitNs, 10)
	}
	b = append(b, `,"txn_type":`...)
	b = appendString(b, op.TxnType)
	b = append(b, `,"value":[`...)
	for i := range op.Value {
		if i > 0 {
			b = append(b, ',')
		}
		b = op.Value[i].AppendJSON(b)
	}
	b = append(b, ']')
	if op.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, op.Error)
	}
	return append(b, '}')
}

// MarshalJSON is AppendJSON, for encoding/json users.
func (op Op) MarshalJSON() ([]byte, error) { return op.AppendJSON(nil), nil }

// AppendJSON appends m's three-element array to b.
func (m Mop) AppendJSON(b []byte) []byte {
	b = append(b, '[', '"')
	b = append(b, m.Fn.String()...)
	b = append(b, '"', ',')
	b = strconv.AppendInt(b, m.Key, 10)
	b = append(b, ',')
	switch {
	case m.Fn != FnRead:
		b = strconv.AppendInt(b, m.Value, 10)
	case m.Got == GotValue:
		b = strconv.AppendInt(b, m.Value, 10)
	case m.Got == GotList:
		b = append(b, '[')
		for i, v := range m.List {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	return append(b, ']')
}

// MarshalJSON is AppendJSON.
func (m Mop) MarshalJSON() ([]byte, error) { return m.AppendJSON(nil), nil }

// appendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped; invalid UTF-8 becomes U+FFFD, as encoding/json
// does.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// UnmarshalJSON reads ["append", k, v], ["w", k, v], ["r", k, null],
// ["r", k, v] or ["r", k, [v…]].
func (m *Mop) UnmarshalJSON(data []byte) error {
	p := parser{b: data}
	*m = Mop{}
	if !p.consume('[') {
		return p.fail("a micro-operation is an array like [\"append\", 5, 12]")
	}
	name, err := p.str()
	if err != nil {
		return err
	}
	switch name {
	case "append":
		m.Fn = FnAppend
	case "r":
		m.Fn = FnRead
	case "w":
		m.Fn = FnWrite
	default:
		return fmt.Errorf("micro-operation %q: want \"append\", \"r\" or \"w\"", name)
	}
	if !p.consume(',') {
		return p.fail("expected , after the function")
	}
	if m.Key, err = p.int(); err != nil {
		return fmt.Errorf("%s key: %w", name, err)
	}
	if !p.consume(',') {
		return p.fail("expected , after the key")
	}
	p.space()
	switch {
	case p.literal("null"):
		if m.Fn != FnRead {
			return fmt.Errorf("%s %d: the value is null (only a read's may be)", name, m.Key)
		}
	case p.peek() == '[':
		if m.Fn != FnRead {
			return fmt.Errorf("%s %d: the value is a list (only a read's may be)", name, m.Key)
		}
		p.i++
		m.Got = GotList
		m.List = []int64{}
		if !p.consume(']') {
			for {
				v, err := p.int()
				if err != nil {
					return fmt.Errorf("r %d: list element %d: %w", m.Key, len(m.List), err)
				}
				m.List = append(m.List, v)
				if p.consume(']') {
					break
				}
				if !p.consume(',') {
					return p.fail("expected , or ] in the list read")
				}
			}
		}
	default:
		if m.Value, err = p.int(); err != nil {
			return fmt.Errorf("%s %d value: %w", name, m.Key, err)
		}
		if m.Fn == FnRead {
			m.Got = GotValue
		}
	}
	if !p.consume(']') {
		return p.fail("a micro-operation has three elements")
	}
	p.space()
	if p.i != len(p.b) {
		return p.fail("trailing data")
	}
	return nil
}

// parser reads the little JSON a micro-operation holds.
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) consume(c byte) bool {
	p.space()
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) literal(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

var errNotInt = errors.New("not a 64-bit integer")

func (p *parser) int() (int64, error) {
	p.space()
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if c := p.peek(); c == '.' || c == 'e' || c == 'E' {
		for p.i < len(p.b) && bytes.IndexByte([]byte("+-.eE0123456789"), p.b[p.i]) >= 0 {
			p.i++
		}
		return 0, fmt.Errorf("%q: %w", p.b[start:p.i], errNotInt)
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		if start == p.i {
			return 0, p.fail("expected an integer")
		}
		return 0, fmt.Errorf("%q: %w", p.b[start:p.i], errNotInt)
	}
	return v, nil
}

// str reads a string without escapes (function names need none).
func (p *parser) str() (string, error) {
	if !p.consume('"') {
		return "", p.fail("expected the function name as a string")
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != '"' && p.b[p.i] != '\\' {
		p.i++
	}
	if p.peek() != '"' {
		return "", p.fail("unterminated function name")
	}
	s := string(p.b[start:p.i])
	p.i++
	return s, nil
}

func (p *parser) fail(msg string) error {
	near := p.b[p.i:]
	if len(near) > 20 {
		near = near[:20]
	}
	if len(near) == 0 {
		return fmt.Errorf("%s (at the end)", msg)
	}
	return fmt.Errorf("%s (at %q)", msg, near)
}
