package report

// The keys of summary.json's "ci": the JSON paths of the figures an
// aggregate folds (aggregate.go), dotted — "tpm",
// "commit_latency_ms.p99", "replicas.e1.lag_ms.p50". These turn a key back
// into words, a precision and a place on the repetitions page.

import (
	"sort"
	"strings"
)

// ciName turns a key of summary.json's "ci" into words.
func ciName(k string) string {
	parts := strings.Split(k, ".")
	switch {
	case k == "tpm":
		return "transactions per minute"
	case k == "tps":
		return "transactions per second"
	case k == "bytes_per_transaction":
		return "bytes on the wire per transaction"
	case len(parts) == 2 && parts[0] == "commit_latency_ms":
		return "commit latency " + strings.ReplaceAll(parts[1], "_", ".") + " (ms)"
	case len(parts) == 4 && parts[0] == "replicas" && parts[2] == "lag_ms":
		return "lag at " + parts[1] + " " + strings.ReplaceAll(parts[3], "_", ".") + " (ms)"
	case len(parts) == 3 && parts[0] == "links" && parts[2] == "bytes":
		return "link " + parts[1] + " bytes"
	case len(parts) == 3 && parts[0] == "links" && parts[2] == "utilization_avg_pct":
		return "link " + parts[1] + " utilization (%)"
	}
	return strings.ReplaceAll(k, "_", " ")
}

// ciValue prints a figure of summary.json's "ci" in its unit's precision.
func ciValue(k string, v float64) string {
	switch {
	case strings.Contains(k, "_ms."), strings.HasSuffix(k, "_pct"):
		return ms(v)
	case k == "tps":
		return fmtNum(v)
	}
	return fmtTable(v)
}

// headlineCI says whether a key of summary.json's "ci" belongs in the
// repetitions page's headline table: throughput, commit latency, lag and
// bytes per transaction (the tables below show the others).
func headlineCI(k string) bool {
	parts := strings.Split(k, ".")
	switch {
	case k == "tpm", k == "tps", k == "bytes_per_transaction":
		return true
	case len(parts) == 2 && parts[0] == "commit_latency_ms",
		len(parts) == 4 && parts[0] == "replicas" && parts[2] == "lag_ms":
		return parts[len(parts)-1] != "count"
	}
	return false
}

// ciOrder sorts CI keys: throughput, commit latency, then replicas.
func ciOrder(keys []string) {
	rank := func(k string) int {
		switch {
		case k == "tpm":
			return 0
		case k == "tps":
			return 1
		case strings.HasPrefix(k, "commit_latency_ms."):
			return 2
		case strings.HasPrefix(k, "replicas."):
			return 3
		case k == "bytes_per_transaction":
			return 4
		case strings.HasPrefix(k, "links."):
			return 5
		}
		return 6
	}
	pr := map[string]int{"p50": 0, "p90": 1, "p95": 2, "p99": 3, "p99_9": 4, "max": 5, "mean": 6}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		ai, bi := strings.LastIndex(a, "."), strings.LastIndex(b, ".")
		if a[:ai+1] != b[:bi+1] {
			return a < b
		}
		return pr[a[ai+1:]] < pr[b[bi+1:]]
	})
}
