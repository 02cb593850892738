package spec

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"9600bit", 9600, ""},
		{"9.6kbit", 9600, ""},
		{"100mbit", 100e6, ""},
		{"100Mbit", 100e6, ""},
		{"10gbit", 10e9, ""},
		{"1.5 mbit", 1.5e6, ""},
		{"unlimited", 0, ""},
		{"9599bit", 0, "between 9600bit and 10gbit"},
		{"10.1gbit", 0, "between"},
		{"0bit", 0, "between"},
		{"100", 0, "missing unit"},
		{"100kbps", 0, `write "100kbit" for 100 kilobits/s or "800kbit" for 100 kilobytes/s`},
		{"100bps", 0, "ambiguous"},
		{"100k", 0, `unknown unit "k"`},
		{"-5mbit", 0, "negative"},
		{"1e6bit", 0, "unknown unit"},
		{"", 0, "not a rate"},
	}
	for _, tt := range tests {
		got, msg := parseRate(tt.in)
		if got != tt.want || !strings.Contains(msg, tt.err) || (tt.err == "") != (msg == "") {
			t.Errorf("parseRate(%q) = %d, %q; want %d, %q", tt.in, got, msg, tt.want, tt.err)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"1500B", 1500, ""},
		{"100KB", 100_000, ""},
		{"64KiB", 65536, ""},
		{"1.5MiB", 1572864, ""},
		{"2GB", 2e9, ""},
		{"1GiB", 1 << 30, ""},
		{"100", 0, "missing unit"},
		{"100kbit", 0, "bytes, not bits"},
		{"5TB", 0, "unknown unit"},
		{"99999999999GiB", 0, "too large"},
	}
	for _, tt := range tests {
		got, msg := parseSize(tt.in)
		if got != tt.want || !strings.Contains(msg, tt.err) || (tt.err == "") != (msg == "") {
			t.Errorf("parseSize(%q) = %d, %q; want %d, %q", tt.in, got, msg, tt.want, tt.err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"25ms", 25 * time.Millisecond, ""},
		{"1.5s", 1500 * time.Millisecond, ""},
		{"250us", 250 * time.Microsecond, ""},
		{"250µs", 250 * time.Microsecond, ""},
		{"1s500ms", 1500 * time.Millisecond, ""},
		{"0", 0, ""},
		{"10s", 10 * time.Second, ""},
		{"10.001s", 0, "too long"},
		{"80", 0, `missing unit; use a duration like "80ms"`},
		{"-1ms", 0, "negative"},
		{"soon", 0, "not a duration"},
	}
	for _, tt := range tests {
		got, msg := parseDuration(tt.in)
		if got != tt.want || !strings.Contains(msg, tt.err) || (tt.err == "") != (msg == "") {
			t.Errorf("parseDuration(%q) = %v, %q; want %v, %q", tt.in, got, msg, tt.want, tt.err)
		}
	}
}

func TestParseLoss(t *testing.T) {
	for in, want := range map[string]float64{"1%": 0.01, "0.5%": 0.005, "0%": 0, "99.9%": 0.999} {
		got, ge, msg := parseLoss(in)
		if math.Abs(got-want) > 1e-12 || ge != nil || msg != "" {
			t.Errorf("parseLoss(%q) = %v %v %q", in, got, ge, msg)
		}
	}
	for in, err := range map[string]string{"100%": "below 100%", "150%": "below 100%", "1": `missing "%"`, "lots": "gemodel",
		"gemodel 1% 2% 3%": "got 3 values", "gemodel 1% 2% 3% 101%": "between 0% and 100%", "gemodel a b c d": "1% 10% 100% 0%"} {
		if _, _, msg := parseLoss(in); !strings.Contains(msg, err) {
			t.Errorf("parseLoss(%q) = %q, want %q", in, msg, err)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	keys := []string{"delay", "jitter", "rate", "queue", "loss"}
	for in, want := range map[string]string{"dealy": "delay", "Delay": "delay", "rat": "rate", "jiter": "jitter", "x": "", "bandwidth": "", "los": "loss"} {
		got := didYouMean(in, keys)
		if want == "" && got != "" || want != "" && !strings.Contains(got, `"`+want+`"`) {
			t.Errorf("didYouMean(%q) = %q, want %q", in, got, want)
		}
	}
}
