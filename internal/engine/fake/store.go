package fake

import (
	"database/sql/driver"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// table is one table at one node: rows by primary key.
type table struct {
	cols []string
	key  []int // indexes of the primary key's columns
	rows map[string][]driver.Value
}

func newTable(s *stmt) (*table, error) {
	t := &table{cols: s.cols, rows: map[string][]driver.Value{}}
	for _, k := range s.key {
		i := t.col(k)
		if i < 0 {
			return nil, sqlErr("42703", "fake engine: primary key column %s is not a column of %s", k, s.table)
		}
		t.key = append(t.key, i)
	}
	return t, nil
}

func (t *table) col(name string) int {
	for i, c := range t.cols {
		if c == name {
			return i
		}
	}
	return -1
}

func (t *table) keyOf(row []driver.Value) string {
	parts := make([]string, len(t.key))
	for i, k := range t.key {
		parts[i] = norm(row[k])
	}
	return strings.Join(parts, "\x00")
}

// norm is a value as compared: integers of any type alike, bytes as text.
func norm(v driver.Value) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case int64:
		return "n" + strconv.FormatInt(x, 10)
	case int:
		return "n" + strconv.Itoa(x)
	case int32:
		return "n" + strconv.FormatInt(int64(x), 10)
	case float64:
		if x == float64(int64(x)) {
			return "n" + strconv.FormatInt(int64(x), 10)
		}
		return "f" + strconv.FormatFloat(x, 'g', -1, 64)
	case []byte:
		return "s" + string(x)
	case string:
		return "s" + x
	case bool:
		return "b" + strconv.FormatBool(x)
	case time.Time:
		return "t" + x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("?%v", v)
}

// text is a value as text, as || and CONCAT take it.
func text(v driver.Value) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// rowOp is one row image of a committed change: the row after it, or nil
// for a deleted row.
type rowOp struct {
	table string
	key   string
	row   []driver.Value
}

// change is one committed transaction, replicated as its row images.
type change struct {
	origin string // the node it was committed at
	seq    int64  // at its origin
	at     time.Time
	ops    []rowOp
}

// store is a node's tables; the node's mutex guards it.
type store struct {
	tables map[string]*table
}

// view is what a statement reads and writes: the store, under a
// transaction's own writes.
type view struct {
	st      *store
	overlay map[string]map[string][]driver.Value // table -> key -> row (nil: deleted)
	ops     []rowOp
}

func (v *view) table(name string) (*table, error) {
	t := v.st.tables[name]
	if t == nil {
		return nil, sqlErr("42P01", "fake engine: relation %q does not exist", name)
	}
	return t, nil
}

func (v *view) get(name string, t *table, key string) ([]driver.Value, bool) {
	if o, ok := v.overlay[name][key]; ok {
		return o, o != nil
	}
	r, ok := t.rows[key]
	return r, ok
}

func (v *view) put(name, key string, row []driver.Value) {
	if v.overlay[name] == nil {
		v.overlay[name] = map[string][]driver.Value{}
	}
	v.overlay[name][key] = row
	v.ops = append(v.ops, rowOp{table: name, key: key, row: row})
}

