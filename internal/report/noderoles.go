package report

// Who was primary over time (node-roles.csv, a run on an HA manager):
// one row per node under the throughput chart, on the same time axis,
// coloured by the role its server said it held, with a bar under it
// where its manager said it led.

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// NodeRolesFile is the nodes' roles over time: one line per period a
// node held a role, as its server or its manager said, in seconds since
// the measure phase began (to_s empty: until the end).
const NodeRolesFile = "node-roles.csv"

var nodeRolesHeader = []string{"node", "source", "role", "from_s", "to_s"}

// NodeRoleRow is one line of node-roles.csv.
type NodeRoleRow struct {
	Node, Source, Role string
	FromS, ToS         float64 // ToS NaN: until the end
}

// WriteNodeRoles writes node-roles.csv.
func WriteNodeRoles(w io.Writer, rows []NodeRoleRow) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(nodeRolesHeader); err != nil {
		return err
	}
	num := func(v float64) string {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	for _, r := range rows {
		if err := cw.Write([]string{r.Node, r.Source, r.Role, num(r.FromS), num(r.ToS)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func readNodeRoles(rd io.Reader) ([]NodeRoleRow, error) {
	recs, err := csv.NewReader(rd).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !slices.Equal(recs[0], nodeRolesHeader) {
		return nil, fmt.Errorf("the first line is not %s", strings.Join(nodeRolesHeader, ","))
	}
	var out []NodeRoleRow
	for i, rec := range recs[1:] {
		from, err := strconv.ParseFloat(rec[3], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: from_s %q: not a number", i+2, rec[3])
		}
		to := math.NaN()
		if rec[4] != "" {
			if to, err = strconv.ParseFloat(rec[4], 64); err != nil {
				return nil, fmt.Errorf("line %d: to_s %q: not a number", i+2, rec[4])
			}
		}
		out = append(out, NodeRoleRow{Node: rec[0], Source: rec[1], Role: rec[2], FromS: from, ToS: to})
	}
	return out, nil
}

func (r *Results) readNodeRoles() {
	r.NodeRoles, _ = readOptional(r, NodeRolesFile, readNodeRoles)
}

// roleColours: what a node's server said it was.
var roleColours = []struct{ role, name, colour string }{
	{"primary", "primary (takes writes)", "#0072B2"},
	{"streaming", "standby, streaming", "#009E73"},
	{"replica", "standby, not streaming (catching up, rewinding, cut off)", "#E69F00"},
	{"down", "down (not answering)", "#bbbbbb"},
}

// nodeRolesChart draws node-roles.csv under the throughput chart: the
// same width and time axis (seconds since the run started), one row per
// node.
func nodeRolesChart(id string, r *Results) chart {
	if len(r.NodeRoles) == 0 {
		return chart{missing: "who was primary over time: no " + NodeRolesFile}
	}
	t0, ok := measureStart(r)
	if !ok {
		return chart{missing: "who was primary over time: neither series.csv nor the spec says when the measure phase began"}
	}
	// The throughput chart's axis: from 0 to its last second.
	var pts []point
	for _, s := range r.Series {
		pts = append(pts, point{s.T - 0.5, 0})
	}
	ax := freeAxis("time since the run started (s)")
	ax.Min = 0
	xlo, xhi := domain(ax, []line{{Pts: pts}}, true)
	if len(pts) == 0 {
		xlo, xhi = 0, 1
		for _, row := range r.NodeRoles {
			xhi = math.Max(xhi, t0+row.FromS)
		}
	}
	var nodes []string
	for _, row := range r.NodeRoles {
		if !slices.Contains(nodes, row.Node) {
			nodes = append(nodes, row.Node)
		}
	}
	slices.Sort(nodes)
	const rowH, gap = 22.0, 8.0
	h := marginT + float64(len(nodes))*(rowH+gap) + marginB
	pl, pr := marginL, chartW-marginR
	xs := scale{d0: xlo, d1: xhi, r0: pl, r1: pr}
	var b strings.Builder
	title := "Who was primary over time"
	svgOpen(&b, id, title, chartW, h)
	clip := id + "-clip"
	fmt.Fprintf(&b, `<defs><clipPath id="%s"><rect x="%.1f" y="0" width="%.1f" height="%.1f"/></clipPath></defs>`, esc(clip), pl, pr-pl, h)
	pb := h - marginB
	for _, t := range ticks(ax, xlo, xhi, 6) {
		if t.Label == "" {
			continue
		}
		x := xs.at(t.V)
		fmt.Fprintf(&b, `<line class="grid minor" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x, x, marginT, pb)
		fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x, x, pb, pb+4)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, pb+17, esc(t.Label))
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, pl, pr, pb, pb)
	fmt.Fprintf(&b, `<text class="axis-label" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (pl+pr)/2, h-8, esc(ax.Label))
	fill := map[string]string{}
	for _, rc := range roleColours {
		fill[rc.role] = rc.colour
	}
	fmt.Fprintf(&b, `<g clip-path="url(#%s)">`, esc(clip))
	for i, n := range nodes {
		y := marginT + float64(i)*(rowH+gap)
		for _, row := range r.NodeRoles {
			if row.Node != n {
				continue
			}
			to := row.ToS
			if math.IsNaN(to) {
				to = xhi - t0
			}
			x0, x1 := math.Max(xs.at(t0+row.FromS), pl), math.Min(xs.at(t0+to), pr)
			if x1 <= x0 {
				continue
			}
			tip := fmt.Sprintf("%s %s (%s) from %.2f s to %.2f s of the measure phase", n, row.Role, row.Source, row.FromS, to)
			switch row.Source {
			case "server":
				c := fill[row.Role]
				if c == "" {
					c = "#999999"
				}
				fmt.Fprintf(&b, `<rect class="data role role-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
					esc(row.Role), x0, y, x1-x0, rowH-5, c, esc(tip))
			case "manager":
				if row.Role == "primary" {
					fmt.Fprintf(&b, `<rect class="data leader" x="%.1f" y="%.1f" width="%.1f" height="3" fill="#000000"><title>%s</title></rect>`,
						x0, y+rowH-3, x1-x0, esc(tip))
				}
			}
		}
	}
	b.WriteString(`</g>`)
	for i, n := range nodes {
		y := marginT + float64(i)*(rowH+gap)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, pl-6, y+rowH/2+2, esc(n))
	}
	b.WriteString(`</svg>`)
	var legend []legendItem
	for _, rc := range roleColours {
		legend = append(legend, legendItem{Name: rc.name, Colour: rc.colour, Box: true})
	}
	legend = append(legend, legendItem{Name: "the manager says it leads", Colour: "#000000", Box: true})
	note := "Each node's role as its server said it (polled every 100 ms), on the throughput chart's time axis; the black bar under a row: its manager said it held the leader key (polled every 250 ms). Two blue rows at once: two servers took writes (split brain)."
	return chart{fig: figure{ID: id, Title: title, Note: note, Legend: legend, SVG: b.String()}}
}
