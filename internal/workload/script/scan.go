package script

import (
	"strconv"
	"strings"

	"replab/internal/engine"
)

// scanner splits a file into SQL statements and meta-commands as psql's
// lexer does for pgbench: a statement ends at a semicolon outside quotes,
// comments and dollar-quoted bodies, or where a backslash command starts.
type scanner struct {
	file    string
	text    string
	i       int
	line    int
	col     int
	dialect engine.Dialect
	vars    bool // replace :name by placeholders (transaction files)
	meta    bool // backslash commands allowed
}

func newScanner(file, text string, dialect engine.Dialect, vars, meta bool) *scanner {
	return &scanner{file: file, text: text, line: 1, col: 1, dialect: dialect, vars: vars, meta: meta}
}

// piece is a statement or a meta-command.
type piece struct {
	p pos
	// A statement: its text (placeholders for variables), its variables
	// in placeholder order, and its words outside quotes, upper-cased.
	sql      string
	params   []string
	paramPos []pos
	words    []string
	// A meta-command (without its backslash) and its argument text.
	meta string
	args *src
	eof  bool
}

func (s *scanner) here() pos { return pos{s.line, s.col} }

func (s *scanner) advance(n int) {
	for k := 0; k < n && s.i < len(s.text); k++ {
		if s.text[s.i] == '\n' {
			s.line++
			s.col = 1
		} else {
			s.col++
		}
		s.i++
	}
}

func (s *scanner) errf(p pos, format string, args ...any) error {
	return (&src{file: s.file, at: []pos{p}}).errf(0, format, args...)
}

// next returns the next statement or meta-command; eof when the file
// is done. A statement is returned without its semicolon.
func (s *scanner) next() (piece, error) {
	var b strings.Builder
	var pc piece
	content := false
	startContent := func() {
		if !content {
			content = true
			pc.p = s.here()
			b.Reset() // comments before a statement are not sent
		}
	}
	finish := func() piece {
		pc.sql = strings.TrimSpace(b.String())
		return pc
	}
	for s.i < len(s.text) {
		t := s.text[s.i:]
		c := t[0]
		switch {
		case c == ';':
			s.advance(1)
			if content {
				return finish(), nil
			}
			b.Reset() // an empty statement
		case c == '\\' && s.meta:
			if content {
				return finish(), nil // the meta-command is read next time
			}
			return s.metaCommand()
		case c == '\\':
			return pc, s.errf(s.here(), "backslash commands are not allowed in this file")
		case strings.HasPrefix(t, "--") || c == '#' && s.dialect == engine.MySQL:
			j := strings.IndexByte(t, '\n')
			if j < 0 {
				j = len(t)
			}
			b.WriteString(t[:j])
			s.advance(j)
		case strings.HasPrefix(t, "/*"):
			p := s.here()
			depth, j := 0, 0
			for j < len(t) {
				if strings.HasPrefix(t[j:], "/*") {
					depth++
					j += 2
				} else if strings.HasPrefix(t[j:], "*/") {
					depth--
					j += 2
					if depth == 0 {
						break
					}
				} else {
					j++
				}
			}
			if depth != 0 {
				return pc, s.errf(p, "unterminated /* comment")
			}
			b.WriteString(t[:j])
			s.advance(j)
		case c == '\'' || c == '"' || c == '`' && s.dialect == engine.MySQL:
			startContent()
			p := s.here()
			escapes := s.dialect == engine.MySQL && c != '`'
			if c == '\'' && b.Len() > 0 {
				prev := b.String()[b.Len()-1]
				if (prev == 'E' || prev == 'e') && (b.Len() == 1 || !isIdentChar(b.String()[b.Len()-2])) {
					escapes = true
				}
			}
			j := 1
			for {
				if j >= len(t) {
					return pc, s.errf(p, "unterminated quoted %s", map[bool]string{true: "string", false: "identifier"}[c == '\''])
				}
				if escapes && t[j] == '\\' {
					j += 2
					continue
				}
				if t[j] == c {
					if j+1 < len(t) && t[j+1] == c {
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			b.WriteString(t[:j])
			s.advance(j)
		case c == '$' && s.dialect != engine.MySQL && (b.Len() == 0 || !isIdentChar(b.String()[b.Len()-1])) && dollarTag(t) != "":
			startContent()
			p := s.here()
			tag := dollarTag(t)
			end := strings.Index(t[len(tag):], tag)
			if end < 0 {
				return pc, s.errf(p, "unterminated dollar-quoted string")
			}
			j := len(tag) + end + len(tag)
			b.WriteString(t[:j])
			s.advance(j)
		case c == ':' && s.vars:
			startContent()
			if len(t) > 1 && t[1] == ':' {
				j := 0
				for j < len(t) && t[j] == ':' {
					j++
				}
				b.WriteString(t[:j]) // a cast (x::int), not a variable
				s.advance(j)
				continue
			}
			j := 1
			for j < len(t) && isIdentChar(t[j]) {
				j++
			}
			if j == 1 {
				b.WriteByte(c)
				s.advance(1)
				continue
			}
			pc.params = append(pc.params, t[1:j])
			pc.paramPos = append(pc.paramPos, s.here())
			if s.dialect == engine.MySQL {
				b.WriteByte('?')
			} else {
				b.WriteString("$" + strconv.Itoa(len(pc.params)))
			}
			s.advance(j)
		case isIdentStart(c):
			startContent()
			j := 1
			for j < len(t) && (isIdentChar(t[j]) || t[j] == '$') {
				j++
			}
			pc.words = append(pc.words, strings.ToUpper(t[:j]))
			b.WriteString(t[:j])
			s.advance(j)
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				startContent()
			}
			b.WriteByte(c)
			s.advance(1)
		}
	}
	if content {
		return finish(), nil
	}
	return piece{eof: true, p: s.here()}, nil
}

// dollarTag is the $tag$ or $$ that t starts with, or "".
func dollarTag(t string) string {
	j := 1
	for j < len(t) && (isIdentStart(t[j]) || j > 1 && t[j] >= '0' && t[j] <= '9') {
		j++
	}
	if j < len(t) && t[j] == '$' {
		return t[:j+1]
	}
	return ""
}

// metaCommand reads a backslash command: its name, then its arguments to
// the end of the line (a backslash at a line's end continues it).
func (s *scanner) metaCommand() (piece, error) {
	pc := piece{p: s.here()}
	s.advance(1)
	j := 0
	t := s.text[s.i:]
	for j < len(t) && isIdentChar(t[j]) {
		j++
	}
	if j == 0 && len(t) > 0 && t[0] == ';' {
		j = 1 // \; joins queries in pgbench
	}
	pc.meta = strings.ToLower(t[:j])
	s.advance(j)
	a := &src{file: s.file}
	var b strings.Builder
	for s.i < len(s.text) {
		c := s.text[s.i]
		if c == '\n' {
			break
		}
		if c == '\\' && (strings.HasPrefix(s.text[s.i:], "\\\n") || strings.HasPrefix(s.text[s.i:], "\\\r\n")) {
			a.at = append(a.at, s.here())
			b.WriteByte(' ')
			s.advance(strings.IndexByte(s.text[s.i:], '\n') + 1)
			continue
		}
		a.at = append(a.at, s.here())
		b.WriteByte(c)
		s.advance(1)
	}
	a.text = strings.TrimRight(b.String(), " \t\r")
	if len(a.at) > len(a.text) {
		a.at = a.at[:len(a.text)+1]
	} else {
		a.at = append(a.at, s.here())
	}
	pc.args = a
	return pc, nil
}
