package script

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Script is a parsed pgbench script: its commands in order, with the
// \if structure resolved into jumps.
type Script struct {
	File string
	cmds []*command
	// ReadOnly: every statement only reads (detected from the SQL).
	ReadOnly bool
	// Batchable: no \gset and no \sleep, so a run's statements and their
	// arguments are known before any is sent and it can be pipelined.
	Batchable bool
	// Begins: the file has a BEGIN (or START TRANSACTION). Without one,
	// pgbench runs each statement in its own transaction.
	Begins bool
	// Statements are the SQL commands, prepared once per connection.
	Statements []workload.Statement
}

type cmdKind int

const (
	cSQL cmdKind = iota
	cSet
	cSleep
	cIf
	cElif
	cElse
	cEndif
)

type command struct {
	kind cmdKind
	p    pos

	// cSQL: the prepared statement's name and text, the variables bound
	// to its placeholders, and what \gset asks of it.
	name     string
	sql      string
	params   []string
	paramPos []pos
	write    bool
	gset     bool
	prefix   string

	// cSet: the variable and its expression; cIf, cElif: the condition.
	variable string
	e        expr

	// cSleep: a count (or the variable holding it) and its unit.
	sleepN   int64
	sleepVar string
	sleepPos pos
	unit     time.Duration

	// cIf, cElif: where the next branch starts (its \elif, \else or
	// \endif); cElif, cElse: the \endif that ends the whole \if.
	next, end int
}

// builtins are the variables every user has, as in pgbench.
var builtins = map[string]bool{"scale": true, "client_id": true, "default_seed": true, "random_seed": true}

// unsupported are pgbench meta-commands replab refuses, with why.
var unsupported = map[string]string{
	"shell":         "replab runs no shell commands",
	"setshell":      "replab runs no shell commands",
	"aset":          "use \\gset",
	";":             "write the queries as separate statements",
	"startpipeline": "replab pipelines scripts without \\gset or \\sleep by itself",
	"syncpipeline":  "replab pipelines scripts without \\gset or \\sleep by itself",
	"endpipeline":   "replab pipelines scripts without \\gset or \\sleep by itself",
}

