package spec

import (
	"strings"
	"testing"
	"time"
)

// TestStorageSweep: a storage key can be swept like any other, and a bad
// swept value is an error at the [sweep] line.
func TestStorageSweep(t *testing.T) {
	text := storageBase + `[storage.s]
kind = "san"
site = "store"
[node.p]
site = "db"
role = "primary"
storage = "s"
[sweep]
"storage.s.delay" = ["0ms", "5ms"]
`
	s, err := Parse("st.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Spec.StorageOf("p").Delay != 0 || pts[1].Spec.StorageOf("p").Delay != 5*time.Millisecond {
		t.Fatalf("points %+v", pts)
	}
	bad := storageBase + "[storage.s]\nkind = \"san\"\nsite = \"store\"\n[node.p]\nsite = \"db\"\nrole = \"primary\"\n[sweep]\n\"storage.s.delay\" = [\"0ms\", \"1.5ms\"]\n"
	s, err = Parse("st.toml", []byte(bad))
	if err == nil {
		_, err = s.Points()
	}
	if err == nil || !strings.Contains(err.Error(), "want whole milliseconds") {
		t.Fatalf("a swept delay of 1.5ms: %v", err)
	}
	t.Log(err)
}
