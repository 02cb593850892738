package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedSpecsValidate runs `replab validate` on every spec shipped in
// examples/ and scenarios/ (the studies' scenarios among them, e.g.
// scenarios/dimhrs-env*.toml): each must pass the whole check — lab, engine,
// scheme, workload, run and every sweep point — not only parse.
func TestShippedSpecsValidate(t *testing.T) {
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
