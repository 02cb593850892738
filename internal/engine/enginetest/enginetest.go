// Package enginetest holds what every engine's tests share. Only tests
// import it.
package enginetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/engine"
	"replab/internal/spec"
	"replab/internal/testkit"
)

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
			testkit.Golden(t, strings.TrimSuffix(f, ".toml")+".golden", []byte(got))
		})
	}
}
