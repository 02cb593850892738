package script

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"replab/internal/workload"
)

// executor carries out a script's SQL: statement by statement in a
// transaction, or collected into a pipelined batch.
type executor interface {
	// exec runs a statement and returns the rows it changed (0 for one
	// that only reads).
	exec(ctx context.Context, c *command, args []any) (int64, error)
	// row runs a \gset statement: its one row's columns, as text (nil
	// for NULL).
	row(ctx context.Context, c *command, args []any) ([]string, []*string, error)
	// args is room for a statement's n arguments, and intArg one integer
	// argument: a batch keeps them in its scratch, where the same user's
	// next batch reuses them (workload.Scratch).
	args(n int) []any
	intArg(i int64) any
}

// run executes the script once in e, returning the rows changed.
func (sc *Script) run(ctx context.Context, e *env, x executor) (int64, error) {
	var rows int64
	for pc := 0; pc < len(sc.cmds); {
		c := sc.cmds[pc]
		var err error
		switch c.kind {
		case cSQL:
			var n int64
			if n, err = sc.sql(ctx, e, x, c); err == nil {
				rows += n
			}
			pc++
		case cSet:
			var v value
			if v, err = e.eval(c.e); err == nil {
				e.set(c.variable, v)
			}
			pc++
		case cSleep:
			err = sc.sleep(ctx, e, c)
			pc++
		case cIf:
			pc, err = sc.branch(e, pc)
		case cElif, cElse:
			pc = c.end + 1 // the end of a branch that was taken
		case cEndif:
			pc++
		}
		if err != nil {
			return 0, fmt.Errorf("%s:%d: %w", sc.File, c.p.line, err)
		}
	}
	return rows, nil
}

// branch evaluates the conditions of an \if chain from pc's and returns
// the first command of the branch taken (after the \endif if none is).
func (sc *Script) branch(e *env, pc int) (int, error) {
	for {
		c := sc.cmds[pc]
		switch c.kind {
		case cIf, cElif:
			v, err := e.eval(c.e)
			if err != nil {
				return 0, err
			}
			if truth(v) {
				return pc + 1, nil
			}
			pc = c.next
		default: // \else or \endif
			return pc + 1, nil
		}
	}
}

func (sc *Script) sql(ctx context.Context, e *env, x executor, c *command) (int64, error) {
	args := x.args(len(c.params))
	for i, n := range c.params {
		v := e.vars[n]
		if v == nil {
			return 0, runErr("undefined variable %q", n)
		}
		switch {
		case v.str:
			args[i] = v.text // what a query returned, sent as text as pgbench does
		case v.v.k == kInt:
			args[i] = x.intArg(v.v.i)
		default:
			args[i] = v.v.arg()
		}
	}
	if !c.gset {
		return x.exec(ctx, c, args)
	}
	cols, vals, err := x.row(ctx, c, args)
	if err != nil {
		return 0, err
	}
	for i, col := range cols {
		if vals[i] == nil {
			e.vars[c.prefix+col] = &variable{ok: true} // NULL
			continue
		}
		e.vars[c.prefix+col] = &variable{text: *vals[i], str: true}
	}
	return 0, nil
}

func (sc *Script) sleep(ctx context.Context, e *env, c *command) error {
	n := c.sleepN
	if c.sleepVar != "" {
		v, err := e.lookup(c.sleepVar)
		if err != nil {
			return err
		}
		if n, err = toInt(v); err != nil {
			return err
		}
	}
	if n <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(n) * c.unit)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// txExec runs statements in the driver's transaction.
type txExec struct{ tx *workload.Tx }

func (x txExec) exec(ctx context.Context, c *command, args []any) (int64, error) {
	res, err := x.tx.Exec(ctx, c.name, args...)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", c.name, err)
	}
	if !c.write {
		return 0, nil
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, nil // a statement without a count (DDL) changed no rows we can count
	}
	return n, nil
}

func (x txExec) row(ctx context.Context, c *command, args []any) ([]string, []*string, error) {
	rs, err := x.tx.Query(ctx, c.name, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.name, err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, nil, err
	}
	n := 0
	vals := make([]*string, len(cols))
	for rs.Next() {
		n++
		if n > 1 {
			continue
		}
		ns := make([]sql.NullString, len(cols))
		dst := make([]any, len(cols))
		for i := range ns {
			dst[i] = &ns[i]
		}
		if err := rs.Scan(dst...); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.name, err)
		}
		for i, s := range ns {
			if s.Valid {
				vals[i] = &s.String
			}
		}
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.name, err)
	}
	if n != 1 {
		return nil, nil, runErr("\\gset: expected one row, got %d", n)
	}
	return cols, vals, nil
}

func (txExec) args(n int) []any   { return make([]any, n) }
func (txExec) intArg(i int64) any { return i }

// batchExec collects the calls of a pipelined run. It is kept in the
// user's scratch and reset for each batch: its calls, their argument
// lists and integer arguments (passed as pointers, which the pipe sends
// as what they point to) are then reused instead of allocated.
type batchExec struct {
	calls []workload.Call
	all   []any   // the calls' arguments
	ints  []int64 // the integers they point to
}

func (x *batchExec) reset() {
	x.calls, x.all, x.ints = x.calls[:0], x.all[:0], x.ints[:0]
}

// args and intArg take from the end of their arrays; when one is full a
// larger one replaces it, and what was handed out of the old one stays
// valid (it is not written again).
func (x *batchExec) args(n int) []any {
	if len(x.all)+n > cap(x.all) {
		x.all = make([]any, 0, max(2*cap(x.all), n, 8))
	}
	at := len(x.all)
	x.all = x.all[:at+n]
	return x.all[at : at+n : at+n]
}

func (x *batchExec) intArg(i int64) any {
	if len(x.ints) == cap(x.ints) {
		x.ints = make([]int64, 0, max(2*cap(x.ints), 8))
	}
	x.ints = append(x.ints, i)
	return &x.ints[len(x.ints)-1]
}

func (x *batchExec) exec(_ context.Context, c *command, args []any) (int64, error) {
	x.calls = append(x.calls, workload.Call{Stmt: c.name, Args: args, Rows: -1})
	return 0, nil
}

func (x *batchExec) row(context.Context, *command, []any) ([]string, []*string, error) {
	return nil, nil, runErr("\\gset in a pipelined script") // Parse makes such scripts not Batchable
}
