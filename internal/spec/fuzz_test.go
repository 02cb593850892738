package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"replab/internal/linkem"
)

// FuzzParse: no input panics; an error is an ErrorList whose every line
// names the file and a line; a success is a valid spec.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"../../examples/*.toml", "../../scenarios/*.toml", "testdata/errors/*.toml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("link = [{ sites = [\"a\", \"b\"], reverse = { delay = \"2ms\" } }]\nlab = { name = \"t\" }\nsite = { a = {}, b = {} }"))
	noFiles := &env{readFile: func(string) ([]byte, error) { return nil, errors.New("no files while fuzzing") }}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parse("fuzz.toml", data, noFiles)
		if err != nil {
			if s != nil && len(s.ReadErrors()) == 0 {
				t.Fatal("both a spec and an error, and the spec does not carry it")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is %T, not a non-empty ErrorList: %v", err, err)
			}
			for _, e := range list {
				if e.Line < 1 || e.File != "fuzz.toml" {
					t.Fatalf("error without file:line: %#v", e)
				}
				msg := e.Error()
				if strings.ContainsAny(msg, "\r\n") {
					t.Fatalf("error spans lines: %q", msg)
				}
				if strings.Contains(msg, "internal error") {
					t.Fatalf("panic: %s", msg)
				}
			}
			return
		}
		checkValid(t, s)
	})
}

// FuzzApplyKV: no argument panics; a failed call leaves p unchanged and a
// successful one leaves it valid.
func FuzzApplyKV(f *testing.F) {
	for _, kv := range []string{"delay=80ms", "rate=9.6kbit", "loss=gemodel 1% 10% 100% 0%", "queue=0.5bdp", "down", "up",
		"mtu=1400", "jitter=1ms", "preset=transatlantic", "rate=100kbps", "delay=80"} {
		f.Add(kv)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		if strings.Contains(kv, "trace") {
			return // reads files
		}
		p := linkem.Params{Delay: 10 * time.Millisecond, RateBps: 1e6, MTU: 1500}
		before := p
		if err := ApplyKV(&p, kv, ""); err != nil {
			if !reflect.DeepEqual(p, before) {
				t.Fatalf("failed ApplyKV(%q) changed p", kv)
			}
			if strings.ContainsAny(err.Error(), "\r\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		checkParams(t, p)
	})
}
