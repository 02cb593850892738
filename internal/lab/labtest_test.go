package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"replab/internal/spec"
)

// uniqueName makes a lab name no other test (or run) uses at the same time.
func uniqueName(prefix string) string {
	return fmt.Sprintf("t%s-%d-%04x", prefix, os.Getpid()%10000, rand.IntN(0x10000))
}

// specFrom parses TOML text with the lab renamed to a unique name.
func specFrom(t testing.TB, prefix, text string) *spec.Spec {
	t.Helper()
	name := uniqueName(prefix)
	text = strings.Replace(text, `name = "NAME"`, fmt.Sprintf("name = %q", name), 1)
	s, err := spec.Parse(prefix+".toml", []byte(text))
	if err != nil {
		t.Fatalf("parse spec: %v", err)
	}
	return s
}

// specFile loads an example spec and renames its lab.
func specFile(t *testing.T, prefix, path string) *spec.Spec {
	t.Helper()
	s, err := spec.Load(filepath.Join("..", "..", path))
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	s.Lab.Name = uniqueName(prefix)
	return s
}

// up starts a lab in a private state root and removes it when the test
// ends, then checks that nothing of it remains.
func up(t *testing.T, s *spec.Spec) *Lab {
	t.Helper()
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := Up(ctx, s, Options{StateRoot: root})
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab close: %v", err)
		}
		assertGone(t, root, s.Lab.Name)
	})
	return l
}

// assertGone fails when anything named after the lab is still there.
func assertGone(t *testing.T, root, name string) {
	t.Helper()
	if ns := listNetns(objectPrefix(name)); len(ns) > 0 {
		t.Errorf("namespaces left behind: %v", ns)
	}
	if cg := listCgroups(objectPrefix(name)); len(cg) > 0 {
		t.Errorf("cgroups left behind: %v", cg)
	}
	if _, err := os.Stat(labDir(root, name)); err == nil {
		t.Errorf("state directory %s left behind", labDir(root, name))
	}
}

// inSite reads a file from inside a site's namespace (e.g. a sysctl).
func inSite(t *testing.T, s *Site, path string) string {
	t.Helper()
	var v string
	if err := s.Do(func() error {
		b, err := os.ReadFile(path)
		v = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatalf("read %s in %s: %v", path, s.Name, err)
	}
	return v
}

var _ = runtime.NumGoroutine
