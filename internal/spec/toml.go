package spec

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// doc is a TOML document decoded into generic values (by go-toml, which owns
// the TOML semantics) together with where every key was written (from a walk
// over go-toml's AST), so later errors can name a line.
type doc struct {
	root map[string]any
	pos  map[string]*keyPos // by pathKey
}

// keyPos is where a key, a table header or an array element was written.
type keyPos struct {
	line    int
	off     int    // byte offset, orders keys as declared
	raw     string // the value as written, for `key = value` only
	defined bool   // set by `key = value` or an explicit [header]
}

// A path names a value in the document: table keys, and array indices
// written as idx(i).
type path []string

const idxMark = "\x00"

func idx(i int) string { return idxMark + strconv.Itoa(i) }

func (p path) child(k ...string) path {
	out := make(path, 0, len(p)+len(k))
	return append(append(out, p...), k...)
}

func (p path) key() string { return strings.Join(p, "\x1f") }

// String renders the path as a field name: link[1].reverse.rate,
// site.eu.tcp_rmem. Array indices are shown 1-based, as a user counts
// [[link]] tables.
func (p path) String() string {
	var b strings.Builder
	for i, k := range p {
		if n, ok := strings.CutPrefix(k, idxMark); ok {
			v, err := strconv.Atoi(n)
			if err == nil {
				fmt.Fprintf(&b, "[%d]", v+1)
				continue
			}
		}
		if i > 0 {
			b.WriteString(".")
		}
		b.WriteString(showKey(k))
	}
	return b.String()
}

// showKey quotes a key unless it is a bare TOML key.
func showKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return strconv.Quote(k)
		}
	}
	return k
}

// line returns the line p was written on, or that of its nearest written
// parent, or 1.
func (d *doc) line(p path) int {
	for n := len(p); n > 0; n-- {
		if kp := d.pos[p[:n].key()]; kp != nil {
			return kp.line
		}
	}
	return 1
}

// raw returns the value at p as written in the file, shortened to one line.
func (d *doc) raw(p path, v any) string {
	s := ""
	if kp := d.pos[p.key()]; kp != nil {
		s = kp.raw
	}
	if s == "" || strings.ContainsAny(s, "\r\n") {
		s = showValue(v)
	}
	return shorten(s)
}

// order returns the byte offset p was first written at (for declaration order).
func (d *doc) order(p path) int {
	if kp := d.pos[p.key()]; kp != nil {
		return kp.off
	}
	return 1 << 62
}

func showValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "{…}"
	case []any:
		return "[…]"
	case nil:
		return ""
	}
	return clean(fmt.Sprint(v))
}

func shorten(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && (s[cut]&0xC0) == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// clean makes s safe to print on one line: control characters are escaped.
func clean(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r == 0x2028 || r == 0x2029 }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// decodeTOML parses data. TOML errors come back as one *Error naming the
// line; a table or key written twice is reported at both places.
func decodeTOML(file string, data []byte) (*doc, ErrorList) {
	var root map[string]any
	if err := toml.Unmarshal(data, &root); err != nil {
		w := walk(data)
		if len(w.dups) > 0 {
			for _, e := range w.dups {
				e.File = file
			}
			return nil, w.dups
		}
		line := 1
		msg := err.Error()
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, _ = de.Position()
			msg = de.Error()
		}
		msg = strings.TrimPrefix(msg, "toml: ")
		if strings.HasPrefix(msg, "unexpected character U+000A at start of value") || strings.HasPrefix(msg, "expected value, not end of input") {
			msg = "missing value after '='"
		}
		return nil, ErrorList{{File: file, Line: max(line, 1), Msg: "invalid TOML: " + clean(msg)}}
	}
	if root == nil {
		root = map[string]any{}
	}
	w := walk(data)
	return &doc{root: root, pos: w.pos}, nil
}

// walker records the position of every key in a TOML document.
type walker struct {
	data   []byte
	lines  []int // byte offset of the start of each line
	pos    map[string]*keyPos
	arrays map[string]int // [[array]] path -> number of tables so far
	dups   ErrorList      // tables or keys written twice (File unset)
	inDup  bool           // inside a table defined twice: its keys are not reported again
}

