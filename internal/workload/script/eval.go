package script

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// variable is one of a user's variables: a value set by \set, or the text
// a query returned (\gset), turned into a value when an expression reads
// it, as pgbench does.
type variable struct {
	v    value
	text string
	str  bool // set from text; v is valid once parsed
	ok   bool // parsed (or not from text)
}

// env is what an expression is evaluated in: a user's variables and
// random source.
type env struct {
	vars  map[string]*variable
	r     *rand.Rand
	stack []value // the arguments of the calls being evaluated (call)
}

// errRun is an error of one run of a script (a transaction's error).
var errRun = errors.New("script error")

func runErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errRun, fmt.Sprintf(format, args...))
}

// set gives name the value v, in its variable when it has one (a \set
// each transaction would otherwise allocate one; nothing keeps a
// variable past the command that reads it).
func (e *env) set(name string, v value) {
	if old := e.vars[name]; old != nil {
		*old = variable{v: v, ok: true}
		return
	}
	e.vars[name] = &variable{v: v, ok: true}
}

func (e *env) lookup(name string) (value, error) {
	v := e.vars[name]
	if v == nil {
		return value{}, runErr("undefined variable %q", name)
	}
	if !v.ok {
		pv, err := parseVariable(v.text)
		if err != nil {
			return value{}, runErr("malformed variable %q value: %q", name, v.text)
		}
		v.v, v.ok = pv, true
	}
	return v.v, nil
}

// parseVariable reads text as pgbench reads a variable's string value:
// null, a boolean word, an integer or a double.
func parseVariable(s string) (value, error) {
	t := strings.TrimSpace(s)
	l := strings.ToLower(t)
	switch {
	case l == "null":
		return value{}, nil
	case l != "" && (strings.HasPrefix("true", l) || strings.HasPrefix("yes", l) || len(l) >= 2 && l == "on"):
		return boolValue(true), nil
	case l != "" && (strings.HasPrefix("false", l) || strings.HasPrefix("no", l) || len(l) >= 2 && strings.HasPrefix("off", l)):
		return boolValue(false), nil
	}
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return intValue(i), nil
	}
	if d, err := strconv.ParseFloat(t, 64); err == nil {
		return doubleValue(d), nil
	}
	return value{}, fmt.Errorf("not a value: %q", s)
}

func (e *env) eval(x expr) (value, error) {
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *varExpr:
		return e.lookup(x.name)
	case *callExpr:
		return e.call(x)
	}
	return value{}, runErr("unknown expression")
}

// truth is a value's truth for \if and CASE: NULL is false.
func truth(v value) bool {
	switch v.k {
	case kBool:
		return v.b
	case kInt:
		return v.i != 0
	case kDouble:
		return v.d != 0
	}
	return false
}

func toBool(v value) (bool, error) {
	if v.k == kNull {
		return false, runErr("cannot coerce NULL to boolean")
	}
	return truth(v), nil
}