// Parse reads a pgbench script. dialect (engine.Postgres or engine.MySQL) gives the
// placeholders variables become. Errors are file:line:column.
func Parse(file, text string, dialect engine.Dialect) (*Script, error) {
	sc := &Script{File: file, ReadOnly: true, Batchable: true}
	s := newScanner(file, text, dialect, true, true)
	var open []int // the \if / \elif / \else commands not yet closed
	nsql := 0
	for {
		pc, err := s.next()
		if err != nil {
			return nil, err
		}
		if pc.eof {
			break
		}
		if pc.meta == "" {
			if len(pc.words) > 0 && (pc.words[0] == "BEGIN" || pc.words[0] == "START" && len(pc.words) > 1 && pc.words[1] == "TRANSACTION") {
				sc.Begins = true
			}
			c, err := sqlCommand(s, pc)
			if err != nil {
				return nil, err
			}
			if c == nil {
				continue // BEGIN or END: the driver's own transaction
			}
			nsql++
			c.name = "q" + strconv.Itoa(nsql)
			sc.ReadOnly = sc.ReadOnly && !c.write
			sc.cmds = append(sc.cmds, c)
			sc.Statements = append(sc.Statements, workload.Statement{Name: c.name, SQL: c.sql})
			continue
		}
		a := pc.args
		c := &command{p: pc.p}
		switch pc.meta {
		case "set":
			name, rest := firstWord(a)
			if name == "" {
				return nil, a.errf(0, "missing argument in command \"set\"")
			}
			if !validName(name) {
				return nil, a.errf(0, "invalid variable name: %q", name)
			}
			e, err := parseExpr(rest)
			if err != nil {
				return nil, err
			}
			c.kind, c.variable, c.e = cSet, name, e
		case "sleep":
			if err := parseSleep(a, c); err != nil {
				return nil, err
			}
			sc.Batchable = false
		case "gset":
			prefix, rest := firstWord(a)
			if strings.TrimSpace(rest.text) != "" {
				return nil, rest.errf(0, "too many arguments for \\gset")
			}
			var last *command
			if len(sc.cmds) > 0 {
				last = sc.cmds[len(sc.cmds)-1]
			}
			if last == nil || last.kind != cSQL || last.gset {
				return nil, s.errf(pc.p, "\\gset must follow an SQL command")
			}
			last.gset, last.prefix = true, prefix
			sc.Batchable = false
			continue
		case "if", "elif":
			if pc.meta == "elif" {
				if len(open) == 0 {
					return nil, s.errf(pc.p, "\\elif without matching \\if")
				}
				if sc.cmds[open[len(open)-1]].kind == cElse {
					return nil, s.errf(pc.p, "\\elif after \\else")
				}
			}
			e, err := parseExpr(a)
			if err != nil {
				return nil, err
			}
			c.kind, c.e = cIf, e
			if pc.meta == "elif" {
				c.kind = cElif
			}
		case "else":
			if len(open) == 0 {
				return nil, s.errf(pc.p, "\\else without matching \\if")
			}
			if sc.cmds[open[len(open)-1]].kind == cElse {
				return nil, s.errf(pc.p, "\\else after \\else")
			}
			c.kind = cElse
		case "endif":
			if len(open) == 0 {
				return nil, s.errf(pc.p, "\\endif without matching \\if")
			}
			c.kind = cEndif
		default:
			if why, ok := unsupported[pc.meta]; ok {
				return nil, s.errf(pc.p, "\\%s is not supported by replab: %s", pc.meta, why)
			}
			return nil, s.errf(pc.p, "invalid command \\%s", pc.meta)
		}
		if (c.kind == cElse || c.kind == cEndif) && strings.TrimSpace(a.text) != "" {
			return nil, a.errf(0, "unexpected argument for \\%s", pc.meta)
		}
		at := len(sc.cmds)
		sc.cmds = append(sc.cmds, c)
		switch c.kind {
		case cIf:
			open = append(open, at)
		case cElif, cElse:
			sc.cmds[open[len(open)-1]].next = at
			open = append(open, at)
		case cEndif:
			// Close the chain: every branch's next and end.
			for len(open) > 0 {
				b := sc.cmds[open[len(open)-1]]
				open = open[:len(open)-1]
				b.end = at
				if b.kind != cElse && b.next == 0 {
					b.next = at
				}
				if b.kind == cIf {
					break
				}
			}
		}
	}
	if len(open) > 0 {
		first := open[len(open)-1]
		for i := len(open) - 1; i >= 0 && sc.cmds[open[i]].kind != cIf; i-- {
			first = open[i-1]
		}
		return nil, s.errf(sc.cmds[first].p, "\\if without matching \\endif")
	}
	if len(sc.Statements) == 0 {
		return nil, s.errf(pos{1, 1}, "no SQL statement in the script")
	}
	return sc, nil
}

// sqlCommand makes a statement a command; nil for BEGIN and END, which
// delimit the transaction the driver runs anyway.
func sqlCommand(s *scanner, pc piece) (*command, error) {
	verb := ""
	if len(pc.words) > 0 {
		verb = pc.words[0]
	}
	switch verb {
	case "BEGIN", "START", "END", "COMMIT":
		if verb == "START" && (len(pc.words) < 2 || pc.words[1] != "TRANSACTION") {
			break
		}
		if len(pc.params) > 0 {
			return nil, s.errf(pc.paramPos[0], "variables in %s", verb)
		}
		return nil, nil
	case "ROLLBACK", "ABORT":
		return nil, s.errf(pc.p, "%s is not supported: replab runs each script as one transaction, committed at its end", verb)
	}
	return &command{kind: cSQL, p: pc.p, sql: pc.sql, params: pc.params, paramPos: pc.paramPos, write: writes(pc.words)}, nil
}

// writes guesses from a statement's words whether it may change data (or
// lock rows, which a standby refuses): only SELECT, VALUES, TABLE, SHOW
// and WITH … SELECT without INTO, FOR UPDATE/SHARE, nextval or setval
// count as reads.
func writes(words []string) bool {
	if len(words) == 0 {
		return false
	}
	switch words[0] {
	case "SELECT", "VALUES", "TABLE", "SHOW", "WITH":
	default:
		return true
	}
	for _, w := range words {
		switch w {
		case "INSERT", "UPDATE", "DELETE", "MERGE", "INTO", "SHARE", "NEXTVAL", "SETVAL", "LOCK":
			return true
		}
	}
	return false
}

