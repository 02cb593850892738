package script

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func exprSrc(text string) *src {
	s := &src{file: "t.sql", text: text}
	for i := 0; i <= len(text); i++ {
		s.at = append(s.at, pos{1, 6 + i}) // as after "\set x "
	}
	return s
}

func evalText(t *testing.T, text string, vars map[string]*variable) (value, error) {
	t.Helper()
	e, err := parseExpr(exprSrc(text))
	if err != nil {
		return value{}, err
	}
	if vars == nil {
		vars = map[string]*variable{}
	}
	return (&env{vars: vars, r: rand.New(rand.NewPCG(1, 2))}).eval(e)
}

// TestExpressionsFollowPgbench pins the expression language to pgbench
// 15's documented behaviour: integer arithmetic truncates toward zero and
// % takes the dividend's sign (C), a double operand makes a double, NULL
// propagates, comparisons give booleans.
func TestExpressionsFollowPgbench(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"7 / 2", "3"},
		{"-7 / 2", "-3"},
		{"7 / -2", "-3"},
		{"7 % 3", "1"},
		{"-7 % 3", "-1"},
		{"7 % -3", "1"},
		{"5 % -1", "0"},
		{"-9223372036854775807 - 1", "-9223372036854775808"},
		{"7.0 / 2", "3.5"},
		{"7 / 2.0", "3.5"},
		{"1 + 2 * 3", "7"},
		{"(1 + 2) * 3", "9"},
		{"-2 * 3", "-6"},
		{"2 - 3 - 4", "-5"},
		{"1 < 2", "true"},
		{"2 <= 1", "false"},
		{"3 > 2 and 2 >= 2", "true"},
		{"1 = 1.0", "true"},
		{"1 <> 1", "false"},
		{"1 != 2", "true"},
		{"not 1 = 2", "true"},
		{"false or true and false", "false"},
		{"null + 1", "NULL"},
		{"null is null", "true"},
		{"1 is not null", "true"},
		{"1 isnull", "false"},
		{"true is true", "true"},
		{"5 & 3", "1"},
		{"5 | 3", "7"},
		{"5 # 3", "6"},
		{"1 << 4", "16"},
		{"-16 >> 2", "-4"},
		{"~0", "-1"},
		{"abs(-5)", "5"},
		{"abs(-2.5)", "2.5"},
		{"least(3, 1, 2)", "1"},
		{"greatest(3, 1.5, 2)", "3"},
		{"int(5.9)", "6"}, // rounded, as pgbench's rint
		{"int(-5.9)", "-6"},
		{"int(2.5)", "2"},
		{"int(3.5)", "4"},
		{"7.5 % 2", "0"}, // % takes integers: 8 % 2
		{"double(5)", "5"},
		{"sqrt(16)", "4"},
		{"pi()", "3.14159265358979"},
		{"pow(2, 10)", "1024"},
		{"power(2, 0.5) * power(2, 0.5)", "2"},
		{"ln(exp(1))", "1"},
		{"case when 1 > 2 then 10 when 2 > 1 then 20 else 30 end", "20"},
		{"case when false then 1 end", "NULL"},
		{"hash(10, 5432)", "-5817877081768721676"},
		{"hash_fnv1a(10, 5432)", "-7793829335365542153"},
		{"random(5, 5)", "5"},
		{":x * 2", "84"},
		{":s + 1", "42"},
		{":f / 2", "0.75"},
	} {
		t.Run(c.expr, func(t *testing.T) {
			vars := map[string]*variable{
				"x": {v: intValue(42), ok: true},
				"s": {text: "41", str: true},
				"f": {text: "1.5", str: true},
			}
			v, err := evalText(t, c.expr, vars)
			if err != nil {
				t.Fatalf("%s: %v", c.expr, err)
			}
			if got := v.String(); got != c.want {
				t.Errorf("%s = %s, want %s", c.expr, got, c.want)
			}
		})
	}
}

// TestExpressionErrors: run-time errors are errors of the transaction,
// never a crash; syntax errors point at file:line:column.
func TestExpressionErrors(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"1 / 0", "division by zero"},
		{"1 % 0", "division by zero"},
		{"(-9223372036854775807 - 1) / -1", "bigint div out of range"},
		{"9223372036854775807 + 1", "bigint add out of range"},
		{"-9223372036854775807 - 2", "bigint sub out of range"},
		{"4611686018427387904 * 2", "bigint mul out of range"},
		{"random(5, 4)", "empty range given to random"},
		{"random_gaussian(1, 10, 1.5)", "gaussian parameter must be at least 2.000000 (not 1.500000)"},
		{"random_exponential(1, 10, 0)", "exponential parameter must be greater than zero"},
		{"random_zipfian(1, 10, 1)", "zipfian parameter must be in range [1.001, 1000]"},
		{"int(1e30)", "double to int overflow"},
		{"true + 1", "cannot coerce boolean to int"},
		{"(1 < 2) = true", "cannot coerce boolean to int"}, // as pgbench 15 says
		{":nope + 1", `undefined variable "nope"`},
		{":bad + 1", `malformed variable "bad" value: "x1"`},
		{"not null", ""}, // NULL, not an error
	} {
		t.Run(c.expr, func(t *testing.T) {
			_, err := evalText(t, c.expr, map[string]*variable{"bad": {text: "x1", str: true}})
			if c.want == "" {
				if err != nil {
					t.Fatalf("%s: %v", c.expr, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errRun) {
				t.Errorf("%s: error %v, want %q", c.expr, err, c.want)
			}
		})
	}
	for _, c := range []struct{ expr, want string }{
		{"1 +", "t.sql:1:9: syntax error: unexpected end of expression"},
		{"1 + * 2", "t.sql:1:10: syntax error at \"*\""},
		{"foo(1)", `t.sql:1:6: unexpected function name "foo"`},
		{"random(1)", "t.sql:1:6: unexpected number of arguments (1) for random"},
		{"least()", "t.sql:1:6: unexpected number of arguments (0) for least"},
		{"1 < 2 < 3", "t.sql:1:12: syntax error at \"<\""},
		{"(1 + 2", "t.sql:1:12: syntax error: unexpected end of expression"},
		{"1 $ 2", "t.sql:1:8: syntax error at \"$\""},
		{"99999999999999999999", "t.sql:1:6: bigint constant overflow"},
		{"permute(1, 10)", "t.sql:1:6: function permute is not supported by replab"},
		{"", "t.sql:1:6: missing expression"},
	} {
		t.Run(c.expr, func(t *testing.T) {
			_, err := evalText(t, c.expr, nil)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("%q: error %v, want %q", c.expr, err, c.want)
			}
		})
	}
}

