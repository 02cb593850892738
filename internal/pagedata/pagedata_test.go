package pagedata

import (
	"bytes"
	"testing"
)

func TestFillIsPositional(t *testing.T) {
	var whole bytes.Buffer
	if err := Write(&whole, 7, 3, 100_003); err != nil {
		t.Fatal(err)
	}
	data := whole.Bytes()
	if len(data) != 100_003 {
		t.Fatalf("wrote %d bytes, want 100003", len(data))
	}
	for _, c := range []struct{ off, n int64 }{{0, 8}, {1, 7}, {5, 13}, {8191, 8193}, {99_990, 13}, {12345, 1}} {
		p := make([]byte, c.n)
		Fill(7, 3, c.off, p)
		if !bytes.Equal(p, data[c.off:c.off+c.n]) {
			t.Errorf("Fill at %d len %d differs from the file", c.off, c.n)
		}
		if err := Check(7, 3, c.off, data[c.off:c.off+c.n]); err != nil {
			t.Errorf("Check at %d: %v", c.off, err)
		}
	}
}

func TestCheckFindsWrongData(t *testing.T) {
	p := make([]byte, 8192)
	Fill(1, 0, 8192, p)
	other := make([]byte, 8192)
	for name, c := range map[string]struct {
		seed      int64
		file      int
		off       int64
		corrupted bool
	}{
		"another page": {1, 0, 0, false},
		"another file": {1, 1, 8192, false},
		"another seed": {2, 0, 8192, false},
		"one bit":      {1, 0, 8192, true},
	} {
		copy(other, p)
		if c.corrupted {
			other[4000] ^= 1
		}
		if err := Check(c.seed, c.file, c.off, other); err == nil {
			t.Errorf("%s: Check found nothing wrong", name)
		}
	}
	if err := Check(1, 0, 8192, p); err != nil {
		t.Errorf("the right page: %v", err)
	}
}
