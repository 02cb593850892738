package pcap

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGlobalHeader(t *testing.T) {
	cases := []struct {
		snap int
		want string // magic, version 2.4, thiszone, sigfigs, snaplen, LINKTYPE_RAW: little-endian
	}{
		{0, "4d3cb2a1 0200 0400 00000000 00000000 80000000 65000000"},
		{128, "4d3cb2a1 0200 0400 00000000 00000000 80000000 65000000"},
		{65535, "4d3cb2a1 0200 0400 00000000 00000000 ffff0000 65000000"},
		{20, "4d3cb2a1 0200 0400 00000000 00000000 14000000 65000000"},
	}
	for _, c := range cases {
		var b bytes.Buffer
		if _, err := NewWriter(&b, c.snap); err != nil {
			t.Fatalf("snap %d: %v", c.snap, err)
		}
		if want := unhex(t, c.want); !bytes.Equal(b.Bytes(), want) {
			t.Errorf("snap %d: header\n%x, want\n%x", c.snap, b.Bytes(), want)
		}
	}
}

func TestBadSnapLen(t *testing.T) {
	for _, snap := range []int{-1, 19, 65536} {
		if _, err := NewWriter(&bytes.Buffer{}, snap); err == nil {
			t.Errorf("snap %d: want an error", snap)
		}
	}
}

func TestRecords(t *testing.T) {
	ts := time.Unix(1700000000, 123456789) // 0x6553f100 s, 0x075bcd15 ns
	pkt := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i)
		}
		return p
	}
	cases := []struct {
		name    string
		snap    int
		origLen int
		data    []byte
		want    string // record header (ts_sec ts_nsec incl_len orig_len) + data
	}{
		{"whole packet", 128, 4, pkt(4), "00f15365 15cd5b07 04000000 04000000 00010203"},
		{"cut to the snap length", 20, 30, pkt(30), "00f15365 15cd5b07 14000000 1e000000 " + hex.EncodeToString(pkt(20))},
		{"already cut by the caller", 128, 1500, pkt(3), "00f15365 15cd5b07 03000000 dc050000 000102"},
		{"orig shorter than data is raised", 128, 1, pkt(2), "00f15365 15cd5b07 02000000 02000000 0001"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w, err := NewWriter(&b, c.snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WritePacket(ts, c.origLen, c.data); err != nil {
				t.Fatal(err)
			}
			got := b.Bytes()[globalHeaderLen:]
			if want := unhex(t, c.want); !bytes.Equal(got, want) {
				t.Errorf("record\n%x, want\n%x", got, want)
			}
		})
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriteErrorsAreReturned(t *testing.T) {
	if _, err := NewWriter(&failWriter{}, 0); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("header: got %v, want the write error", err)
	}
	w, err := NewWriter(&failWriter{n: 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(time.Now(), 10, make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("record: got %v, want the write error", err)
	}
}