// TestRandomRangesAndMeans draws from each distribution with a fixed seed:
// every value lies in [lo, hi] (both reachable for random), and the mean
// is the one pgbench's documented probabilities give, within 1%.
func TestRandomRangesAndMeans(t *testing.T) {
	const n = 200_000
	const lo, hi = 1, 10
	exact := func(p func(k int) float64) float64 {
		sum, norm := 0.0, 0.0
		for k := lo; k <= hi; k++ {
			sum += float64(k) * p(k)
			norm += p(k)
		}
		return sum / norm
	}
	// pgbench's documentation: exponential P(i) = f(i) - f(i+1) with
	// f(x) = exp(-p (x-min)/(max-min+1)) / (1 - exp(-p)); gaussian P(i)
	// = (phi(2p (i-mu+0.5)/(max-min+1)) - phi(2p (i-mu-0.5)/(max-min+1))) /
	// (2 phi(p) - 1) with mu = (min+max)/2; zipfian P(k) ∝ 1/k^s.
	width := float64(hi - lo + 1)
	expF := func(p float64) func(int) float64 {
		f := func(x float64) float64 { return math.Exp(-p*(x-lo)/width) / (1 - math.Exp(-p)) }
		return func(k int) float64 { return f(float64(k)) - f(float64(k+1)) }
	}
	phi := func(x float64) float64 { return 0.5 * (1 + math.Erf(x/math.Sqrt2)) }
	gauss := func(p float64) func(int) float64 {
		mu := float64(lo+hi) / 2
		return func(k int) float64 {
			i := float64(k)
			return phi(2*p*(i-mu+0.5)/width) - phi(2*p*(i-mu-0.5)/width)
		}
	}
	zipf := func(s float64) func(int) float64 { return func(k int) float64 { return math.Pow(float64(k-lo+1), -s) } }
	for _, c := range []struct {
		expr string
		mean float64
	}{
		{"random(1, 10)", 5.5},
		{"random_exponential(1, 10, 2.0)", exact(expF(2.0))},
		{"random_exponential(1, 10, 5.0)", exact(expF(5.0))},
		{"random_gaussian(1, 10, 2.5)", exact(gauss(2.5))},
		{"random_zipfian(1, 10, 1.5)", exact(zipf(1.5))},
		{"random_zipfian(1, 10, 3)", exact(zipf(3))},
	} {
		t.Run(c.expr, func(t *testing.T) {
			e, err := parseExpr(exprSrc(c.expr))
			if err != nil {
				t.Fatal(err)
			}
			en := &env{vars: map[string]*variable{}, r: rand.New(rand.NewPCG(7, 11))}
			seen := map[int64]bool{}
			sum := 0.0
			for range n {
				v, err := en.eval(e)
				if err != nil {
					t.Fatal(err)
				}
				if v.k != kInt || v.i < lo || v.i > hi {
					t.Fatalf("%s gave %s", c.expr, v)
				}
				seen[v.i] = true
				sum += float64(v.i)
			}
			mean := sum / n
			if math.Abs(mean-c.mean) > 0.01*c.mean {
				t.Errorf("%s: mean %.4f, want %.4f ± 1%%", c.expr, mean, c.mean)
			}
			if !seen[lo] || !seen[hi] {
				t.Errorf("%s never gave %d or %d", c.expr, lo, hi)
			}
		})
	}
}

// TestExpressionPrecedence pins how expressions group, with pgbench's
// precedences: OR < AND < NOT < IS < comparisons < bitwise (and prefix ~)
// < + - < * / % < prefix + -.
func TestExpressionPrecedence(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"1 + 2 * 3 - 4", "-(+(1, *(2, 3)), 4)"},
		{"-2 * 3", "*(-(0, 2), 3)"},
		{"~1 + 2", "#(-1, +(1, 2))"},
		{"1 | 2 + 3", "|(1, +(2, 3))"},
		{"(1 < 2) = true", "=(<(1, 2), true)"},
		{"not 1 = 2 and 3 > 2 or false", "or(and(not(=(1, 2)), <(2, 3)), false)"},
		{":a is not null", "not(is(:a, NULL))"},
		{"hash(:a)", "hash_murmur2(:a, :default_seed)"},
		{"CASE WHEN :a > 1 THEN 2 END", "case(<(1, :a), 2, NULL)"},
		{"Random(1, 2)", "random(1, 2)"},
		{"1e3 + .5", "+(1000, 0.5)"},
	} {
		e, err := parseExpr(exprSrc(c.expr))
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := exprString(e); got != c.want {
			t.Errorf("%s parsed as %s, want %s", c.expr, got, c.want)
		}
	}
}