func toInt(v value) (int64, error) {
	switch v.k {
	case kInt:
		return v.i, nil
	case kDouble:
		// pgbench rounds (rint: half to even); out of range is an error.
		d := math.RoundToEven(v.d)
		if math.IsNaN(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0 {
			return 0, runErr("double to int overflow for %g", v.d)
		}
		return int64(d), nil
	case kBool:
		return 0, runErr("cannot coerce boolean to int")
	}
	return 0, runErr("cannot coerce NULL to int")
}

func toDouble(v value) (float64, error) {
	switch v.k {
	case kInt:
		return float64(v.i), nil
	case kDouble:
		return v.d, nil
	case kBool:
		return 0, runErr("cannot coerce boolean to double")
	}
	return 0, runErr("cannot coerce NULL to double")
}

// call evaluates a function: AND, OR and CASE lazily, the others after
// their arguments, NULL if one is NULL (but IS).
func (e *env) call(x *callExpr) (value, error) {
	switch x.fn {
	case fAnd, fOr:
		a, err := e.eval(x.args[0])
		if err != nil || a.k == kNull {
			return value{}, err
		}
		ba, err := toBool(a)
		if err != nil {
			return value{}, err
		}
		if ba == (x.fn == fOr) {
			return boolValue(ba), nil
		}
		b, err := e.eval(x.args[1])
		if err != nil || b.k == kNull {
			return value{}, err
		}
		bb, err := toBool(b)
		return boolValue(bb), err
	case fCase:
		n := len(x.args)
		for i := 0; i+1 < n; i += 2 {
			c, err := e.eval(x.args[i])
			if err != nil {
				return value{}, err
			}
			if truth(c) {
				return e.eval(x.args[i+1])
			}
		}
		return e.eval(x.args[n-1])
	}
	// The arguments go on the env's stack, not a slice of their own: a
	// batch's \set would otherwise allocate one per call each transaction.
	// Nested calls push above them and pop back before returning.
	base := len(e.stack)
	defer func() { e.stack = e.stack[:base] }()
	null := false
	for _, a := range x.args {
		v, err := e.eval(a)
		if err != nil {
			return value{}, err
		}
		e.stack = append(e.stack, v)
		null = null || v.k == kNull
	}
	if null && x.fn != fIs {
		return value{}, nil
	}
	return e.apply(x.fn, e.stack[base:])
}

func (e *env) apply(f fn, a []value) (value, error) {
	switch f {
	case fAdd, fSub, fMul, fDiv, fMod, fEq, fNe, fLe, fLt:
		return arith(f, a[0], a[1])
	case fBitAnd, fBitOr, fBitXor, fShl, fShr:
		l, err := toInt(a[0])
		if err != nil {
			return value{}, err
		}
		r, err := toInt(a[1])
		if err != nil {
			return value{}, err
		}
		switch f {
		case fBitAnd:
			return intValue(l & r), nil
		case fBitOr:
			return intValue(l | r), nil
		case fBitXor:
			return intValue(l ^ r), nil
		case fShl:
			return intValue(l << uint64(r&63)), nil
		}
		return intValue(l >> uint64(r&63)), nil
	case fNot:
		b, err := toBool(a[0])
		return boolValue(!b), err
	case fIs:
		// pgbench's IS compares type and value: x IS NULL, x IS TRUE.
		return boolValue(a[0].k == a[1].k && (a[0].k != kBool || a[0].b == a[1].b)), nil
	case fPi:
		return doubleValue(math.Pi), nil
	case fAbs:
		if a[0].k == kInt {
			if a[0].i < 0 {
				return intValue(-a[0].i), nil
			}
			return a[0], nil
		}
		d, err := toDouble(a[0])
		return doubleValue(math.Abs(d)), err
	case fDouble, fSqrt, fLn, fExp:
		d, err := toDouble(a[0])
		if err != nil {
			return value{}, err
		}
		switch f {
		case fSqrt:
			d = math.Sqrt(d)
		case fLn:
			d = math.Log(d)
		case fExp:
			d = math.Exp(d)
		}
		return doubleValue(d), nil
	case fInt:
		i, err := toInt(a[0])
		return intValue(i), err
	case fPow:
		l, err := toDouble(a[0])
		if err != nil {
			return value{}, err
		}
		r, err := toDouble(a[1])
		return doubleValue(math.Pow(l, r)), err
	case fLeast, fGreatest:
		return extremum(f == fLeast, a)
	case fRandom, fRandomGaussian, fRandomExponential, fRandomZipfian:
		return e.random(f, a)
	case fHashMurmur2, fHashFNV1a:
		v, err := toInt(a[0])
		if err != nil {
			return value{}, err
		}
		seed, err := toInt(a[1])
		if err != nil {
			return value{}, err
		}
		if f == fHashMurmur2 {
			return intValue(hashMurmur2(v, uint64(seed))), nil
		}
		return intValue(hashFNV1a(v, uint64(seed))), nil
	}
	return value{}, runErr("unknown function %d", f)
}

// arith is pgbench's overloaded arithmetic and comparison: double if
// either side is (but %), else 64-bit integers with overflow errors,
// division truncating toward zero and the remainder taking the
// dividend's sign (C's / and %).
func arith(f fn, l, r value) (value, error) {
	if (l.k == kDouble || r.k == kDouble) && f != fMod {
		ld, err := toDouble(l)
		if err != nil {
			return value{}, err
		}
		rd, err := toDouble(r)
		if err != nil {
			return value{}, err
		}
		switch f {
		case fAdd:
			return doubleValue(ld + rd), nil
		case fSub:
			return doubleValue(ld - rd), nil
		case fMul:
			return doubleValue(ld * rd), nil
		case fDiv:
			return doubleValue(ld / rd), nil
		case fEq:
			return boolValue(ld == rd), nil
		case fNe:
			return boolValue(ld != rd), nil
		case fLe:
			return boolValue(ld <= rd), nil
		}
		return boolValue(ld < rd), nil
	}
	li, err := toInt(l)
	if err != nil {
		return value{}, err
	}
	ri, err := toInt(r)
	if err != nil {
		return value{}, err
	}
	switch f {
	case fAdd:
		s := li + ri
		if (s > li) != (ri > 0) {
			return value{}, runErr("bigint add out of range")
		}
		return intValue(s), nil
	case fSub:
		s := li - ri
		if (s < li) != (ri > 0) {
			return value{}, runErr("bigint sub out of range")
		}
		return intValue(s), nil
	case fMul:
		if li != 0 && ri != 0 {
			p := li * ri
			if p/ri != li || (li == -1 && ri == math.MinInt64) || (ri == -1 && li == math.MinInt64) {
				return value{}, runErr("bigint mul out of range")
			}
			return intValue(p), nil
		}
		return intValue(0), nil
	case fEq:
		return boolValue(li == ri), nil
	case fNe:
		return boolValue(li != ri), nil
	case fLe:
		return boolValue(li <= ri), nil
	case fLt:
		return boolValue(li < ri), nil
	}
	if ri == 0 {
		return value{}, runErr("division by zero")
	}
	if ri == -1 {
		if f == fMod {
			return intValue(0), nil
		}
		if li == math.MinInt64 {
			return value{}, runErr("bigint div out of range")
		}
		return intValue(-li), nil
	}
	if f == fDiv {
		return intValue(li / ri), nil
	}
	return intValue(li % ri), nil
}

func extremum(least bool, a []value) (value, error) {
	double := false
	for _, v := range a {
		double = double || v.k == kDouble
	}
	if double {
		var m float64
		for i, v := range a {
			d, err := toDouble(v)
			if err != nil {
				return value{}, err
			}
			if i == 0 || least && d < m || !least && d > m {
				m = d
			}
		}
		return doubleValue(m), nil
	}
	var m int64
	for i, v := range a {
		n, err := toInt(v)
		if err != nil {
			return value{}, err
		}
		if i == 0 || least && n < m || !least && n > m {
			m = n
		}
	}
	return intValue(m), nil
}

// pgbench's bounds on the distributions' parameters.
const (
	minGaussianParam = 2.0
	minZipfianParam  = 1.001
	maxZipfianParam  = 1000.0
)

func (e *env) random(f fn, a []value) (value, error) {
	lo, err := toInt(a[0])
	if err != nil {
		return value{}, err
	}
	hi, err := toInt(a[1])
	if err != nil {
		return value{}, err
	}
	if lo > hi {
		return value{}, runErr("empty range given to random")
	}
	if d := hi - lo; d < 0 || d == math.MaxInt64 {
		return value{}, runErr("random range is too large")
	}
	if f == fRandom {
		return intValue(uniform(e.r, lo, hi)), nil
	}
	p, err := toDouble(a[2])
	if err != nil {
		return value{}, err
	}
	switch f {
	case fRandomGaussian:
		if p < minGaussianParam {
			return value{}, runErr("gaussian parameter must be at least %f (not %f)", minGaussianParam, p)
		}
		return intValue(gaussian(e.r, lo, hi, p)), nil
	case fRandomZipfian:
		if p < minZipfianParam || p > maxZipfianParam {
			return value{}, runErr("zipfian parameter must be in range [%.3f, %.0f] (not %f)", minZipfianParam, maxZipfianParam, p)
		}
		return intValue(zipfian(e.r, lo, hi, p)), nil
	}
	if p <= 0 {
		return value{}, runErr("exponential parameter must be greater than zero (not %f)", p)
	}
	return intValue(exponential(e.r, lo, hi, p)), nil
}
