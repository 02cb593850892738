package report

import (
	"bytes"
	"testing"
)

func TestPrintSummaryPages(t *testing.T) {
	for _, dir := range []string{"pages-r1", "pages-r8"} {
		r := mustRead(t, "testdata/"+dir)
		var b bytes.Buffer
		PrintSummary(&b, r.Summary)
		t.Log(b.String())
	}
}
