package spec

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Errors collects the errors of one validation pass over a spec (an
// engine's or a workload's), each pointing at a field's file:line.
type Errors struct {
	s    *Spec
	list ErrorList
}

// NewErrors starts a validation pass over s.
func (s *Spec) NewErrors() *Errors { return &Errors{s: s} }

// Add records an error at field ("scheme.commit", "node.e1.from").
func (e *Errors) Add(field, format string, args ...any) {
	e.list = append(e.list, e.s.Errorf(field, format, args...))
}

// Warn records a warning at field: the spec is valid and runs, but this
// part of it does not do what it seems to (Spec.Warnf).
func (e *Errors) Warn(field, format string, args ...any) {
	e.s.Warnf(field, format, args...)
}

// Join adds the errors of another pass (an ErrorList, or one Error);
// other errors are added without a place.
func (e *Errors) Join(err error) {
	switch x := err.(type) {
	case nil:
	case ErrorList:
		e.list = append(e.list, x...)
	case *Error:
		e.list = append(e.list, x)
	default:
		e.list = append(e.list, &Error{File: e.s.name, Msg: err.Error()})
	}
}

// Err returns the errors sorted by line, or nil.
func (e *Errors) Err() error {
	if len(e.list) == 0 {
		return nil
	}
	return sortErrors(e.list)
}

// Options are the free keys of a table that a plug-in owns: an engine's
// [scheme] keys (all but replication) or a workload's [workload] keys (all
// but kind). Typed accessors read them and record errors pointing at the
// key's file:line; Err adds the keys nobody read, with the list of those
// that were.
type Options struct {
	s      *Spec
	table  string // "scheme" or "workload"
	owner  string // who reads them, for the unknown-key message: "engine postgres"
	values map[string]any
	used   map[string]bool
	errs   *Errors
}

// SchemeOptions are the [scheme] keys besides replication, for the engine
// (owner names it in errors, e.g. "engine postgres").
func (s *Spec) SchemeOptions(owner string) *Options {
	return s.newOptions("scheme", owner, s.Scheme.Options)
}

// WorkloadOptions are the [workload] keys besides kind.
func (s *Spec) WorkloadOptions(owner string) *Options {
	var v map[string]any
	if s.Workload != nil {
		v = s.Workload.Options
	}
	return s.newOptions("workload", owner, v)
}

func (s *Spec) newOptions(table, owner string, values map[string]any) *Options {
	return &Options{s: s, table: table, owner: owner, values: values, used: map[string]bool{}, errs: s.NewErrors()}
}

// Has reports whether key was written (and marks it known).
func (o *Options) Has(key string) bool {
	_, ok := o.raw(key)
	return ok
}

func (o *Options) raw(key string) (any, bool) {
	o.used[key] = true
	v, ok := o.values[key]
	return v, ok
}

func (o *Options) field(key string) string { return o.table + "." + key }

// Errorf records an error about key.
func (o *Options) Errorf(key, format string, args ...any) {
	o.errs.Add(o.field(key), format, args...)
}

// Int reads a whole number in [lo, hi], or def when absent.
func (o *Options) Int(key string, def, lo, hi int64) int64 {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	n, isInt := v.(int64)
	if !isInt || n < lo || n > hi {
		o.Errorf(key, "want a whole number from %d to %d", lo, hi)
		return def
	}
	return n
}

// IntRange reads a range of whole numbers in [lo, hi]: written as one
// number N (the range N to N) or as a list of two, [min, max] with min ≤
// max; defLo, defHi when absent.
func (o *Options) IntRange(key string, defLo, defHi, lo, hi int64) (int64, int64) {
	v, ok := o.raw(key)
	if !ok {
		return defLo, defHi
	}
	bad := func() (int64, int64) {
		o.Errorf(key, "want a whole number from %d to %d, or a range [min, max] of them, like [%d, %d]", lo, hi, lo, min(lo+3, hi))
		return defLo, defHi
	}
	var a, b int64
	switch x := v.(type) {
	case int64:
		a, b = x, x
	case []any:
		if len(x) != 2 {
			return bad()
		}
		var isInt bool
		if a, isInt = x[0].(int64); !isInt {
			return bad()
		}
		if b, isInt = x[1].(int64); !isInt {
			return bad()
		}
	default:
		return bad()
	}
	if a < lo || b > hi || a > b {
		return bad()
	}
	return a, b
}

// String reads a string, one of allowed when any are given, or def when
// absent. Surrounding blanks are trimmed.
func (o *Options) String(key, def string, allowed ...string) string {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	str, isStr := v.(string)
	str = strings.TrimSpace(str)
	switch {
	case !isStr && len(allowed) > 0:
		o.Errorf(key, "want one of %s", quoteAll(allowed))
	case !isStr:
		o.Errorf(key, "want a string")
	case len(allowed) > 0 && !slices.Contains(allowed, str):
		o.Errorf(key, "unknown value %q%s; choose one of %s", str, didYouMean(str, allowed), quoteAll(allowed))
	default:
		return str
	}
	return def
}

// Strings reads a list of strings (each trimmed), or nil when absent. A
// bare string is a list of one.
func (o *Options) Strings(key string) []string {
	v, ok := o.raw(key)
	if !ok {
		return nil
	}
	if str, isStr := v.(string); isStr {
		return []string{strings.TrimSpace(str)}
	}
	list, isList := v.([]any)
	if !isList {
		o.Errorf(key, `want a list of strings, like ["a", "b"]`)
		return nil
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		str, isStr := e.(string)
		if !isStr {
			o.Errorf(key, `want a list of strings, like ["a", "b"]`)
			return nil
		}
		out = append(out, strings.TrimSpace(str))
	}
	return out
}

// IntTable reads an inline table of whole numbers in [lo, hi], like
// { e1 = 100, a1 = 0 }, or nil when absent.
func (o *Options) IntTable(key string, lo, hi int64) map[string]int64 {
	v, ok := o.raw(key)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		o.Errorf(key, "want a table of whole numbers, like { e1 = 100, a1 = 0 }")
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, e := range m {
		n, isInt := e.(int64)
		if !isInt || n < lo || n > hi {
			o.Errorf(key, "%s: want a whole number from %d to %d", k, lo, hi)
			return nil
		}
		out[k] = n
	}
	return out
}

// BoolTable reads an inline table of true or false, like
// { e1 = true, a1 = false }, or nil when absent.
func (o *Options) BoolTable(key string) map[string]bool {
	v, ok := o.raw(key)
	if !ok {
		return nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		o.Errorf(key, "want a table of true or false, like { e1 = true, a1 = false }")
		return nil
	}
	out := make(map[string]bool, len(m))
	for k, e := range m {
		b, isBool := e.(bool)
		if !isBool {
			o.Errorf(key, "%s: want true or false", k)
			return nil
		}
		out[k] = b
	}
	return out
}

// Bool reads true or false; nil when absent.
func (o *Options) Bool(key string) *bool {
	v, ok := o.raw(key)
	if !ok {
		return nil
	}
	b, isBool := v.(bool)
	if !isBool {
		o.Errorf(key, "want true or false")
		return nil
	}
	return &b
}

// Duration reads a duration written as a string with a unit ("60s",
// "250ms") in [lo, hi], or def when absent.
func (o *Options) Duration(key string, def, lo, hi time.Duration) time.Duration {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	str, isStr := v.(string)
	if !isStr {
		o.Errorf(key, `want a string with a unit, like "60s"`)
		return def
	}
	d, msg := parseDurationMax(strings.TrimSpace(str), hi)
	if msg == "" && d < lo {
		msg = fmt.Sprintf("too short; at least %s", lo)
	}
	if msg != "" {
		o.Errorf(key, "%s", msg)
		return def
	}
	return d
}

// Float reads a number (whole or not) in [lo, hi], or def when absent.
func (o *Options) Float(key string, def, lo, hi float64) float64 {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	default:
		o.Errorf(key, "want a number from %g to %g", lo, hi)
		return def
	}
	if f < lo || f > hi || f != f {
		o.Errorf(key, "want a number from %g to %g", lo, hi)
		return def
	}
	return f
}

