// Package check is replab's Elle-class history checker: a pure function
// from a history (internal/history) to a verdict. It recovers version
// orders from list-append reads (and what can be inferred for registers),
// builds the dependency graph of committed transactions (ww, wr, rw, plus
// process and real-time order), finds its cycles and the anomalies that
// are not cycles, and names the consistency models the history satisfies
// and violates, each anomaly with a witness a person can follow.
//
// It follows the published ideas — Adya's formalism and Kingsbury &
// Alvaro's "Elle: Inferring Isolation Anomalies from Experimental
// Observations" (VLDB 2020) — and is written from them; docs/consistency.md
// describes what it infers, what it reports and its limits.
package check

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"replab/internal/history"
)

// Options bound the work; the zero value takes the defaults.
type Options struct {
	// MaxOps is the most operations checked: later ones (in the file's
	// order) only name the writers of values, and Skipped says so.
	MaxOps int
	// MaxMemoryBytes bounds the checker's estimated memory; a history
	// estimated above it is checked in part, as with MaxOps.
	MaxMemoryBytes int64
	// MaxDuration bounds the time; when it runs out the cycle search
	// stops and Skipped says what was left.
	MaxDuration time.Duration
	// SearchSteps bounds the cycle search in one strongly connected
	// component (edges followed, per level).
	SearchSteps int
	// MaxWitnesses is how many witnesses of each class the Result keeps.
	MaxWitnesses int
}

// Defaults.
const (
	DefaultMaxOps         = 2_000_000
	DefaultMaxMemoryBytes = 2 << 30
	DefaultMaxDuration    = 5 * time.Minute
	DefaultSearchSteps    = 20_000_000
	DefaultMaxWitnesses   = 10
)

func (o Options) withDefaults() Options {
	if o.MaxOps <= 0 {
		o.MaxOps = DefaultMaxOps
	}
	if o.MaxMemoryBytes <= 0 {
		o.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = DefaultMaxDuration
	}
	if o.SearchSteps <= 0 {
		o.SearchSteps = DefaultSearchSteps
	}
	if o.MaxWitnesses <= 0 {
		o.MaxWitnesses = DefaultMaxWitnesses
	}
	return o
}

// OpError refuses a history because of one operation: a value appended or
// written twice to a key, a key used as both a list and a register.
type OpError struct {
	Pos   int // position in the ops given to Check
	Index int // the op's index
	Line  int // its line in the file (File sets it), 0 when unknown
	// Msg says what is wrong; "{other}" in it names the other op.
	Msg string
	// OtherIndex and OtherLine name the other op involved, if any
	// (OtherPos ≥ 0).
	OtherPos, OtherIndex, OtherLine int
}

func (e *OpError) Error() string {
	msg := e.Msg
	if e.OtherPos >= 0 {
		msg = strings.ReplaceAll(msg, "{other}", opName(e.OtherIndex, e.OtherLine))
	}
	return opName(e.Index, e.Line) + ": " + msg
}

func opName(index, line int) string {
	if line > 0 {
		return fmt.Sprintf("op %d (line %d)", index, line)
	}
	return fmt.Sprintf("op %d", index)
}

// Check checks a history. It returns an error only for a history it
// refuses (an *OpError): anomalies are in the Result.
func Check(ops []history.Op, opts Options) (*Result, error) {
	c := newChecker(ops, opts.withDefaults())
	if err := c.run(); err != nil {
		return nil, err
	}
	c.res.verdict()
	return c.res, nil
}

// File checks the history file at path (a history.jsonl). A last line cut
// short by a crash is noted in the Result (HistoryCutShort) and the rest
// is checked; an error names the file and line.
func File(path string, opts Options) (*Result, error) {
	r, err := history.Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var ops []history.Op
	var lines []int
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		ops = append(ops, op)
		lines = append(lines, r.Line())
	}
	res, err := Check(ops, opts)
	var oe *OpError
	if errors.As(err, &oe) && oe.Pos < len(lines) {
		oe.Line = lines[oe.Pos]
		if oe.OtherPos >= 0 && oe.OtherPos < len(lines) {
			oe.OtherLine = lines[oe.OtherPos]
		}
		return nil, fmt.Errorf("check %s: %w", path, oe)
	}
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	if cut := r.CutShort(); cut != nil {
		res.HistoryCutShort = &CutShort{AfterOps: cut.Ops, Line: cut.Line, Message: cut.String()}
		res.skip("the last line (line %d, %d bytes) was cut short: %s", cut.Line, cut.Bytes, "the operation it held is not in the history")
	}
	return res, nil
}
