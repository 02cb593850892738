package runner

import (
	"strings"
	"testing"
)

// TestFakeRunTimesEveryTransactionByPosition: with
// lag_sample = "all", a replica whose engine has positions gets a lag for
// every measured transaction, by position, and the summary says so;
// lag_sample = "auto" keeps the stamps.
func TestFakeRunTimesEveryTransactionByPosition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sample, method string
	}{
		{"default", "", "stamps"},
		{"all", `lag_sample = "all"`, "positions"},
		{"auto", `lag_sample = "auto"`, "stamps"},
		{"every", `lag_sample = 1`, "stamps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := strings.Replace(fakeSpec("", ""), "lag_sample = 1\n", tc.sample+"\n", 1)
			sum, _, _, err := fakeRun(t, text)
			if err != nil {
				t.Fatal(err)
			}
			rep := sum["replicas"].(map[string]any)["s"].(map[string]any)
			if rep["lag_method"] != tc.method {
				t.Fatalf("lag_method %v, want %s", rep["lag_method"], tc.method)
			}
			tx := num(t, sum, "transactions")
			count := num(t, sum, "replicas", "s", "lag_ms", "count")
			if p50 := num(t, sum, "replicas", "s", "lag_ms", "p50"); p50 < 5 {
				t.Errorf("lag p50 %.2f ms behind a 5 ms delay", p50)
			}
			if tc.method != "positions" {
				return
			}
			if count != tx || num(t, sum, "replicas", "s", "tracked") != tx || num(t, sum, "replicas", "s", "not_visible_at_end") != 0 {
				t.Errorf("%v lags, %v tracked, of %v transactions: want every one", count, num(t, sum, "replicas", "s", "tracked"), tx)
			}
			if rep["lag_position"] != "change number" || num(t, sum, "replicas", "s", "sample_every") != 1 {
				t.Errorf("lag_position %v, sample_every %v", rep["lag_position"], rep["sample_every"])
			}
		})
	}
}
