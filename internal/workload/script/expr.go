package script

import (
	"fmt"
	"strconv"
	"strings"
)

// pos is a place in a script file: 1-based line and column (in bytes).
type pos struct{ line, col int }

// expr is a parsed \set, \if or \elif expression: a constant, a variable
// or a function applied to arguments (operators are functions, as in
// pgbench).
type expr interface{ at() pos }

type constExpr struct {
	p pos
	v value
}

type varExpr struct {
	p    pos
	name string
}

type callExpr struct {
	p    pos
	fn   fn
	args []expr
}

func (e *constExpr) at() pos { return e.p }
func (e *varExpr) at() pos   { return e.p }
func (e *callExpr) at() pos  { return e.p }

// fn is a function or an operator of the expression language.
type fn int

const (
	fAdd fn = iota
	fSub
	fMul
	fDiv
	fMod
	fEq
	fNe
	fLe
	fLt
	fBitAnd
	fBitOr
	fBitXor
	fShl
	fShr
	fAnd
	fOr
	fNot
	fIs
	fCase
	fAbs
	fLeast
	fGreatest
	fPi
	fSqrt
	fLn
	fExp
	fPow
	fInt
	fDouble
	fRandom
	fRandomGaussian
	fRandomExponential
	fRandomZipfian
	fHashMurmur2
	fHashFNV1a
)

// functions are the callable names, with their argument counts: -1 is
// one or more (least, greatest), -2 one or two (the hashes' optional
// seed). pgbench's permute and debug are not among them.
var functions = map[string]struct {
	f     fn
	nargs int
}{
	"abs": {fAbs, 1}, "least": {fLeast, -1}, "greatest": {fGreatest, -1},
	"pi": {fPi, 0}, "sqrt": {fSqrt, 1}, "ln": {fLn, 1}, "exp": {fExp, 1},
	"pow": {fPow, 2}, "power": {fPow, 2}, "int": {fInt, 1}, "double": {fDouble, 1},
	"random": {fRandom, 2}, "random_gaussian": {fRandomGaussian, 3},
	"random_exponential": {fRandomExponential, 3}, "random_zipfian": {fRandomZipfian, 3},
	"hash": {fHashMurmur2, -2}, "hash_murmur2": {fHashMurmur2, -2}, "hash_fnv1a": {fHashFNV1a, -2},
}

// token kinds of the expression lexer.
type tokKind int

const (
	tEOF tokKind = iota
	tInt
	tDouble
	tVar
	tIdent // a function name or keyword
	tOp
)

type token struct {
	k    tokKind
	text string // the operator, or the identifier lower-cased
	i    int64
	d    float64
	p    pos
}

// syntaxError is an error at a place in a script file.
type syntaxError struct {
	file string
	p    pos
	msg  string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.file, e.p.line, e.p.col, e.msg)
}

// src is a meta-command's argument text with the file position of each
// byte (a continued line keeps its own positions).
type src struct {
	file string
	text string
	at   []pos // len(text)+1: the last is just past the end
}

