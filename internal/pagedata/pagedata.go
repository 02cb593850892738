// Package pagedata is the content of the files a page server exports:
// deterministic from a seed, the file's number and the byte offset alone,
// so that the server's files can be generated in any order and a client
// can check any range it reads without knowing how it was written.
package pagedata

import (
	"encoding/binary"
	"fmt"
	"io"
)

// word is the 8 bytes at offset 8*i of file f: a splitmix64 step of a
// mix of the three (cheap, and no two places collide in practice).
func word(seed int64, file int, i int64) uint64 {
	z := uint64(seed)*0x9e3779b97f4a7c15 ^ uint64(file)<<48 ^ uint64(i)
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// Fill sets p to the content of file at offset off.
func Fill(seed int64, file int, off int64, p []byte) {
	var w [8]byte
	for len(p) > 0 {
		i := off / 8
		binary.LittleEndian.PutUint64(w[:], word(seed, file, i))
		n := copy(p, w[off-i*8:])
		p, off = p[n:], off+int64(n)
	}
}

// Check says whether p is the content of file at offset off; the error
// names the first byte that differs.
func Check(seed int64, file int, off int64, p []byte) error {
	var w [8]byte
	at := off
	for len(p) > 0 {
		i := at / 8
		binary.LittleEndian.PutUint64(w[:], word(seed, file, i))
		want := w[at-i*8:]
		n := min(len(want), len(p))
		for k := 0; k < n; k++ {
			if p[k] != want[k] {
				return fmt.Errorf("file %d: byte %d is %#02x, want %#02x (a read of %d bytes at %d)", file, at+int64(k), p[k], want[k], len(p), off)
			}
		}
		p, at = p[n:], at+int64(n)
	}
	return nil
}

// Write writes size bytes of file's content to w.
func Write(w io.Writer, seed int64, file int, size int64) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		Fill(seed, file, off, buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}
