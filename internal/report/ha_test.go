package report

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/ha is a run of examples/patroni-failover.toml: Patroni, the
// primary killed three times, each time another node promoted.

func TestPrintSummaryHA(t *testing.T) {
	r := mustRead(t, filepath.Join("testdata", "ha"))
	var b bytes.Buffer
	PrintSummary(&b, r.Summary)
	golden(t, "summary-ha.golden", b.Bytes())
	if !strings.Contains(b.String(), "node @primary kill  3          3") {
		t.Errorf("the HA table has no row for the kills:\n%s", b.String())
	}
}

// Who was primary, per node, under the throughput chart and on its time
// axis.
func TestNodeRolesChart(t *testing.T) {
	r := mustRead(t, filepath.Join("testdata", "ha"))
	if len(r.Problems) > 0 || len(r.NodeRoles) == 0 {
		t.Fatalf("problems %v, %d rows", r.Problems, len(r.NodeRoles))
	}
	c := nodeRolesChart("node-roles", r)
	if c.missing != "" {
		t.Fatal(c.missing)
	}
	golden(t, "node-roles.golden", []byte(c.fig.SVG+"\n"))
	for _, want := range []string{">p1</text>", ">e1</text>", ">a1</text>", `class="data role role-primary"`, `class="data leader"`} {
		if !strings.Contains(c.fig.SVG, want) {
			t.Errorf("the chart has no %s", want)
		}
	}
	page, _ := renderFaults(t, fixture(t, "ha"))
	th, nr, lat := strings.Index(page, `id="throughput"`), strings.Index(page, `id="node-roles"`), strings.Index(page, `id="latency-time"`)
	if th < 0 || nr < th || lat < nr {
		t.Errorf("the roles chart is not between throughput (%d) and latency (%d): %d", th, lat, nr)
	}
	if !strings.Contains(page, "Failover, lost commits, split brain and rejoin") {
		t.Error("the page has no HA table")
	}
	// Without node-roles.csv, no chart and nothing said missing.
	r.NodeRoles = nil
	if c := nodeRolesChart("x", r); c.missing == "" {
		t.Error("a chart without rows")
	}
}

func TestReadNodeRoles(t *testing.T) {
	rows, err := readNodeRoles(strings.NewReader("node,source,role,from_s,to_s\np1,server,primary,-3.5,10.25\np1,server,down,10.25,\n"))
	if err != nil || len(rows) != 2 || rows[0].FromS != -3.5 || rows[0].ToS != 10.25 || !math.IsNaN(rows[1].ToS) {
		t.Errorf("%+v %v", rows, err)
	}
	var b bytes.Buffer
	if err := WriteNodeRoles(&b, rows); err != nil || b.String() != "node,source,role,from_s,to_s\np1,server,primary,-3.500,10.250\np1,server,down,10.250,\n" {
		t.Errorf("%q %v", b.String(), err)
	}
	for _, bad := range []string{"a,b\n", "node,source,role,from_s,to_s\np1,server,primary,x,1\n", "node,source,role,from_s,to_s\np1,server,primary,1,y\n"} {
		if _, err := readNodeRoles(strings.NewReader(bad)); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}
