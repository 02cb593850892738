package spec

import (
	"strings"
	"testing"
)

func TestLagSample(t *testing.T) {
	// sweepBase ends with [run] and users = 3: lag_sample is on line 18.
	const line = "r.toml:18: run.lag_sample = "
	for _, tc := range []struct {
		value   string // "" leaves lag_sample out
		want    int
		wantErr string
	}{
		{"", LagSampleAuto, ""},
		{`"all"`, LagSampleAll, ""},
		{`"auto"`, LagSampleAuto, ""},
		{`" auto "`, LagSampleAuto, ""},
		{"1", 1, ""},
		{"10", 10, ""},
		{"1000000", 1000000, ""},
		{"0", 0, line + `0: want 1 (every transaction) or more, "all" or "auto"`},
		{"-1", 0, line + `-1: want 1 (every transaction) or more, "all" or "auto"`},
		{"1000001", 0, line + `1000001: at most 1000000`},
		{`"sometimes"`, 0, line + `"sometimes": want "all" (every transaction, by commit position where the engine can), "auto" (stamps, replab chooses N) or a whole number N of 1 or more (stamp every Nth transaction of each user; 1 = all)`},
		{`"10"`, 0, line + `"10": want "all" (every transaction, by commit position where the engine can), "auto"`},
		{"1.5", 0, line + `1.5: want "all"`},
		{"true", 0, line + `true: want "all"`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			src := sweepBase
			if tc.value != "" {
				src += "lag_sample = " + tc.value + "\n"
			}
			s, err := Parse("r.toml", []byte(src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Run.LagSample != tc.want {
				t.Errorf("LagSample = %d, want %d", s.Run.LagSample, tc.want)
			}
		})
	}
}

func TestLagSampleSweeps(t *testing.T) {
	s, err := Parse("s.toml", []byte(sweepBase+"[sweep]\n\"run.lag_sample\" = [\"auto\", 1, 10]\n"))
	if err != nil {
		t.Fatal(err)
	}
	pts, err := s.Points()
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, p := range pts {
		got = append(got, p.Spec.Run.LagSample)
	}
	if len(got) != 3 || got[0] != LagSampleAuto || got[1] != 1 || got[2] != 10 {
		t.Errorf("swept lag_sample = %v, want [0 (auto) 1 10]", got)
	}
	if pts[0].Label != `run.lag_sample="auto"` {
		t.Errorf("label %q", pts[0].Label)
	}
	if _, err := mustParse(t, sweepBase+"[sweep]\n\"run.lag_sample\" = [\"often\"]\n").Points(); err == nil || !strings.Contains(err.Error(), `run.lag_sample = "often": want "all"`) {
		t.Errorf("a bad swept value: %v", err)
	}
}

func mustParse(t *testing.T, src string) *Spec {
	t.Helper()
	s, err := Parse("s.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunTransactions: [run] transactions is a whole count, closed loop
// only, and not with a saturation search.
func TestRunTransactions(t *testing.T) {
	const line = "r.toml:18: run.transactions = "
	for _, tc := range []struct {
		extra   string
		want    int64
		wantErr string
	}{
		{"transactions = 100000\n", 100000, ""},
		{"transactions = 0\n", 0, line + "0: want between 1 and 1000000000000 transactions"},
		{"transactions = \"1M\"\n", 0, line + `"1M": want a whole number of transactions, like 100000`},
		{"transactions = 10\nrate = \"5/s\"\n", 0, line + "10: a count of transactions runs as fast as the users go (closed loop); with a rate the duration decides how many: remove one of them"},
		{"transactions = 10\nsearch = \"users\"\nsearch_steps = [1, 2]\n", 0, "a saturation search measures each step for the same duration: remove transactions"},
	} {
		s, err := Parse("r.toml", []byte(sweepBase+tc.extra))
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.extra, err, tc.wantErr)
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.extra, err)
		case tc.wantErr == "" && s.Run.Transactions != tc.want:
			t.Errorf("%q: transactions %d, want %d", tc.extra, s.Run.Transactions, tc.want)
		}
	}
}
