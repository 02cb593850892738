package fake

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The fake's SQL: just enough for replab's own statements (the lag table,
// markers) and simple workloads (kv-insert, personnel, list-append,
// rw-register): CREATE TABLE, CREATE INDEX (ignored), INSERT INTO t [AS
// alias] … VALUES with ON CONFLICT / ON DUPLICATE KEY, UPDATE … SET …
// WHERE key = x, SELECT columns | count(*) FROM t [WHERE key = x], DELETE
// FROM t WHERE key = x, ANALYZE and SET (ignored: the fake has no
// isolation levels or session settings). Placeholders are $n (postgres)
// or ? (mysql); values are placeholders, integers, 'strings', a column of
// the row being changed (col, t.col, col + n), and text joined with ||
// or CONCAT(…). Anything else is refused with SQLSTATE 42601.

type opKind int

const (
	opNone opKind = iota // a statement with no effect (ANALYZE, CREATE INDEX)
	opCreate
	opInsert
	opUpdate
	opSelect
	opDelete
)

// stmt is a parsed statement; values are still unbound (term).
type stmt struct {
	kind    opKind
	table   string
	cols    []string // create: columns; insert: columns; select: columns ("count(*)")
	key     []string // create: the primary key columns
	rows    [][]term // insert: the VALUES tuples
	upsert  []assign // insert ON CONFLICT … DO UPDATE SET …
	ignore  bool     // insert ON CONFLICT DO NOTHING
	set     []assign // update
	whereCo string   // update/select/delete: the column compared
	whereV  term
	hasW    bool
	nParams int
}

// term is a value in a statement: a placeholder (param ≥ 0) or a literal.
type term struct {
	param int
	lit   any
	// excluded names the column of EXCLUDED.col / VALUES(col) in an upsert.
	excluded string
	// self names the row's own column in "col + n" (SET v = v + 1), with
	// delta n.
	self  string
	delta int64
	// col names the row's own column as it is (SET v = t.v || …).
	col string
	// concat joins its terms as text (a || b, CONCAT(a, b)).
	concat []term
}

type assign struct {
	col string
	v   term
}

var (
	createRE = regexp.MustCompile(`(?is)^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\((.*)\)[^)]*$`)
	insertRE = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+(\w+)(?:\s+AS\s+\w+)?\s*\(([^)]*)\)\s*VALUES\s*(.*?)\s*(ON\s+(?:CONFLICT|DUPLICATE)\b.*)?$`)
	updateRE = regexp.MustCompile(`(?is)^\s*UPDATE\s+(\w+)\s+SET\s+(.*?)\s+WHERE\s+(\w+)\s*=\s*(\S+)\s*$`)
	selectRE = regexp.MustCompile(`(?is)^\s*SELECT\s+(.*?)\s+FROM\s+(\w+)(?:\s+WHERE\s+(\w+)\s*=\s*(\S+))?\s*$`)
	deleteRE = regexp.MustCompile(`(?is)^\s*DELETE\s+FROM\s+(\w+)\s+WHERE\s+(\w+)\s*=\s*(\S+)\s*$`)
	ignoreRE = regexp.MustCompile(`(?is)^\s*(ANALYZE|SET|CREATE\s+(UNIQUE\s+)?INDEX)\b`)
	pkRE     = regexp.MustCompile(`(?is)^\s*(?:CONSTRAINT\s+\w+\s+)?PRIMARY\s+KEY\s*\(([^)]*)\)`)
	setRE    = regexp.MustCompile(`(?is)^\s*(\w+)\s*=\s*(.+?)\s*$`)
)

// parser numbers ? placeholders as it meets them.
type parser struct {
	next int
	max  int
}

func parse(q string) (*stmt, error) {
	q = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(q), ";"))
	p := &parser{}
	var s *stmt
	var err error
	switch {
	case ignoreRE.MatchString(q):
		s = &stmt{kind: opNone}
	case createRE.MatchString(q):
		s, err = p.create(createRE.FindStringSubmatch(q))
	case insertRE.MatchString(q):
		s, err = p.insert(insertRE.FindStringSubmatch(q))
	case updateRE.MatchString(q):
		m := updateRE.FindStringSubmatch(q)
		s = &stmt{kind: opUpdate, table: lower(m[1]), whereCo: lower(m[3]), hasW: true}
		if s.set, err = p.assigns(m[2]); err == nil {
			s.whereV, err = p.term(m[4])
		}
	case selectRE.MatchString(q):
		m := selectRE.FindStringSubmatch(q)
		s = &stmt{kind: opSelect, table: lower(m[2])}
		for _, c := range splitTop(m[1]) {
			s.cols = append(s.cols, lower(strings.TrimSpace(c)))
		}
		if m[3] != "" {
			s.hasW, s.whereCo = true, lower(m[3])
			s.whereV, err = p.term(m[4])
		}
	case deleteRE.MatchString(q):
		m := deleteRE.FindStringSubmatch(q)
		s = &stmt{kind: opDelete, table: lower(m[1]), whereCo: lower(m[2]), hasW: true}
		s.whereV, err = p.term(m[3])
	default:
		return nil, sqlErr("42601", "fake engine: statement not understood: %s", short(q))
	}
	if err != nil {
		return nil, err
	}
	s.nParams = p.max
	return s, nil
}

func (p *parser) create(m []string) (*stmt, error) {
	s := &stmt{kind: opCreate, table: lower(m[1])}
	for _, item := range splitTop(m[2]) {
		item = strings.TrimSpace(item)
		if pk := pkRE.FindStringSubmatch(item); pk != nil {
			s.key = nil
			for _, c := range strings.Split(pk[1], ",") {
				s.key = append(s.key, lower(strings.TrimSpace(c)))
			}
			continue
		}
		f := strings.Fields(item)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "CONSTRAINT", "FOREIGN", "UNIQUE", "CHECK", "KEY", "INDEX":
			continue
		}
		col := lower(strings.Trim(f[0], `"`+"`"))
		s.cols = append(s.cols, col)
		if strings.Contains(strings.ToUpper(item), "PRIMARY KEY") {
			s.key = []string{col}
		}
	}
	if len(s.cols) == 0 {
		return nil, sqlErr("42601", "fake engine: table %s has no columns", s.table)
	}
	if len(s.key) == 0 {
		s.key = s.cols[:1]
	}
	return s, nil
}

func (p *parser) insert(m []string) (*stmt, error) {
	s := &stmt{kind: opInsert, table: lower(m[1])}
	for _, c := range strings.Split(m[2], ",") {
		s.cols = append(s.cols, lower(strings.TrimSpace(c)))
	}
	rest := strings.TrimSpace(m[3])
	for rest != "" {
		if rest[0] != '(' {
			return nil, sqlErr("42601", "fake engine: VALUES expects (…): %s", short(rest))
		}
		end := closing(rest)
		if end < 0 {
			return nil, sqlErr("42601", "fake engine: unbalanced VALUES")
		}
		var row []term
		for _, v := range splitTop(rest[1:end]) {
			t, err := p.term(v)
			if err != nil {
				return nil, err
			}
			row = append(row, t)
		}
		if len(row) != len(s.cols) {
			return nil, sqlErr("42601", "fake engine: %d values for %d columns", len(row), len(s.cols))
		}
		s.rows = append(s.rows, row)
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest[end+1:]), ","))
	}
	if on := strings.TrimSpace(m[4]); on != "" {
		u := strings.ToUpper(on)
		switch {
		case strings.Contains(u, "DO NOTHING"):
			s.ignore = true
		case strings.Contains(u, "UPDATE"):
			i := strings.Index(u, "UPDATE")
			set := strings.TrimSpace(on[i+len("UPDATE"):])
			set = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(set, "SET "), "set "))
			as, err := p.assigns(set)
			if err != nil {
				return nil, err
			}
			s.upsert = as
		default:
			return nil, sqlErr("42601", "fake engine: %s not understood", short(on))
		}
	}
	return s, nil
}

func (p *parser) assigns(set string) ([]assign, error) {
	var out []assign
	for _, a := range splitTop(set) {
		m := setRE.FindStringSubmatch(a)
		if m == nil {
			return nil, sqlErr("42601", "fake engine: SET %s not understood", short(a))
		}
		t, err := p.term(m[2])
		if err != nil {
			return nil, err
		}
		out = append(out, assign{col: lower(m[1]), v: t})
	}
	return out, nil
}

var (
	excludedRE = regexp.MustCompile(`(?i)^(?:EXCLUDED\.(\w+)|VALUES\s*\(\s*(\w+)\s*\))$`)
	selfRE     = regexp.MustCompile(`^([A-Za-z_]\w*)\s*([+-])\s*(\d+)$`)
	colRE      = regexp.MustCompile(`^(?:[A-Za-z_]\w*\.)?([A-Za-z_]\w*)$`)
	concatRE   = regexp.MustCompile(`(?is)^CONCAT\s*\((.*)\)$`)
)

func (p *parser) term(v string) (term, error) {
	v = strings.TrimSpace(v)
	if parts := splitConcat(v); len(parts) > 1 {
		return p.concat(parts)
	}
	if m := concatRE.FindStringSubmatch(v); m != nil {
		return p.concat(splitTop(m[1]))
	}
	switch {
	case v == "?":
		p.next++
		p.max = max(p.max, p.next)
		return term{param: p.next - 1}, nil
	case strings.HasPrefix(v, "$"):
		n, err := strconv.Atoi(v[1:])
		if err != nil || n < 1 {
			return term{}, sqlErr("42601", "fake engine: bad placeholder %s", v)
		}
		p.max = max(p.max, n)
		return term{param: n - 1}, nil
	case strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'") && len(v) >= 2:
		return term{param: -1, lit: strings.ReplaceAll(v[1:len(v)-1], "''", "'")}, nil
	case excludedRE.MatchString(v):
		m := excludedRE.FindStringSubmatch(v)
		return term{param: -1, excluded: lower(m[1] + m[2])}, nil
	case selfRE.MatchString(v):
		m := selfRE.FindStringSubmatch(v)
		d, _ := strconv.ParseInt(m[3], 10, 64)
		if m[2] == "-" {
			d = -d
		}
		return term{param: -1, self: lower(m[1]), delta: d}, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return term{param: -1, lit: n}, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return term{param: -1, lit: f}, nil
	}
	if m := colRE.FindStringSubmatch(v); m != nil {
		return term{param: -1, col: lower(m[1])}, nil
	}
	return term{}, sqlErr("42601", "fake engine: value %s not understood", short(v))
}

// concat is the text of parts joined.
func (p *parser) concat(parts []string) (term, error) {
	t := term{param: -1}
	for _, part := range parts {
		pt, err := p.term(part)
		if err != nil {
			return term{}, err
		}
		t.concat = append(t.concat, pt)
	}
	return t, nil
}

// splitConcat splits s at || outside quotes and parentheses.
func splitConcat(s string) []string {
	var out []string
	depth, start := 0, 0
	quote := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\'':
			quote = !quote
		case quote:
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case ch == '|' && depth == 0 && i+1 < len(s) && s[i+1] == '|':
			out = append(out, s[start:i])
			start = i + 2
			i++
		}
	}
	return append(out, s[start:])
}

// splitTop splits s at commas outside parentheses and quotes.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	quote := false
	for i, ch := range s {
		switch {
		case ch == '\'':
			quote = !quote
		case quote:
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case ch == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// closing is the index of the parenthesis closing s[0], or -1.
func closing(s string) int {
	depth := 0
	quote := false
	for i, ch := range s {
		switch {
		case ch == '\'':
			quote = !quote
		case quote:
		case ch == '(':
			depth++
		case ch == ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func lower(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// sqlError is an error with an SQLSTATE, as a real server's.
type sqlError struct {
	code, msg string
}

func (e *sqlError) Error() string    { return e.msg + " (SQLSTATE " + e.code + ")" }
func (e *sqlError) SQLState() string { return e.code }

func sqlErr(code, format string, args ...any) error {
	return &sqlError{code: code, msg: fmt.Sprintf(format, args...)}
}
