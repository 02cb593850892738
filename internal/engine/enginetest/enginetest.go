// Package enginetest holds what every engine's tests share. Only tests
// import it.
package enginetest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/engine"
	"replab/internal/spec"
)

var update = flag.Bool("update", false, "rewrite testdata/errors/*.golden from the current output")

// ValidationGolden checks e's validation errors against golden files: every
// dir/*.toml must parse as a spec (its errors are the engine's, not the
// spec's) and fail e.Validate with exactly the text of the .golden file
// beside it. go test -update rewrites the golden files.
func ValidationGolden(t *testing.T, e engine.Engine, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no specs in %s: %v", dir, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s, err := spec.Parse(name, data)
			if err != nil {
				t.Fatalf("the spec itself is bad (the test wants an engine error): %v", err)
			}
			err = e.Validate(s)
			if err == nil {
				t.Fatalf("%s validated without error", name)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".toml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s:\ngot:\n%s\nwant:\n%s", name, got, want)
			}
		})
	}
}
