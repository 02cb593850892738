package postgres

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

func TestLockFileShmid(t *testing.T) {
	const pidFile = "4242\n/var/lib/replab/l/p1\n1700000000\n5432\n/run/replab-sock/l\n10.1.0.2\n  5432001     65541\nready   \n"
	for _, tc := range []struct {
		name, text string
		pid        int
		want       int
		ok         bool
	}{
		{"the server's", pidFile, 4242, 65541, true},
		{"another process's", pidFile, 4243, 0, false},
		{"no shared memory line", "4242\n/x\n1\n5432\n", 4242, 0, false},
		{"a malformed line", "4242\n/x\n1\n5432\n/s\n*\n  5432001\n", 4242, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "postmaster.pid")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, ok, err := lockFileShmid(path, tc.pid)
			if err != nil || got != tc.want || ok != tc.ok {
				t.Errorf("got %d %v %v, want %d %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
	if _, ok, err := lockFileShmid(filepath.Join(t.TempDir(), "gone"), 1); ok || err != nil {
		t.Errorf("a missing postmaster.pid: %v %v, want nothing to do", ok, err)
	}
}

// TestRemoveDSM: the control segment and the segments it lists in files
// of their own go; handles in the main area (odd), freed slots (refcnt 0)
// and other files stay.
func TestRemoveDSM(t *testing.T) {
	dir := t.TempDir()
	const control = 1000
	items := []struct{ handle, refcnt uint32 }{{2000, 2}, {3001, 2}, {4000, 0}, {5000, 1}}
	b := make([]byte, dsmItemsOffset+len(items)*dsmItemSize)
	binary.LittleEndian.PutUint32(b, dsmControlMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(items)))
	binary.LittleEndian.PutUint32(b[8:], 64)
	for i, it := range items {
		off := dsmItemsOffset + i*dsmItemSize
		binary.LittleEndian.PutUint32(b[off:], it.handle)
		binary.LittleEndian.PutUint32(b[off+4:], it.refcnt)
	}
	write := func(h uint32, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, dsmName(h)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(control, b)
	for _, h := range []uint32{2000, 3001, 4000, 5000, 6000} {
		write(h, []byte("x"))
	}
	removeDSM(dir, control)
	for h, want := range map[uint32]bool{control: false, 2000: false, 5000: false, 3001: true, 4000: true, 6000: true} {
		_, err := os.Stat(filepath.Join(dir, dsmName(h)))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", dsmName(h), got, want)
		}
	}
}
