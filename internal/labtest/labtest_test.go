package labtest

import (
	"os"
	"path/filepath"
	"regexp"
	"replab/internal/testkit"
	"strings"
	"testing"
)

func TestUniqueNameIsAValidLabName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	seen := map[string]bool{}
	for range 20 {
		n := UniqueName("abcdefghij")
		if !valid.MatchString(n) || !strings.HasPrefix(n, "abcdefghij-") {
			t.Fatalf("UniqueName: %q, want ≤ 20 characters of [a-z0-9-] starting with the prefix", n)
		}
		seen[n] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 calls gave %d distinct names", len(seen))
	}
}

const twoSites = `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "1ms"
`

func TestLabIsUniqueAndGoesWithTheTest(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	var netns []string
	t.Run("up", func(t *testing.T) {
		l := Lab(t, "tlt", twoSites)
		if name := l.Spec.Lab.Name; !strings.HasPrefix(name, "tlt-") {
			t.Errorf("lab name %q, want tlt-…", name)
		}
		for _, s := range l.Sites() {
			if _, err := os.Stat(filepath.Join("/run/netns", s.Netns)); err != nil {
				t.Errorf("site %s: %v", s.Name, err)
			}
			netns = append(netns, s.Netns)
		}
	})
	if len(netns) != 2 {
		t.Fatalf("%d sites, want 2", len(netns))
	}
	for _, ns := range netns {
		if _, err := os.Stat(filepath.Join("/run/netns", ns)); err == nil {
			t.Errorf("namespace %s left behind after the test", ns)
		}
	}
}
