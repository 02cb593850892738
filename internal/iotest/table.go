package iotest

import (
	"fmt"
	"io"
	"strings"
)

// Row is one node's profile in the table.
type Row struct {
	Node    string  `json:"node"`
	Site    string  `json:"site"`
	Storage string  `json:"storage"` // the node's storage class: local, memory, san, nas
	Result  *Result `json:"result"`
}

const numWidth = 9

// WriteTable prints one line per node: random read and write IOPS at each
// block size, sequential MB/s, synchronous-write latency. The block sizes
// are the first row's.
func WriteTable(w io.Writer, rows []Row) {
	if len(rows) == 0 {
		return
	}
	var blocks []int
	for _, b := range rows[0].Result.RandRead {
		blocks = append(blocks, b.BlockBytes)
	}
	nw, sw, stw := len("node"), len("site"), len("storage")
	for _, r := range rows {
		nw, sw, stw = max(nw, len(r.Node)), max(sw, len(r.Site)), max(stw, len(r.Storage))
	}
	lead := fmt.Sprintf("%-*s  %-*s  %-*s", nw, "", sw, "", stw, "")
	group := func(title string, cols int) string {
		return fmt.Sprintf("  %-*s", cols*numWidth+(cols-1), title)
	}
	var h1, h2 strings.Builder
	h1.WriteString(lead)
	h1.WriteString(group("rand read iops", len(blocks)))
	h1.WriteString(group("rand write iops", len(blocks)))
	h1.WriteString(group("seq MB/s", 2))
	h1.WriteString(group(fmt.Sprintf("sync write %s ms", sizeText(SyncBlockBytes)), 2))
	fmt.Fprintf(&h2, "%-*s  %-*s  %-*s", nw, "node", sw, "site", stw, "storage")
	cols := func(names ...string) {
		h2.WriteString(" ")
		for _, n := range names {
			fmt.Fprintf(&h2, " %*s", numWidth, n)
		}
	}
	var bnames []string
	for _, b := range blocks {
		bnames = append(bnames, sizeText(b))
	}
	cols(bnames...)
	cols(bnames...)
	cols("read", "write")
	cols("p50", "p99")
	fmt.Fprintln(w, strings.TrimRight(h1.String(), " "))
	fmt.Fprintln(w, h2.String())
	for _, r := range rows {
		var b strings.Builder
		fmt.Fprintf(&b, "%-*s  %-*s  %-*s", nw, r.Node, sw, r.Site, stw, r.Storage)
		nums := func(format string, vs ...float64) {
			b.WriteString(" ")
			for _, v := range vs {
				fmt.Fprintf(&b, " %*s", numWidth, fmt.Sprintf(format, v))
			}
		}
		res := r.Result
		nums("%.0f", iopsAt(res.RandRead, blocks)...)
		nums("%.0f", iopsAt(res.RandWrite, blocks)...)
		nums("%.1f", res.SeqReadMBPerS, res.SeqWriteMBPerS)
		nums("%.3f", res.SyncWrite.P50Ms, res.SyncWrite.P99Ms)
		fmt.Fprintln(w, b.String())
	}
}

// iopsAt lists the IOPS at each block size, 0 where one was not measured.
func iopsAt(list []BlockIOPS, blocks []int) []float64 {
	out := make([]float64, len(blocks))
	for i, bs := range blocks {
		for _, b := range list {
			if b.BlockBytes == bs {
				out[i] = b.IOPS
			}
		}
	}
	return out
}
