package spec

import (
	"replab/internal/testkit"
	"strings"
	"testing"
	"time"
)

var optionsSpec = testkit.ReadFile("testdata/options.toml")

// TestOptionsReadWhatWasWrittenAndPointAtItsLine: each accessor returns
// the value written, or its default when absent, and a bad value or an
// unread key becomes an error at the key's own line.
func TestOptionsReadWhatWasWrittenAndPointAtItsLine(t *testing.T) {
	s, err := Parse("o.toml", []byte(optionsSpec))
	if err != nil {
		t.Fatal(err)
	}
	o := s.SchemeOptions("engine x")
	if got := o.String("commit", "on", "on", "remote_apply"); got != "remote_apply" {
		t.Errorf("commit = %q", got)
	}
	if got := o.String("standbys", "ANY 1"); got != "ANY 1" {
		t.Errorf("absent standbys = %q, want the default", got)
	}
	if got := o.Int("users", 1, 1, 10); got != 7 {
		t.Errorf("users = %d", got)
	}
	if got := o.Int("big", 5, 1, 10); got != 5 {
		t.Errorf("out-of-range big = %d, want the default", got)
	}
	if b := o.Bool("flag"); b == nil || !*b {
		t.Errorf("flag = %v", b)
	}
	if b := o.Bool("notflag"); b != nil {
		t.Errorf("a string read as a bool: %v", *b)
	}
	if o.Bool("absent") != nil {
		t.Error("an absent bool is not nil")
	}
	if d := o.Duration("every", 0, time.Second, time.Hour); d != 30*time.Second {
		t.Errorf("every = %s", d)
	}
	if d := o.Duration("fast", time.Minute, time.Second, time.Hour); d != time.Minute {
		t.Errorf("a too short duration = %s, want the default", d)
	}
	err = o.Err()
	if err == nil {
		t.Fatal("no errors")
	}
	got := err.Error()
	for _, want := range []string{
		"o.toml:16: scheme.big: want a whole number from 1 to 10",
		"o.toml:18: scheme.notflag: want true or false",
		"o.toml:20: scheme.fast: too short; at least 1s",
		"o.toml:21: scheme.typo_key: unknown option for engine x; options: absent, big, commit, every, fast, flag, notflag, standbys, users",
		"o.toml:22: scheme.level: unknown option for engine x; options:",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 5 {
		t.Errorf("%d errors, want 5:\n%s", n, got)
	}
}

func TestOptionsStringSuggestsTheClosestValue(t *testing.T) {
	s, err := Parse("o.toml", []byte(optionsSpec))
	if err != nil {
		t.Fatal(err)
	}
	o := s.SchemeOptions("engine x")
	_ = o.String("level", "on", "on", "remote_apply", "local")
	for _, k := range []string{"commit", "users", "big", "flag", "notflag", "every", "fast", "typo_key"} {
		o.Has(k)
	}
	want := `o.toml:22: scheme.level: unknown value "remote_aply" (did you mean "remote_apply"?); choose one of "on", "remote_apply", "local"`
	if err := o.Err(); err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestOptionsStringsReadsAListOrOneString: a list of strings, a bare
// string as a list of one, and anything else an error at the key's line.
func TestOptionsStringsReadsAListOrOneString(t *testing.T) {
	s, err := Parse("o.toml", []byte(strings.Replace(optionsSpec, "typo_key = 1\nlevel = \"remote_aply\"\n",
		"files = [\" a.sql@60\", \"b.sql\"]\none = \"c.sql\"\nmixed = [\"a\", 1]\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	o := s.SchemeOptions("engine x")
	if got := o.Strings("files"); strings.Join(got, "|") != "a.sql@60|b.sql" {
		t.Errorf("files = %q", got)
	}
	if got := o.Strings("one"); len(got) != 1 || got[0] != "c.sql" {
		t.Errorf("one = %q", got)
	}
	if got := o.Strings("absent"); got != nil {
		t.Errorf("absent = %q", got)
	}
	if got := o.Strings("mixed"); got != nil {
		t.Errorf("mixed = %q", got)
	}
	o.Strings("users")
	err = o.Err()
	if err == nil || !strings.Contains(err.Error(), "o.toml:23: scheme.mixed: want a list of strings") ||
		!strings.Contains(err.Error(), "o.toml:15: scheme.users: want a list of strings") {
		t.Errorf("errors: %v", err)
	}
}

func TestOptionsSize(t *testing.T) {
	s, err := Parse("o.toml", []byte(strings.Replace(optionsSpec, "typo_key = 1\nlevel = \"remote_aply\"\n",
		"page = \"8KiB\"\nhuge = \"3GiB\"\nbits = \"8kbit\"\nbare = 8192\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	o := s.SchemeOptions("engine x")
	if got := o.Size("page", 1, 512, 1<<30); got != 8192 {
		t.Errorf("page = %d", got)
	}
	if got := o.Float("page", 2, 1, 3); got != 2 {
		t.Errorf("a string read as a number: %g", got)
	}
	if got := o.Float("absent", 1.8, 1, 3); got != 1.8 {
		t.Errorf("absent float = %g", got)
	}
	if got := o.Size("absent", 42, 1, 100); got != 42 {
		t.Errorf("absent = %d, want the default", got)
	}
	for _, k := range []string{"huge", "bits", "bare"} {
		if got := o.Size(k, 7, 512, 1<<30); got != 7 {
			t.Errorf("bad %s = %d, want the default", k, got)
		}
	}
	for _, k := range []string{"commit", "users", "big", "flag", "notflag", "every", "fast"} {
		o.Has(k)
	}
	got := o.Err().Error()
	for _, want := range []string{
		"o.toml:22: scheme.huge: want from 512B to 1GiB",
		"o.toml:23: scheme.bits: sizes are in bytes, not bits",
		`o.toml:24: scheme.bare: want a string with a unit, like "8KiB"`,
		"o.toml:21: scheme.page: want a number from 1 to 3",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "scheme.page") != 1 {
		t.Errorf("a good size was refused, or a string read as a number was not:\n%s", got)
	}
}

// TestWarnings: a warning names its file:line and the value as written
// (a sweep point's: the swept one), and a spec checked twice warns once.
func TestWarnings(t *testing.T) {
	s, err := Parse("w.toml", []byte(sweepBase+"[scheme]\nreplication = \"sync\"\ndurability = \"nosync\"\n[sweep]\n\"scheme.durability\" = [\"sync\", \"write-nosync\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		errs := s.NewErrors()
		errs.Warn("scheme.durability", "waits for nothing")
	}
	got := s.Warnings()
	if len(got) != 1 || got[0].Error() != `w.toml:20: scheme.durability = "nosync": waits for nothing` {
		t.Errorf("warnings %v", got)
	}
	points, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	points[1].Spec.Warnf("scheme.durability", "flushes nothing")
	if got := points[1].Spec.Warnings(); len(got) != 1 || got[0].Error() != `w.toml:22: scheme.durability = "write-nosync": flushes nothing` {
		t.Errorf("a point's warnings %v", got)
	}
}

// TestIntRangeReadsANumberOrAPair: N is the range N..N, [a, b] is a..b,
// and anything else (a reversed pair, three numbers, a string, a bound
// passed) is an error at the key's line, the default returned.
func TestIntRangeReadsANumberOrAPair(t *testing.T) {
	s, err := Parse("o.toml", []byte(strings.Replace(optionsSpec, "typo_key = 1\n", `pair = [1, 4]
one = 3
reversed = [4, 1]
three = [1, 2, 3]
word = "1..4"
above = [1, 40]
`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	o := s.SchemeOptions("engine x")
	for _, tc := range []struct {
		key    string
		lo, hi int64
	}{{"pair", 1, 4}, {"one", 3, 3}, {"absent", 2, 5}, {"reversed", 2, 5}, {"three", 2, 5}, {"word", 2, 5}, {"above", 2, 5}} {
		if lo, hi := o.IntRange(tc.key, 2, 5, 1, 10); lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: %d..%d, want %d..%d", tc.key, lo, hi, tc.lo, tc.hi)
		}
	}
	for _, k := range []string{"commit", "users", "big", "flag", "notflag", "every", "fast", "level"} {
		o.Has(k)
	}
	err = o.Err()
	if err == nil {
		t.Fatal("no errors")
	}
	for _, line := range []string{"o.toml:23: scheme.reversed", "o.toml:24: scheme.three", "o.toml:25: scheme.word", "o.toml:26: scheme.above"} {
		if !strings.Contains(err.Error(), line+": want a whole number from 1 to 10, or a range [min, max] of them, like [1, 4]") {
			t.Errorf("no %q in:\n%v", line, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d errors, want 4:\n%v", n, err)
	}
}

func TestOptionsIntTable(t *testing.T) {
	s, err := Parse("o.toml", []byte(`[lab]
name = "o"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "postgres"
[node.p]
site = "a"
role = "primary"
[scheme]
priority = { e1 = 100, a1 = 0 }
bad = { e1 = "x" }
notable = 3
`))
	if err != nil {
		t.Fatal(err)
	}
	o := s.SchemeOptions("test")
	if got := o.IntTable("priority", 0, 1000); len(got) != 2 || got["e1"] != 100 || got["a1"] != 0 {
		t.Errorf("priority %v", got)
	}
	if got := o.IntTable("absent", 0, 1); got != nil {
		t.Errorf("absent %v", got)
	}
	o.IntTable("bad", 0, 1000)
	o.IntTable("notable", 0, 1000)
	err = o.Err()
	if err == nil || !strings.Contains(err.Error(), "scheme.bad: e1: want a whole number from 0 to 1000") || !strings.Contains(err.Error(), "scheme.notable: want a table of whole numbers") {
		t.Errorf("%v", err)
	}
}
