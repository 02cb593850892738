package mariadb

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
)

func TestGTIDSeq(t *testing.T) {
	for _, tc := range []struct {
		pos    string
		domain uint32
		want   int64
	}{
		{"0-1-42", 0, 42},
		{"0-1-42,2-3-7", 2, 7},
		{"1-1-5, 0-2-9", 0, 9},
		{"", 0, 0},
		{"1-1-5", 0, 0},
		{"garbage", 0, 0},
	} {
		if got := gtidSeq([]byte(tc.pos), tc.domain); got != tc.want {
			t.Errorf("gtidSeq(%q, %d) = %d, want %d", tc.pos, tc.domain, got, tc.want)
		}
	}
}

// stubConn replays server bytes in the given chunks and records what the
// client wrote.
type stubConn struct {
	net.Conn
	reads  [][]byte
	writes [][]byte
}

func (s *stubConn) Read(b []byte) (int, error) {
	r := s.reads[0]
	n := copy(b, r)
	if n == len(r) {
		s.reads = s.reads[1:]
	} else {
		s.reads[0] = r[n:]
	}
	return n, nil
}

func (s *stubConn) Write(b []byte) (int, error) {
	s.writes = append(s.writes, bytes.Clone(b))
	return len(b), nil
}

func lenenc(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// TestTrackConnReadsTheCommitsGTID: the handshake asks for session
// tracking when the server offers it, the reply to a COMMIT gives
// last_gtid's sequence number in the domain, and other replies are left
// alone, however the driver's reads cut the packets.
func TestTrackConnReadsTheCommitsGTID(t *testing.T) {
	greet := []byte{10}
	greet = append(greet, "10.11.19-MariaDB\x00"...)
	greet = binary.LittleEndian.AppendUint32(greet, 77) // connection id
	greet = append(greet, "12345678\x00"...)            // salt 1, filler
	greet = binary.LittleEndian.AppendUint16(greet, 0xf7fe)
	greet = append(greet, 45, 2, 0)                                    // charset, status
	greet = binary.LittleEndian.AppendUint16(greet, 0x81bf|1<<(23-16)) // upper capabilities: session tracking
	greet = append(greet, 21, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	greet = append(greet, "123456789012\x00mysql_native_password\x00"...)
	pkt := func(seq byte, p []byte) []byte { return append([]byte{byte(len(p)), byte(len(p) >> 8), 0, seq}, p...) }

	state := append([]byte{0}, lenenc(string(append(lenenc("last_gtid"), lenenc("0-1-4242")...)))...)
	ok := append([]byte{0, 0, 0}, 0x02, 0x40, 0, 0) // OK, 0 rows, id 0, status autocommit|state changed, 0 warnings
	ok = append(ok, 0)                              // info
	ok = append(ok, lenenc(string(state))...)
	commitOK := pkt(1, ok)
	other := pkt(1, append([]byte{0, 1, 0}, 0x02, 0x40, 0, 0, 0, 0)) // an UPDATE's OK: not read

	c := &cluster{}
	s := &stubConn{reads: [][]byte{pkt(0, greet)[:10], pkt(0, greet)[10:], commitOK[:7], commitOK[7:], other}}
	tc := &trackConn{Conn: s, c: c, addr: "a:1"}
	buf := make([]byte, 4096)
	if _, err := tc.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Read(buf); err != nil {
		t.Fatal(err)
	}
	if !tc.greeted || tc.id != 77 || tc.caps&capSessionTrack == 0 {
		t.Fatalf("greeting: greeted %v, id %d, caps %#x", tc.greeted, tc.id, tc.caps)
	}
	if v, ok := c.tracked.Load(trackKey{addr: "a:1", id: 77}); !ok || v != tc {
		t.Fatal("not registered by its connection id")
	}
	resp := make([]byte, 4+32+10)
	binary.LittleEndian.PutUint32(resp[4:], 0x000aa285)
	tc.Write(resp)
	if got := binary.LittleEndian.Uint32(s.writes[0][4:]); got != 0x000aa285|capSessionTrack || !tc.tracking {
		t.Errorf("handshake capabilities %#x, tracking %v; want session tracking asked for", got, tc.tracking)
	}
	tc.Write(pkt(0, append([]byte{comQuery}, "COMMIT"...)))
	tc.Read(buf)
	if tc.last.Load() != 0 {
		t.Errorf("position %d before the reply was whole", tc.last.Load())
	}
	tc.Read(buf)
	if tc.last.Load() != 4242 {
		t.Errorf("position %d after the COMMIT's reply, want 4242", tc.last.Load())
	}
	tc.Write(pkt(0, append([]byte{comQuery}, "UPDATE t SET a = 1"...)))
	tc.Read(buf)
	if tc.last.Load() != 4242 || tc.want {
		t.Errorf("another statement's reply moved the position to %d", tc.last.Load())
	}
	tc.Close()
	if _, ok := c.tracked.Load(trackKey{addr: "a:1", id: 77}); ok {
		t.Error("still registered after Close")
	}
}

func (s *stubConn) Close() error { return nil }
