package script

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"replab/internal/workload"
)

// recorder is an executor that records every statement with its
// arguments; a \gset statement returns cols and vals.
type recorder struct {
	calls []string
	cols  []string
	vals  []*string
}

func (x *recorder) args(n int) []any   { return make([]any, n) }
func (x *recorder) intArg(i int64) any { return i }

// values is args with the integers a batch passes as pointers read.
func values(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if p, ok := a.(*int64); ok {
			a = *p
		}
		out[i] = a
	}
	return out
}

func (x *recorder) exec(_ context.Context, c *command, args []any) (int64, error) {
	x.calls = append(x.calls, fmt.Sprintf("%s%v", c.name, args))
	if c.write {
		return 1, nil
	}
	return 0, nil
}

func (x *recorder) row(_ context.Context, c *command, args []any) ([]string, []*string, error) {
	x.calls = append(x.calls, fmt.Sprintf("%s%v gset", c.name, args))
	return x.cols, x.vals, nil
}

func mustParse(t *testing.T, name, text string) *Script {
	t.Helper()
	sc, err := Parse(name, text, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckVariables([]*Script{sc}); err != nil {
		t.Fatal(err)
	}
	return sc
}

func newEnv(seed uint64, vars map[string]*variable) *env {
	v := map[string]*variable{"scale": {v: intValue(1), ok: true}, "client_id": {v: intValue(0), ok: true}}
	for k, x := range vars {
		v[k] = x
	}
	return &env{vars: v, r: rand.New(rand.NewPCG(seed, 1))}
}

// TestBatchDrawsAsRunDoes: the pipelined form of a built-in script sends
// the statements Run sends, with the same arguments, from the same seed;
// and the arguments are in their ranges.
func TestBatchDrawsAsRunDoes(t *testing.T) {
	b, err := os.ReadFile("testdata/builtin/tpcb-like.sql")
	if err != nil {
		t.Fatal(err)
	}
	sc := mustParse(t, "tpcb-like.sql", string(b))
	rec := &recorder{}
	rows, err := sc.run(context.Background(), newEnv(3, nil), rec)
	if err != nil || rows != 4 {
		t.Fatalf("run: %d rows, %v", rows, err)
	}
	bx := &batchExec{}
	if _, err := sc.run(context.Background(), newEnv(3, nil), bx); err != nil {
		t.Fatal(err)
	}
	var batched []string
	for _, c := range bx.calls {
		batched = append(batched, fmt.Sprintf("%s%v", c.Stmt, values(c.Args)))
		if c.Rows != -1 {
			t.Errorf("%s: rows %d, want -1 (any)", c.Stmt, c.Rows)
		}
	}
	if !reflect.DeepEqual(rec.calls, batched) {
		t.Errorf("run sent %v\nbatch sent %v", rec.calls, batched)
	}
	if len(bx.calls) != 5 {
		t.Fatalf("%d calls, want 5", len(bx.calls))
	}
	aid := *bx.calls[0].Args[1].(*int64)
	delta := *bx.calls[0].Args[0].(*int64)
	if aid < 1 || aid > 100000 || delta < -5000 || delta > 5000 {
		t.Errorf("aid %d, delta %d out of range", aid, delta)
	}
}

// TestIfBranches: \if, \elif and \else take the branch pgbench would, for
// every value of the condition's variable.
func TestIfBranches(t *testing.T) {
	b, err := os.ReadFile("testdata/parse/if.sql")
	if err != nil {
		t.Fatal(err)
	}
	sc := mustParse(t, "if.sql", string(b))
	for n := int64(1); n <= 10; n++ {
		want := "q4"
		switch {
		case n < 3:
			want = "q1"
		case n < 7 && n%2 == 0:
			want = "q2"
		case n < 7:
			want = "q3"
		}
		// \set n random(1, 10) is the first command: skip it by running
		// from a script whose first command sets n to a constant.
		cp := *sc
		cp.cmds = append([]*command{}, sc.cmds...)
		cp.cmds[0] = &command{kind: cSet, variable: "n", e: &constExpr{v: intValue(n)}}
		rec := &recorder{}
		if _, err := cp.run(context.Background(), newEnv(1, nil), rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.calls) != 2 || !strings.HasPrefix(rec.calls[0], want+"[") || rec.calls[1] != fmt.Sprintf("q5[%d]", n) {
			t.Errorf("n = %d: %v, want %s then q5", n, rec.calls, want)
		}
	}
}

// TestGsetSetsVariablesAsText: \gset stores a row's columns (with its
// prefix); later statements send them as text, expressions read them as
// numbers, and a NULL column is NULL.
func TestGsetSetsVariablesAsText(t *testing.T) {
	sc := mustParse(t, "g.sql", "SELECT 1 AS a, 2 AS b, NULL AS c \\gset p_\n\\set d :p_a + 10\nUPDATE t SET x = :p_b, y = :d, z = :p_c;\n")
	one, two := "1", "2"
	rec := &recorder{cols: []string{"a", "b", "c"}, vals: []*string{&one, &two, nil}}
	if _, err := sc.run(context.Background(), newEnv(1, nil), rec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"q1[] gset", "q2[2 11 <nil>]"}; !reflect.DeepEqual(rec.calls, want) {
		t.Errorf("calls %v, want %v", rec.calls, want)
	}
}

// TestRunTimeErrorsFailTheTransaction: a division by zero (or a variable
// never set) is an error of that run, with the script's file:line; the
// batched form returns it as the call's Err.
func TestRunTimeErrorsFailTheTransaction(t *testing.T) {
	sc := mustParse(t, "div.sql", "\\set z 0\n\\set x 10 / :z\nSELECT :x;\n")
	_, err := sc.run(context.Background(), newEnv(1, nil), &recorder{})
	if err == nil || err.Error() != "div.sql:2: script error: division by zero" || !errors.Is(err, errRun) {
		t.Errorf("error %v", err)
	}
	w := &Workload{users: map[int]*env{}, txs: []txFile{{name: "div", weight: 1, sc: sc}}}
	types := w.Transactions()
	if len(types) != 1 || types[0].Batch == nil {
		t.Fatalf("types %+v", types)
	}
	calls := types[0].Batch(0, rand.New(rand.NewPCG(1, 1)), nil)
	if len(calls) != 1 || calls[0].Err == nil || !strings.Contains(calls[0].Err.Error(), "division by zero") {
		t.Errorf("batch calls %+v", calls)
	}
}

// TestVariablesAreEachUsersAndOutliveATransaction: a user's counter goes
// on from one run to the next; client_id is the user's number.
func TestVariablesAreEachUsersAndOutliveATransaction(t *testing.T) {
	sc := mustParse(t, "c.sql", "\\set n 0\nSELECT 1;\n")
	sc2 := mustParse(t, "d.sql", "\\set n :n + 1\nSELECT :n, :client_id, :scale;\n")
	w := &Workload{users: map[int]*env{}, scale: 5, txs: []txFile{{name: "c", weight: 0, sc: sc}, {name: "d", weight: 1, sc: sc2}}}
	r := rand.New(rand.NewPCG(1, 1))
	w.env(1, r).vars["n"] = &variable{v: intValue(0), ok: true}
	w.env(2, r).vars["n"] = &variable{v: intValue(100), ok: true}
	b := w.Transactions()[0].Batch
	for range 2 {
		b(1, r, nil)
	}
	got1 := values(b(1, r, nil)[0].Args)
	got2 := values(b(2, r, nil)[0].Args)
	if fmt.Sprint(got1) != "[3 1 5]" || fmt.Sprint(got2) != "[101 2 5]" {
		t.Errorf("user 1 %v, user 2 %v", got1, got2)
	}
}

// TestBatchInScratchAllocatesNothing: pgbench's select-only as a batch
// built in the user's scratch gives what it gives without one (the same
// draws), and, once the scratch has grown, allocates nothing: its \set
// reuses its variable, its call, argument list and integer come from the
// scratch.
func TestBatchInScratchAllocatesNothing(t *testing.T) {
	sc := mustParse(t, "select-only.sql", "\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
	w := &Workload{users: map[int]*env{}, scale: 10, txs: []txFile{{name: "select-only", weight: 1, sc: sc}}}
	b := w.Transactions()[0].Batch
	r1, r2 := rand.New(rand.NewPCG(3, 3)), rand.New(rand.NewPCG(3, 3))
	s := &workload.Scratch{}
	for i := range 20 {
		plain, kept := values(b(1, r1, nil)[0].Args), values(b(2, r2, s)[0].Args)
		if fmt.Sprint(plain) != fmt.Sprint(kept) {
			t.Fatalf("batch %d: %v in a scratch, %v without", i, kept, plain)
		}
	}
	if n := testing.AllocsPerRun(100, func() { b(2, r2, s) }); n != 0 {
		t.Errorf("a batch in a scratch allocates %.0f times, want 0", n)
	}
}