// scan lists the visible rows of t, in key order.
func (v *view) scan(name string, t *table) [][]driver.Value {
	keys := map[string]bool{}
	for k := range t.rows {
		keys[k] = true
	}
	for k := range v.overlay[name] {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out [][]driver.Value
	for _, k := range sorted {
		if r, ok := v.get(name, t, k); ok {
			out = append(out, r)
		}
	}
	return out
}

// exec runs one statement with its arguments: the rows it affected, and
// for a SELECT its columns and rows.
func (v *view) exec(s *stmt, args []driver.Value) (affected int64, cols []string, rows [][]driver.Value, err error) {
	var bind func(t term, excluded, cur []driver.Value, tb *table) (driver.Value, error)
	bind = func(t term, excluded, cur []driver.Value, tb *table) (driver.Value, error) {
		switch {
		case t.concat != nil:
			var b strings.Builder
			for _, part := range t.concat {
				v, err := bind(part, excluded, cur, tb)
				if err != nil {
					return nil, err
				}
				b.WriteString(text(v))
			}
			return b.String(), nil
		case t.col != "":
			i := tb.col(t.col)
			if i < 0 || cur == nil {
				return nil, sqlErr("42703", "fake engine: no column %s in the row being changed", t.col)
			}
			return cur[i], nil
		case t.self != "":
			i := tb.col(t.self)
			if i < 0 || cur == nil {
				return nil, sqlErr("42703", "fake engine: no column %s to add to", t.self)
			}
			n, ok := cur[i].(int64)
			if !ok {
				return nil, sqlErr("42883", "fake engine: %s + %d: not an integer", t.self, t.delta)
			}
			return n + t.delta, nil
		case t.excluded != "":
			i := tb.col(t.excluded)
			if i < 0 || excluded == nil {
				return nil, sqlErr("42703", "fake engine: no column %s to take from the new row", t.excluded)
			}
			return excluded[i], nil
		case t.param >= 0:
			if t.param >= len(args) {
				return nil, sqlErr("08P01", "fake engine: placeholder %d of %d arguments", t.param+1, len(args))
			}
			return args[t.param], nil
		}
		return t.lit, nil
	}
	switch s.kind {
	case opNone:
		return 0, nil, nil, nil
	case opCreate:
		if v.st.tables[s.table] != nil {
			return 0, nil, nil, nil // IF NOT EXISTS, or a replayed schema
		}
		t, err := newTable(s)
		if err != nil {
			return 0, nil, nil, err
		}
		v.st.tables[s.table] = t
		return 0, nil, nil, nil
	}
	t, err := v.table(s.table)
	if err != nil {
		return 0, nil, nil, err
	}
	match := func(row []driver.Value) (bool, error) {
		if !s.hasW {
			return true, nil
		}
		i := t.col(s.whereCo)
		if i < 0 {
			return false, sqlErr("42703", "fake engine: column %s does not exist in %s", s.whereCo, s.table)
		}
		w, err := bind(s.whereV, nil, nil, t)
		return norm(row[i]) == norm(w), err
	}
	switch s.kind {
	case opInsert:
		for _, tr := range s.rows {
			row := make([]driver.Value, len(t.cols))
			for j, c := range s.cols {
				i := t.col(c)
				if i < 0 {
					return affected, nil, nil, sqlErr("42703", "fake engine: column %s does not exist in %s", c, s.table)
				}
				if row[i], err = bind(tr[j], nil, nil, t); err != nil {
					return affected, nil, nil, err
				}
			}
			key := t.keyOf(row)
			old, exists := v.get(s.table, t, key)
			switch {
			case !exists:
				v.put(s.table, key, row)
			case s.ignore:
				continue
			case s.upsert != nil:
				nr := append([]driver.Value(nil), old...)
				for _, a := range s.upsert {
					i := t.col(a.col)
					if i < 0 {
						return affected, nil, nil, sqlErr("42703", "fake engine: column %s does not exist in %s", a.col, s.table)
					}
					if nr[i], err = bind(a.v, row, old, t); err != nil {
						return affected, nil, nil, err
					}
				}
				v.put(s.table, key, nr)
			default:
				return affected, nil, nil, sqlErr("23505", "fake engine: duplicate key in %s", s.table)
			}
			affected++
		}
		return affected, nil, nil, nil
	case opUpdate, opDelete:
		for _, row := range v.scan(s.table, t) {
			ok, err := match(row)
			if err != nil {
				return affected, nil, nil, err
			}
			if !ok {
				continue
			}
			key := t.keyOf(row)
			if s.kind == opDelete {
				v.put(s.table, key, nil)
				affected++
				continue
			}
			nr := append([]driver.Value(nil), row...)
			for _, a := range s.set {
				i := t.col(a.col)
				if i < 0 {
					return affected, nil, nil, sqlErr("42703", "fake engine: column %s does not exist in %s", a.col, s.table)
				}
				if nr[i], err = bind(a.v, nil, row, t); err != nil {
					return affected, nil, nil, err
				}
			}
			v.put(s.table, key, nr)
			affected++
		}
		return affected, nil, nil, nil
	case opSelect:
		var found [][]driver.Value
		for _, row := range v.scan(s.table, t) {
			ok, err := match(row)
			if err != nil {
				return 0, nil, nil, err
			}
			if ok {
				found = append(found, row)
			}
		}
		if len(s.cols) == 1 && s.cols[0] == "count(*)" {
			return 0, []string{"count"}, [][]driver.Value{{int64(len(found))}}, nil
		}
		cols := s.cols
		if len(cols) == 1 && cols[0] == "*" {
			cols = t.cols
		}
		idx := make([]int, len(cols))
		for j, c := range cols {
			if idx[j] = t.col(c); idx[j] < 0 {
				return 0, nil, nil, sqlErr("42703", "fake engine: column %s does not exist in %s", c, s.table)
			}
		}
		for _, row := range found {
			out := make([]driver.Value, len(idx))
			for j, i := range idx {
				out[j] = row[i]
			}
			rows = append(rows, out)
		}
		return 0, cols, rows, nil
	}
	return 0, nil, nil, sqlErr("42601", "fake engine: nothing to do")
}

// apply makes row images part of the store.
func (st *store) apply(ops []rowOp) {
	for _, op := range ops {
		t := st.tables[op.table]
		if t == nil {
			continue // a table this node does not have
		}
		if op.row == nil {
			delete(t.rows, op.key)
		} else {
			t.rows[op.key] = op.row
		}
	}
}