// firstWord splits a meta-command's arguments at the first blank.
func firstWord(a *src) (string, *src) {
	t := a.text
	i := 0
	for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
		i++
	}
	j := i
	for j < len(t) && t[j] != ' ' && t[j] != '\t' {
		j++
	}
	return t[i:j], &src{file: a.file, text: t[j:], at: a.at[j:]}
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isIdentChar(n[i]) {
			return false
		}
	}
	return true
}

// parseSleep reads \sleep's count (a number or :variable) and unit.
func parseSleep(a *src, c *command) error {
	f := strings.Fields(a.text)
	if len(f) == 0 || len(f) > 2 {
		return a.errf(0, "\\sleep takes a count and an optional unit (us, ms, s)")
	}
	c.kind, c.unit, c.sleepPos = cSleep, time.Second, a.at[strings.Index(a.text, f[0])]
	if len(f) == 2 {
		switch strings.ToLower(f[1]) {
		case "us":
			c.unit = time.Microsecond
		case "ms":
			c.unit = time.Millisecond
		case "s":
		default:
			return a.errf(strings.LastIndex(a.text, f[1]), "unrecognized time unit %q; use us, ms or s", f[1])
		}
	}
	if strings.HasPrefix(f[0], ":") {
		if !validName(f[0][1:]) {
			return a.errf(strings.Index(a.text, f[0]), "invalid variable name: %q", f[0])
		}
		c.sleepVar = f[0][1:]
		return nil
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 {
		return a.errf(strings.Index(a.text, f[0]), "invalid sleep count %q", f[0])
	}
	c.sleepN = n
	return nil
}

// CheckVariables reports, at its place, the first variable a script
// reads that nothing can have set: not a built-in, not \set in any of
// the scripts (a user's variables outlive a transaction, as a pgbench
// client's do), and not possibly from a \gset (whose columns are known
// only at run time).
func CheckVariables(scripts []*Script) error {
	set := map[string]bool{}
	var prefixes []string
	for _, sc := range scripts {
		for _, c := range sc.cmds {
			switch {
			case c.kind == cSet:
				set[c.variable] = true
			case c.kind == cSQL && c.gset:
				prefixes = append(prefixes, c.prefix)
			}
		}
	}
	known := func(n string) bool {
		if builtins[n] || set[n] {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	for _, sc := range scripts {
		for _, c := range sc.cmds {
			var err error
			undefined := func(p pos, n string) {
				if err == nil && !known(n) {
					err = &syntaxError{file: sc.File, p: p, msg: fmt.Sprintf("undefined variable %q", n)}
				}
			}
			for i, n := range c.params {
				undefined(c.paramPos[i], n)
			}
			if c.e != nil {
				vars(c.e, func(v *varExpr) {
					if v.name != "default_seed" {
						undefined(v.p, v.name)
					}
				})
			}
			if c.sleepVar != "" {
				undefined(c.sleepPos, c.sleepVar)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// String renders the parsed script, one command a line, for golden tests.
func (sc *Script) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "read-only %t, batchable %t, begins %t\n", sc.ReadOnly, sc.Batchable, sc.Begins)
	for i, c := range sc.cmds {
		fmt.Fprintf(&b, "%d %d:%d ", i, c.p.line, c.p.col)
		switch c.kind {
		case cSQL:
			fmt.Fprintf(&b, "sql %s %q", c.name, c.sql)
			if len(c.params) > 0 {
				fmt.Fprintf(&b, " params %s", strings.Join(c.params, ","))
			}
			if c.write {
				b.WriteString(" writes")
			}
			if c.gset {
				fmt.Fprintf(&b, " gset %q", c.prefix)
			}
		case cSet:
			fmt.Fprintf(&b, "set %s = %s", c.variable, exprString(c.e))
		case cSleep:
			if c.sleepVar != "" {
				fmt.Fprintf(&b, "sleep :%s × %s", c.sleepVar, c.unit)
			} else {
				fmt.Fprintf(&b, "sleep %s", time.Duration(c.sleepN)*c.unit)
			}
		case cIf:
			fmt.Fprintf(&b, "if %s else→%d", exprString(c.e), c.next)
		case cElif:
			fmt.Fprintf(&b, "elif %s else→%d end→%d", exprString(c.e), c.next, c.end)
		case cElse:
			fmt.Fprintf(&b, "else end→%d", c.end)
		case cEndif:
			b.WriteString("endif")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
