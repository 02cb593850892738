package units

import "testing"

func TestUnits(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Bytes(0), "0 B"}, {Bytes(512), "512 B"}, {Bytes(1024), "1 KiB"}, {Bytes(256216), "250.2 KiB"},
		{Bytes(47.5 * (1 << 20)), "47.5 MiB"}, {Bytes(3 << 30), "3 GiB"}, {Bytes(-2048), "-2 KiB"},
		{Bits(999), "999 bit/s"}, {Bits(948600), "948.6 kbit/s"}, {Bits(50e6), "50 Mbit/s"}, {Bits(1.25e9), "1.2 Gbit/s"},
		{BitsPrec(1.544e6, 3), "1.544 Mbit/s"}, {BitsPrec(10.0404e6, 3), "10.04 Mbit/s"},
		{Trim(1.50, 2), "1.5"}, {Trim(2, 2), "2"}, {Trim(0.125, 2), "0.12"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
