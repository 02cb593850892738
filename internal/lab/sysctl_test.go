package lab

import (
	"os"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"testing"
)

func TestOverlappingLabsRestoreASysctlOnlyWhenTheLastOneGoes(t *testing.T) {
	testkit.Need(t, testkit.Root)
	f := filepath.Join(t.TempDir(), "fake_sysctl")
	if err := os.WriteFile(f, []byte("reno bbr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	add := func(cc string) func(string) string {
		return func(cur string) string {
			if strings.Contains(cur, cc) {
				return cur
			}
			return cur + " " + cc
		}
	}
	a, b := uniqueName("ledger-a"), uniqueName("ledger-b")
	t.Cleanup(func() { releaseRootSysctls(a); releaseRootSysctls(b) })
	if err := holdRootSysctl(a, f, add("cubic")); err != nil {
		t.Fatal(err)
	}
	if err := holdRootSysctl(b, f, add("cubic")); err != nil {
		t.Fatal(err)
	}
	if _, err := releaseRootSysctls(a); err != nil {
		t.Fatal(err)
	}
	if got, _ := readProc(f); got != "reno bbr cubic" {
		t.Fatalf("after the first lab left: %q, want cubic still allowed for the second", got)
	}
	done, err := releaseRootSysctls(b)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := readProc(f); got != "reno bbr" || len(done) != 1 {
		t.Fatalf("after the last lab left: %q (%v), want the original restored", got, done)
	}
	// A value changed by someone else since is left alone.
	if err := holdRootSysctl(a, f, add("cubic")); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(f, []byte("reno\n"), 0o644)
	if _, err := releaseRootSysctls(a); err != nil {
		t.Fatal(err)
	}
	if got, _ := readProc(f); got != "reno" {
		t.Errorf("an admin's change was overwritten: %q", got)
	}
}
