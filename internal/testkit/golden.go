package testkit

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"
)

// update is every package's -update: go test ./internal/X -update rewrites
// the golden files its tests compare with.
var update = flag.Bool("update", false, "rewrite the golden files (testdata/…) from the current output")

// Golden compares got with the file at path, or writes it there with
// -update. A difference shows both and says how to accept the new output.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got:\n%s\n--- want:\n%s", path, got, want)
	}
}

// ReadFile returns a test's data file, a spec that several tests share
// (testdata/NAME.toml beside the package's tests: go test runs in the
// package's directory); it panics when the file is missing, which fails
// the package's tests at once with the path.
func ReadFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(fmt.Sprintf("testkit: %v", err))
	}
	return string(b)
}
