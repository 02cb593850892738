package script

import (
	"context"
	"fmt"
	"strings"

	"replab/internal/engine"
	"replab/internal/workload"
)

// parseSchema splits a schema file into tables: each CREATE TABLE starts
// one, and the statements after it (indexes, constraints, comments) run
// after it. Statements before the first CREATE TABLE (a type, an
// extension) run just before it.
func parseSchema(file, text string, dialect engine.Dialect) (engine.Schema, error) {
	var s engine.Schema
	var before []string
	sc := newScanner(file, text, dialect, false, false)
	for {
		pc, err := sc.next()
		if err != nil {
			return s, err
		}
		if pc.eof {
			break
		}
		if name, ok := createTable(pc.words, pc.sql); ok {
			ddl := pc.sql
			if len(before) > 0 {
				// Sent as one multi-statement string (PostgreSQL's simple protocol).
				ddl = strings.Join(append(before, ddl), ";\n")
				before = nil
			}
			s.Tables = append(s.Tables, engine.Table{Name: name, Create: map[engine.Dialect]string{dialect: ddl}, Indexes: map[engine.Dialect][]string{}})
			continue
		}
		if len(s.Tables) == 0 {
			before = append(before, pc.sql)
			continue
		}
		t := &s.Tables[len(s.Tables)-1]
		t.Indexes[dialect] = append(t.Indexes[dialect], pc.sql)
	}
	if len(s.Tables) == 0 {
		return s, fmt.Errorf("%s: no CREATE TABLE statement", file)
	}
	return s, nil
}

// createTable is the table a CREATE [TEMP|UNLOGGED] TABLE [IF NOT EXISTS]
// statement creates.
func createTable(words []string, sql string) (string, bool) {
	if len(words) < 3 || words[0] != "CREATE" {
		return "", false
	}
	i := 1
	for i < len(words) && (words[i] == "UNLOGGED" || words[i] == "TEMP" || words[i] == "TEMPORARY" || words[i] == "GLOBAL" || words[i] == "LOCAL") {
		i++
	}
	if i >= len(words) || words[i] != "TABLE" {
		return "", false
	}
	// The name as written: after TABLE (and IF NOT EXISTS) up to a blank or (.
	u := strings.ToUpper(sql)
	k := strings.Index(u, "TABLE") + len("TABLE")
	rest := strings.TrimSpace(sql[k:])
	if strings.HasPrefix(strings.ToUpper(rest), "IF NOT EXISTS") {
		rest = strings.TrimSpace(rest[len("IF NOT EXISTS"):])
	}
	end := strings.IndexAny(rest, " \t\r\n(")
	if end < 0 {
		end = len(rest)
	}
	name := strings.Trim(rest[:end], "\"`")
	return name, name != ""
}

// loadStep is one statement of the load file, or one COPY … FROM STDIN
// block's rows (tab-separated text, as COPY's text format).
type loadStep struct {
	sql   string
	table string // COPY's target, with its column list if any: "t (a, b)"
	rows  [][]*string
}

// parseLoad reads a load file: SQL statements and COPY … FROM STDIN
// blocks, whose data lines end at a line "\.".
func parseLoad(file, text string, dialect engine.Dialect) ([]loadStep, error) {
	var out []loadStep
	sc := newScanner(file, text, dialect, false, false)
	for {
		pc, err := sc.next()
		if err != nil {
			return nil, err
		}
		if pc.eof {
			return out, nil
		}
		if len(pc.words) < 2 || pc.words[0] != "COPY" || !strings.Contains(strings.Join(pc.words, " "), "FROM STDIN") {
			out = append(out, loadStep{sql: pc.sql})
			continue
		}
		u := strings.ToUpper(pc.sql)
		target := strings.TrimSpace(pc.sql[len("COPY"):strings.Index(u, "FROM")])
		if strings.Contains(u, "CSV") || strings.Contains(u, "BINARY") || strings.Contains(u, "DELIMITER") {
			return nil, sc.errf(pc.p, "COPY … FROM STDIN: only the default text format is supported")
		}
		// The data start on the line after the statement.
		if j := strings.IndexByte(sc.text[sc.i:], '\n'); j >= 0 {
			sc.advance(j + 1)
		} else {
			sc.advance(len(sc.text) - sc.i)
		}
		st := loadStep{table: target}
		for {
			if sc.i >= len(sc.text) {
				return nil, sc.errf(pc.p, "COPY data without an end line \\.")
			}
			p := sc.here()
			j := strings.IndexByte(sc.text[sc.i:], '\n')
			if j < 0 {
				j = len(sc.text) - sc.i
			}
			line := strings.TrimSuffix(sc.text[sc.i:sc.i+j], "\r")
			sc.advance(j + 1)
			if line == `\.` {
				break
			}
			row, err := copyFields(line)
			if err != nil {
				return nil, sc.errf(p, "%v", err)
			}
			st.rows = append(st.rows, row)
		}
		out = append(out, st)
	}
}

// copyFields splits a COPY text-format line: tab-separated, \N for NULL,
// backslash escapes.
func copyFields(line string) ([]*string, error) {
	var out []*string
	for _, f := range strings.Split(line, "\t") {
		if f == `\N` {
			out = append(out, nil)
			continue
		}
		var b strings.Builder
		for i := 0; i < len(f); i++ {
			if f[i] != '\\' {
				b.WriteByte(f[i])
				continue
			}
			i++
			if i >= len(f) {
				return nil, fmt.Errorf("a backslash at the end of a field")
			}
			switch f[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			default:
				b.WriteByte(f[i])
			}
		}
		s := b.String()
		out = append(out, &s)
	}
	return out, nil
}

// copyBatch is how many COPY rows go in one INSERT.
const copyBatch = 500

// Load implements workload.Workload: the load file's statements in
// order; COPY rows as multi-row INSERTs of literals, which the server
// converts to the columns' types (the engines' binary COPY paths need
// typed values, which a text file does not give).
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(rows int64)) error {
	var done int64
	for _, st := range w.load {
		if st.table == "" {
			if err := l.Exec(ctx, st.sql); err != nil {
				return err
			}
			done++
			progress(done)
			continue
		}
		for i := 0; i < len(st.rows); i += copyBatch {
			part := st.rows[i:min(i+copyBatch, len(st.rows))]
			if err := l.Exec(ctx, w.insert(st.table, part)); err != nil {
				return fmt.Errorf("copy into %s: %w", st.table, err)
			}
			done += int64(len(part))
			progress(done)
		}
	}
	return nil
}

// insert is INSERT INTO target VALUES (…), … with quoted literals.
func (w *Workload) insert(target string, rows [][]*string) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(target)
	b.WriteString(" VALUES ")
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j, v := range r {
			if j > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("NULL")
				continue
			}
			b.WriteString(w.literal(*v))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// literal quotes s as a string constant of the dialect.
func (w *Workload) literal(s string) string {
	s = strings.ReplaceAll(s, "'", "''")
	if w.dialect == engine.MySQL {
		s = strings.ReplaceAll(s, `\`, `\\`)
	}
	return "'" + s + "'"
}
