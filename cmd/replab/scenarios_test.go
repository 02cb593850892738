package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"replab/internal/runner"
	"replab/internal/spec"
)

// TestShippedSpecsValidate runs `replab validate` on every spec shipped in
// examples/ and scenarios/ (the studies' scenarios among them, e.g.
// scenarios/dimhrs-env*.toml): each must pass the whole check — lab, engine,
// scheme, workload, run and every sweep point — not only parse.
func TestShippedSpecsValidate(t *testing.T) {
	t.Parallel()
	var files []string
	for _, glob := range []string{"../../examples/*.toml", "../../scenarios/*.toml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var dimhrs int
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "dimhrs-env") {
			dimhrs++
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, code := replab(t, "", "validate", f)
			if code != 0 {
				t.Fatalf("replab validate %s: exit %d\n%s", f, code, out)
			}
		})
	}
	// The military HR study's three environments (issue 11): at least one
	// spec each.
	for _, env := range []string{"dimhrs-env1", "dimhrs-env2", "dimhrs-env3"} {
		if m, _ := filepath.Glob("../../scenarios/" + env + ".toml"); len(m) != 1 {
			t.Errorf("scenarios/%s.toml is missing", env)
		}
	}
	if dimhrs < 3 {
		t.Errorf("found %d dimhrs-env*.toml scenarios, want at least 3", dimhrs)
	}
}

var wholeSpecRE = regexp.MustCompile(`(?m)^\[(lab|target)\]`)

// TestDocsSpecsValidate checks every ```toml block of README.md and
// docs/*.md that is a whole spec (it has [lab] or [target]) as `replab
// validate` does — lab, engine, scheme, workload, run, every sweep point —
// and wants no warning about it: a spec shown as an example does what it
// says. (internal/spec's TestDocsExamplesParse parses the fragments.)
func TestDocsSpecsValidate(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range append([]string{"../../README.md"}, files...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for at := 0; ; {
			i := strings.Index(text[at:], "```toml\n")
			if i < 0 {
				break
			}
			start := at + i + len("```toml\n")
			end := strings.Index(text[start:], "```")
			if end < 0 {
				t.Fatalf("%s: a ```toml block that does not end", f)
			}
			block := text[start : start+end]
			at = start + end + 3
			if !wholeSpecRE.MatchString(block) {
				continue
			}
			n++
			// Named in the docs' directory: relative paths start there.
			name := fmt.Sprintf("%s:%d", f, strings.Count(text[:start], "\n")+1)
			t.Run(name, func(t *testing.T) {
				s, err := spec.Parse(name, []byte(block))
				if err == nil {
					err = runner.Validate(s, engines(), workloads(), false)
				}
				if err != nil {
					t.Fatalf("the block starting at %s:\n%v", name, err)
				}
				for _, w := range s.Warnings() {
					t.Errorf("warning: %v", w)
				}
			})
		}
	}
	if n < 8 {
		t.Errorf("found %d whole specs in the docs, want at least 8", n)
	}
}