func walk(data []byte) *walker {
	w := &walker{data: data, pos: map[string]*keyPos{}, arrays: map[string]int{}, lines: []int{0}}
	for i, c := range data {
		if c == '\n' {
			w.lines = append(w.lines, i+1)
		}
	}
	var p unstable.Parser
	p.Reset(data)
	var cur path
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			w.inDup = false
			cur = w.header(e)
		case unstable.KeyValue:
			w.keyValue(cur, e)
		}
	}
	// A syntax error stops the walk; go-toml reports it.
	return w
}

func (w *walker) lineOf(off int) int {
	return sort.Search(len(w.lines), func(i int) bool { return w.lines[i] > off })
}

// keyParts returns the parts of a (dotted) key and the node of its first part.
func keyParts(it unstable.Iterator) (parts []string, first, last *unstable.Node) {
	for it.Next() {
		n := it.Node()
		if first == nil {
			first = n
		}
		last = n
		parts = append(parts, string(n.Data))
	}
	return parts, first, last
}

// note records a position for p unless one is known; it returns the record.
func (w *walker) note(p path, off int) *keyPos {
	k := p.key()
	if kp := w.pos[k]; kp != nil {
		return kp
	}
	kp := &keyPos{line: w.lineOf(off), off: off}
	w.pos[k] = kp
	return kp
}

func (w *walker) header(e *unstable.Node) path {
	parts, first, _ := keyParts(e.Key())
	if first == nil {
		return nil
	}
	off := int(first.Raw.Offset)
	var p path
	for i, k := range parts {
		p = p.child(k)
		w.note(p, off)
		last := i == len(parts)-1
		if last && e.Kind == unstable.ArrayTable {
			n := w.arrays[p.key()]
			w.arrays[p.key()] = n + 1
			p = p.child(idx(n))
			w.note(p, off).defined = true
			continue
		}
		if last {
			kp := w.note(p, off)
			if kp.defined {
				w.dup(p, kp, off, true)
				w.inDup = true
			}
			kp.defined = true
			continue
		}
		if n, ok := w.arrays[p.key()]; ok && n > 0 {
			p = p.child(idx(n - 1))
		}
	}
	return p
}

func (w *walker) dup(p path, first *keyPos, off int, table bool) {
	line := w.lineOf(off)
	var msg string
	switch {
	case table && len(p) == 2 && p[0] == "site":
		msg = fmt.Sprintf("site %s is defined twice (first at line %d); merge the two [site.%s] tables", showKey(p[1]), first.line, showKey(p[1]))
	case table:
		msg = fmt.Sprintf("table [%s] is defined twice (first at line %d)", p, first.line)
	default:
		msg = fmt.Sprintf("key is set twice (first at line %d)", first.line)
	}
	e := &Error{Line: line, Msg: msg}
	if !table {
		e.Field = p.String()
	}
	w.dups = append(w.dups, e)
}

func (w *walker) keyValue(base path, e *unstable.Node) {
	parts, first, last := keyParts(e.Key())
	if first == nil {
		return
	}
	off := int(first.Raw.Offset)
	p := base
	for _, k := range parts {
		p = p.child(k)
		w.note(p, off)
	}
	kp := w.pos[p.key()]
	if kp.defined {
		if !w.inDup {
			w.dup(p, kp, off, false)
		}
		return
	}
	kp.defined = true
	kp.line, kp.off = w.lineOf(off), off
	end := int(e.Raw.Offset + e.Raw.Length)
	start := int(last.Raw.Offset + last.Raw.Length)
	if start <= end && end <= len(w.data) {
		v := strings.TrimSpace(string(w.data[start:end]))
		kp.raw = strings.TrimSpace(strings.TrimPrefix(v, "="))
	}
	w.value(p, e.Value(), off)
}

// value records the keys of inline tables and the elements of arrays.
func (w *walker) value(p path, v *unstable.Node, off int) {
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if n := it.Node(); n.Kind == unstable.KeyValue {
				w.keyValue(p, n)
			}
		}
	case unstable.Array:
		it := v.Children()
		i := 0
		for it.Next() {
			n := it.Node()
			if n.Kind == unstable.Comment {
				continue
			}
			eoff := off
			if n.Raw.Length > 0 {
				eoff = int(n.Raw.Offset)
			}
			ep := p.child(idx(i))
			kp := w.note(ep, eoff)
			if n.Kind == unstable.String || n.Raw.Length > 0 && n.Kind != unstable.InlineTable {
				kp.raw = string(w.data[n.Raw.Offset : n.Raw.Offset+n.Raw.Length])
			}
			w.value(ep, n, eoff)
			i++
		}
	}
}
