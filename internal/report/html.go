package report

// The HTML report: one self-contained page (inline CSS and SVG, no script,
// nothing fetched) rendered from a results directory alone.

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
)

// ReportFile is the report's name inside a results directory.
const ReportFile = "report.html"

//go:embed report.css
var reportCSS string

// page is what the template renders.
type page struct {
	Title    string
	Kind     string // "run", "repetitions", "sweep", "comparison"
	Heading  string
	Facts    []string // under the heading: engine, scheme, workload, load…
	State    string
	StateOK  bool
	Env      string
	Cards    []card
	Sections []section
	// Missing lists charts left out and why (a file absent from the run).
	Missing  []string
	Problems []string
	// Banner is a warning the whole page stands under (a machine-bound
	// run).
	Banner string
	Source string
	// Up links a point's or a repetition's report to its parent's.
	Up, UpHref string
}

// card is one headline figure at the top of the page.
type card struct {
	Label, Value, Unit, Note string
}

type section struct {
	ID, Title, Intro string
	Notes            []string
	Tables           []htmlTable
	// Pre are blocks of preformatted text (an anomaly's witness).
	Pre     []string
	Figures []figure
}

type htmlTable struct {
	Caption string
	Head    []tcell
	Rows    [][]tcell
	Note    string
}

// tcell is a table cell; Class "n" right-aligns a number.
type tcell struct {
	Text, Class, Href, Title string
}

func num(s string) tcell     { return tcell{Text: s, Class: "n"} }
func txt(s string) tcell     { return tcell{Text: s} }
func numHead(s string) tcell { return tcell{Text: s, Class: "n"} }

var pageTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="replab report">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<main class="{{.Kind}}">
<header>
<div class="kicker">replab · {{.Kind}}{{if .Up}} · <a href="{{.UpHref}}">{{.Up}}</a>{{end}}</div>
<h1>{{.Heading}} {{if .State}}<span class="badge {{if .StateOK}}ok{{else}}bad{{end}}">{{.State}}</span>{{end}}</h1>
{{if .Facts}}<p class="facts">{{range $i, $f := .Facts}}{{if $i}}<span class="dot">·</span>{{end}}{{$f}}{{end}}</p>{{end}}
{{if .Env}}<p class="env">{{.Env}}</p>{{end}}
</header>
{{if .Banner}}<p class="banner">{{.Banner}}</p>{{end}}
{{if .Cards}}<div class="cards">{{range .Cards}}
<div class="card"><div class="k">{{.Label}}</div><div class="v">{{.Value}}{{if .Unit}} <span class="u">{{.Unit}}</span>{{end}}</div>{{if .Note}}<div class="note">{{.Note}}</div>{{end}}</div>{{end}}
</div>{{end}}
{{range .Sections}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
{{if .Intro}}<p class="intro">{{.Intro}}</p>{{end}}
{{range .Notes}}<p class="callout">{{.}}</p>{{end}}
{{if .Tables}}<div class="tables">{{range .Tables}}
<div class="tablewrap"><table>
{{if .Caption}}<caption>{{.Caption}}</caption>{{end}}
{{if .Head}}<thead><tr>{{range .Head}}<th class="{{.Class}}"{{if .Title}} title="{{.Title}}"{{end}}>{{.Text}}</th>{{end}}</tr></thead>{{end}}
<tbody>{{range .Rows}}<tr>{{range .}}<td class="{{.Class}}"{{if .Title}} title="{{.Title}}"{{end}}>{{if .Href}}<a href="{{.Href}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>
{{end}}</tbody>
</table>{{if .Note}}<p class="tnote">{{.Note}}</p>{{end}}</div>{{end}}
</div>{{end}}
{{range .Pre}}<pre class="witness">{{.}}</pre>
{{end}}{{if .Figures}}<div class="figs">{{range .Figures}}
<figure id="fig-{{.ID}}">
<figcaption><span class="t">{{.Title}}</span>{{if .Note}}<span class="fnote">{{.Note}}</span>{{end}}
{{if .Legend}}<span class="legend">{{range .Legend}}<span class="key"><span class="sw{{if .Box}} box{{end}}" style="{{if .Box}}background:{{.Colour}}{{else}}border-top-color:{{.Colour}}{{if .Dash}};border-top-style:dashed{{end}}{{end}}"></span>{{.Name}}</span>{{end}}</span>{{end}}
</figcaption>
{{.SVG}}
</figure>{{end}}
</div>{{end}}
</section>
{{end}}
{{if .Missing}}<section id="not-shown"><h2>Not shown</h2><ul class="muted">{{range .Missing}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
{{if .Problems}}<section id="problems"><h2>Files that could not be read</h2><ul>{{range .Problems}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
<footer>Rendered by <code>replab report</code> from <code>{{.Source}}</code> alone; nothing in this page is fetched from the network.</footer>
</main>
</body>
</html>
`))

// templData adapts page for the template: SVG and CSS are trusted (drawn
// here, every text escaped).
type templFigure struct {
	figure
	SVG template.HTML
}

type templSection struct {
	section
	Figures []templFigure
}

func render(w io.Writer, p *page) error {
	secs := make([]templSection, len(p.Sections))
	for i, s := range p.Sections {
		secs[i] = templSection{section: s}
		for _, f := range s.Figures {
			secs[i].Figures = append(secs[i].Figures, templFigure{figure: f, SVG: template.HTML(f.SVG)})
		}
	}
	data := struct {
		*page
		Sections []templSection
		CSS      template.CSS
	}{p, secs, template.CSS(reportCSS)}
	return pageTmpl.Execute(w, data)
}

// WriteHTML writes the report page of a results directory to w.
func WriteHTML(w io.Writer, r *Results) error {
	var p *page
	switch {
	case r.IsSweep():
		p = sweepPage(r)
	case r.IsRepetitions():
		p = repetitionsPage(r)
	default:
		p = runPage(r)
	}
	if r.role != "" {
		p.Up, p.UpHref = r.role, "../"+ReportFile
	}
	return render(w, p)
}

// WriteReport writes DIR/report.html for r, and for a sweep or repeated
// run also each point's and repetition's own report (linked from the
// main one). It returns the paths written, the main report first.
func WriteReport(r *Results) ([]string, error) {
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		return nil, fmt.Errorf("render %s: %w", r.Dir, err)
	}
	path := filepath.Join(r.Dir, ReportFile)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("write report: %w", err)
	}
	paths := []string{path}
	subs := append(append([]*Results{}, r.Points...), r.Reps...)
	for _, s := range subs {
		if s == nil {
			continue
		}
		more, err := WriteReport(s)
		if err != nil {
			return paths, err
		}
		paths = append(paths, more...)
	}
	return paths, nil
}