func (s *src) errf(i int, format string, args ...any) error {
	return &syntaxError{file: s.file, p: s.at[min(i, len(s.at)-1)], msg: fmt.Sprintf(format, args...)}
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// lex splits an expression into tokens.
func lex(s *src) ([]token, error) {
	var out []token
	t := s.text
	for i := 0; i < len(t); {
		c := t[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(t) && t[i+1] >= '0' && t[i+1] <= '9':
			j := i
			for j < len(t) && t[j] >= '0' && t[j] <= '9' {
				j++
			}
			double := false
			if j < len(t) && t[j] == '.' {
				double = true
				j++
				for j < len(t) && t[j] >= '0' && t[j] <= '9' {
					j++
				}
			}
			if j < len(t) && (t[j] == 'e' || t[j] == 'E') {
				k := j + 1
				if k < len(t) && (t[k] == '+' || t[k] == '-') {
					k++
				}
				if k < len(t) && t[k] >= '0' && t[k] <= '9' {
					double = true
					for j = k; j < len(t) && t[j] >= '0' && t[j] <= '9'; j++ {
					}
				}
			}
			if j < len(t) && isIdentStart(t[j]) {
				return nil, s.errf(i, "syntax error at %q", t[i:j+1])
			}
			tok := token{p: s.at[i], text: t[i:j]}
			if double {
				d, err := strconv.ParseFloat(t[i:j], 64)
				if err != nil {
					return nil, s.errf(i, "invalid double constant %q", t[i:j])
				}
				tok.k, tok.d = tDouble, d
			} else {
				n, err := strconv.ParseInt(t[i:j], 10, 64)
				if err != nil {
					return nil, s.errf(i, "bigint constant overflow: %s", t[i:j])
				}
				tok.k, tok.i = tInt, n
			}
			out = append(out, tok)
			i = j
		case c == ':':
			j := i + 1
			for j < len(t) && isIdentChar(t[j]) {
				j++
			}
			if j == i+1 {
				return nil, s.errf(i, "syntax error at %q", ":")
			}
			out = append(out, token{k: tVar, text: t[i+1 : j], p: s.at[i]})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(t) && isIdentChar(t[j]) {
				j++
			}
			out = append(out, token{k: tIdent, text: strings.ToLower(t[i:j]), p: s.at[i]})
			i = j
		default:
			op := ""
			for _, o := range []string{"<>", "!=", "<=", ">=", "<<", ">>", "+", "-", "*", "/", "%", "(", ")", ",", "=", "<", ">", "~", "&", "|", "#"} {
				if strings.HasPrefix(t[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, s.errf(i, "syntax error at %q", string(c))
			}
			if op == "!=" {
				op = "<>"
			}
			out = append(out, token{k: tOp, text: op, p: s.at[i]})
			i += len(op)
		}
	}
	return append(out, token{k: tEOF, p: s.at[len(t)]}), nil
}

// parser is a precedence-climbing parser with pgbench's precedences
// (lowest first): OR; AND; NOT; IS, ISNULL, NOTNULL; comparisons
// (non-associative); bitwise | # & << >> and prefix ~; + -; * / %;
// prefix + -.
type parser struct {
	s    *src
	toks []token
	i    int
}

const (
	precOr = iota + 1
	precAnd
	precNot
	precIs
	precCmp
	precBit
	precAdd
	precMul
	precUnary
)

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) errAt(t token, format string, args ...any) error {
	return &syntaxError{file: p.s.file, p: t.p, msg: fmt.Sprintf(format, args...)}
}

func (p *parser) unexpected(t token) error {
	if t.k == tEOF {
		return p.errAt(t, "syntax error: unexpected end of expression")
	}
	return p.errAt(t, "syntax error at %q", tokText(t))
}

func tokText(t token) string {
	if t.k == tVar {
		return ":" + t.text
	}
	return t.text
}

// parseExpr parses a whole expression.
func parseExpr(s *src) (expr, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{s: s, toks: toks}
	if p.peek().k == tEOF {
		return nil, p.errAt(p.peek(), "missing expression")
	}
	e, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.k != tEOF {
		return nil, p.unexpected(t)
	}
	return e, nil
}

// binary operators: precedence and the function they call.
var binops = map[string]struct {
	prec int
	f    fn
	swap bool // a > b is b < a, as in pgbench
}{
	"or": {precOr, fOr, false}, "and": {precAnd, fAnd, false},
	"=": {precCmp, fEq, false}, "<>": {precCmp, fNe, false}, "<": {precCmp, fLt, false},
	"<=": {precCmp, fLe, false}, ">": {precCmp, fLt, true}, ">=": {precCmp, fLe, true},
	"|": {precBit, fBitOr, false}, "#": {precBit, fBitXor, false}, "&": {precBit, fBitAnd, false},
	"<<": {precBit, fShl, false}, ">>": {precBit, fShr, false},
	"+": {precAdd, fAdd, false}, "-": {precAdd, fSub, false},
	"*": {precMul, fMul, false}, "/": {precMul, fDiv, false}, "%": {precMul, fMod, false},
}

// expr parses operators binding tighter than min.
func (p *parser) expr(min int) (expr, error) {
	left, err := p.prefix()
	if err != nil {
		return nil, err
	}
	lastCmp := false
	for {
		t := p.peek()
		if t.k != tOp && t.k != tIdent {
			return left, nil
		}
		if t.k == tIdent && (t.text == "is" || t.text == "isnull" || t.text == "notnull") {
			if precIs <= min {
				return left, nil
			}
			p.next()
			if left, err = p.isTest(t, left); err != nil {
				return nil, err
			}
			continue
		}
		op, ok := binops[t.text]
		if !ok || op.prec <= min {
			return left, nil
		}
		if op.prec == precCmp && lastCmp {
			return nil, p.unexpected(t) // comparisons do not chain
		}
		p.next()
		right, err := p.expr(op.prec)
		if err != nil {
			return nil, err
		}
		a, b := left, right
		if op.swap {
			a, b = b, a
		}
		left = &callExpr{p: t.p, fn: op.f, args: []expr{a, b}}
		lastCmp = op.prec == precCmp
	}
}

// isTest parses what follows IS (NULL, TRUE, FALSE, each maybe after
// NOT), or applies ISNULL / NOTNULL.
func (p *parser) isTest(t token, left expr) (expr, error) {
	null := &constExpr{p: t.p, v: value{}}
	switch t.text {
	case "isnull":
		return &callExpr{p: t.p, fn: fIs, args: []expr{left, null}}, nil
	case "notnull":
		return &callExpr{p: t.p, fn: fNot, args: []expr{&callExpr{p: t.p, fn: fIs, args: []expr{left, null}}}}, nil
	}
	not := false
	w := p.next()
	if w.k == tIdent && w.text == "not" {
		not = true
		w = p.next()
	}
	var v value
	switch {
	case w.k == tIdent && w.text == "null":
	case w.k == tIdent && w.text == "true":
		v = boolValue(true)
	case w.k == tIdent && w.text == "false":
		v = boolValue(false)
	default:
		return nil, p.unexpected(w)
	}
	var e expr = &callExpr{p: t.p, fn: fIs, args: []expr{left, &constExpr{p: w.p, v: v}}}
	if not {
		e = &callExpr{p: t.p, fn: fNot, args: []expr{e}}
	}
	return e, nil
}

func (p *parser) prefix() (expr, error) {
	t := p.next()
	switch t.k {
	case tInt:
		return &constExpr{p: t.p, v: intValue(t.i)}, nil
	case tDouble:
		return &constExpr{p: t.p, v: doubleValue(t.d)}, nil
	case tVar:
		return &varExpr{p: t.p, name: t.text}, nil
	case tOp:
		switch t.text {
		case "(":
			e, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if c := p.next(); c.k != tOp || c.text != ")" {
				return nil, p.unexpected(c)
			}
			return e, nil
		case "+":
			return p.expr(precUnary)
		case "-":
			// -x is 0 - x, as in pgbench (so -2.5 is a double, -1 an int).
			e, err := p.expr(precUnary)
			if err != nil {
				return nil, err
			}
			return &callExpr{p: t.p, fn: fSub, args: []expr{&constExpr{p: t.p, v: intValue(0)}, e}}, nil
		case "~":
			// ~x is x # -1; pgbench gives it the bitwise operators' precedence.
			e, err := p.expr(precBit)
			if err != nil {
				return nil, err
			}
			return &callExpr{p: t.p, fn: fBitXor, args: []expr{&constExpr{p: t.p, v: intValue(-1)}, e}}, nil
		}
	case tIdent:
		switch t.text {
		case "null":
			return &constExpr{p: t.p, v: value{}}, nil
		case "true", "false":
			return &constExpr{p: t.p, v: boolValue(t.text == "true")}, nil
		case "not":
			e, err := p.expr(precNot - 1) // right-associative
			if err != nil {
				return nil, err
			}
			return &callExpr{p: t.p, fn: fNot, args: []expr{e}}, nil
		case "case":
			return p.caseExpr(t)
		}
		return p.call(t)
	}
	return nil, p.unexpected(t)
}

// call parses a function call; t is its name.
func (p *parser) call(t token) (expr, error) {
	f, ok := functions[t.text]
	if t.text == "permute" || t.text == "debug" {
		return nil, p.errAt(t, "function %s is not supported by replab", t.text)
	}
	if !ok {
		return nil, p.errAt(t, "unexpected function name %q", t.text)
	}
	if o := p.next(); o.k != tOp || o.text != "(" {
		return nil, p.unexpected(o)
	}
	var args []expr
	if c := p.peek(); c.k == tOp && c.text == ")" {
		p.next()
	} else {
		for {
			a, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			c := p.next()
			if c.k == tOp && c.text == ")" {
				break
			}
			if c.k != tOp || c.text != "," {
				return nil, p.unexpected(c)
			}
		}
	}
	n := len(args)
	bad := false
	switch f.nargs {
	case -1:
		bad = n < 1
	case -2:
		bad = n < 1 || n > 2
		if n == 1 {
			args = append(args, &varExpr{p: t.p, name: "default_seed"})
		}
	default:
		bad = n != f.nargs
	}
	if bad {
		return nil, p.errAt(t, "unexpected number of arguments (%d) for %s", n, t.text)
	}
	return &callExpr{p: t.p, fn: f.f, args: args}, nil
}

// caseExpr parses CASE WHEN c THEN v … [ELSE v] END into fCase's
// arguments: c1, v1, c2, v2, …, else.
func (p *parser) caseExpr(t token) (expr, error) {
	var args []expr
	for {
		w := p.next()
		if w.k == tIdent && w.text == "when" {
			c, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if th := p.next(); th.k != tIdent || th.text != "then" {
				return nil, p.unexpected(th)
			}
			v, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			args = append(args, c, v)
			continue
		}
		if len(args) == 0 {
			return nil, p.unexpected(w)
		}
		var els expr = &constExpr{p: w.p, v: value{}}
		if w.k == tIdent && w.text == "else" {
			e, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			els = e
			w = p.next()
		}
		if w.k != tIdent || w.text != "end" {
			return nil, p.unexpected(w)
		}
		return &callExpr{p: t.p, fn: fCase, args: append(args, els)}, nil
	}
}

// vars calls f for every variable e reads.
func vars(e expr, f func(*varExpr)) {
	switch x := e.(type) {
	case *varExpr:
		f(x)
	case *callExpr:
		for _, a := range x.args {
			vars(a, f)
		}
	}
}

// String renders e in a fully parenthesised form, for golden tests.
func exprString(e expr) string {
	switch x := e.(type) {
	case *constExpr:
		return x.v.String()
	case *varExpr:
		return ":" + x.name
	case *callExpr:
		a := make([]string, len(x.args))
		for i, arg := range x.args {
			a[i] = exprString(arg)
		}
		return fnNames[x.fn] + "(" + strings.Join(a, ", ") + ")"
	}
	return "?"
}

var fnNames = map[fn]string{
	fAdd: "+", fSub: "-", fMul: "*", fDiv: "/", fMod: "%", fEq: "=", fNe: "<>", fLe: "<=", fLt: "<",
	fBitAnd: "&", fBitOr: "|", fBitXor: "#", fShl: "<<", fShr: ">>", fAnd: "and", fOr: "or", fNot: "not",
	fIs: "is", fCase: "case", fAbs: "abs", fLeast: "least", fGreatest: "greatest", fPi: "pi",
	fSqrt: "sqrt", fLn: "ln", fExp: "exp", fPow: "pow", fInt: "int", fDouble: "double",
	fRandom: "random", fRandomGaussian: "random_gaussian", fRandomExponential: "random_exponential",
	fRandomZipfian: "random_zipfian", fHashMurmur2: "hash_murmur2", fHashFNV1a: "hash_fnv1a",
}

// value is a pgbench value: NULL, a boolean, a 64-bit integer or a double.
type value struct {
	k kind
	b bool
	i int64
	d float64
}

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kDouble
)

func intValue(i int64) value      { return value{k: kInt, i: i} }
func doubleValue(d float64) value { return value{k: kDouble, d: d} }
func boolValue(b bool) value      { return value{k: kBool, b: b} }

func (v value) String() string {
	switch v.k {
	case kBool:
		return strconv.FormatBool(v.b)
	case kInt:
		return strconv.FormatInt(v.i, 10)
	case kDouble:
		// pgbench prints doubles with DBL_DIG (15) significant digits.
		return strconv.FormatFloat(v.d, 'g', 15, 64)
	}
	return "NULL"
}

// arg is v as an SQL parameter.
func (v value) arg() any {
	switch v.k {
	case kBool:
		return v.b
	case kInt:
		return v.i
	case kDouble:
		return v.d
	}
	return nil
}