// Size reads a byte size written as a string with a unit ("8KiB",
// "64MiB") in [lo, hi], or def when absent.
func (o *Options) Size(key string, def, lo, hi int64) int64 {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	str, isStr := v.(string)
	if !isStr {
		o.Errorf(key, `want a string with a unit, like "8KiB"`)
		return def
	}
	b, msg := parseSize(str)
	if msg == "" && (b < lo || b > hi) {
		msg = fmt.Sprintf("want from %s to %s", sizeText(lo), sizeText(hi))
	}
	if msg != "" {
		o.Errorf(key, "%s", msg)
		return def
	}
	return b
}

// sizeText writes a byte count in the largest binary unit that divides it.
func sizeText(b int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b >= u.n && b%u.n == 0 {
			return strconv.FormatInt(b/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}

// Err reports every error recorded, and every key nobody read (with the
// keys that were read, so a misspelt one is easy to fix).
func (o *Options) Err() error {
	known := make([]string, 0, len(o.used))
	for k := range o.used {
		known = append(known, k)
	}
	sort.Strings(known)
	for k := range o.values {
		if o.used[k] {
			continue
		}
		list := "none"
		if len(known) > 0 {
			list = strings.Join(known, ", ")
		}
		o.Errorf(k, "unknown option for %s%s; options: %s", o.owner, didYouMean(k, known), list)
	}
	return o.errs.Err()
}

func quoteAll(v []string) string {
	q := make([]string, len(v))
	for i, s := range v {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Written says whether the spec wrote field ("run.max_error_pct") itself,
// rather than leaving it to its default.
func (s *Spec) Written(field string) bool {
	_, ok := s.lines[field]
	return ok
}

// Warnf records a warning about field, with its file:line as an error
// has: something a check found that runs but does not do what it seems
// to, where refusing it would refuse a spec that means it (a sweep's row).
// `replab validate` and `replab run` print the warnings.
func (s *Spec) Warnf(field, format string, args ...any) {
	w := s.Errorf(field, format, args...)
	if p, err := splitSweepPath(field); err == nil && s.raw != nil {
		if kp := s.raw.pos[p.key()]; kp != nil && !strings.ContainsAny(kp.raw, "\r\n") {
			w.Value = shorten(kp.raw) // as written (a sweep point's: its value)
		}
	}
	s.AddWarning(w)
}

// AddWarning records a warning made elsewhere (a sweep point's, said of
// the spec it comes from).
func (s *Spec) AddWarning(w *Error) { s.warnings = append(s.warnings, w) }

// Warnings are the warnings recorded so far, sorted by line, each once
// (a spec checked twice warns twice).
func (s *Spec) Warnings() ErrorList {
	return sortErrors(slices.Clone(s.warnings))
}
