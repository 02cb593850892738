package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"replab/internal/engine/postgres"
	"replab/internal/spec"
)

// topology is one lab the bench brings up: a primary and standbys, each
// standby behind its own link. It is either an example spec run as
// written (only the lab's name changes) or generated with the same link
// towards every standby.
type topology struct {
	id       string
	example  string // path from the repository root; "" = generated
	delay    string // generated: one way, every standby's link
	rate     string
	queue    string // "" = the default (one BDP)
	reps     int
	headline bool // the lab: its breakdown gets figures of its own
	why      string
}

// The lab first (examples/pg-quorum.toml: eu behind 80 ms round
// trips at 100 Mbit/s, asia behind 220 ms at 50 Mbit/s), then three that
// take one cause away each: 80 ms / 100 Mbit/s to both standbys, the same
// round trip at 1 Gbit/s (transfer time nearly gone: what remains is
// round trips and slow start), and 100 Mbit/s without delay (round trips
// gone: what remains is the transfer).
var topologies = []topology{
	{id: "pg-quorum", example: "examples/pg-quorum.toml", reps: 3, headline: true, why: "the issue's lab"},
	{id: "wan-100mbit", delay: "40ms", rate: "100mbit", reps: 3, why: "one link kind, 80 ms round trips"},
	{id: "wan-1gbit", delay: "40ms", rate: "1gbit", reps: 3, why: "transfer nearly gone: round trips and slow start remain"},
	{id: "lan-100mbit", delay: "0ms", rate: "100mbit", queue: "1MB", reps: 3, why: "round trips gone: the transfer remains"},
}

// Target: ready within targetFactor × (targetBaseS + the slowest base
// backup's bytes at its link's rate).
const (
	targetBaseS  = 3.0
	targetFactor = 1.2
)

// labName names every lab the bench builds (`replab lab down bench-pgsetup`
// removes leftovers).
const labName = "bench-pgsetup"

// generatedStandbys are the standbys of a generated topology, each in its
// own site; the primary is db in site db.
var generatedStandbys = []string{"s1", "s2"}

// toml is the topology's spec text, with the lab named labName.
func (t topology) toml() (string, error) {
	if t.example != "" {
		b, err := os.ReadFile(t.example)
		if err != nil {
			return "", fmt.Errorf("read %s (run the bench from the repository root): %w", t.example, err)
		}
		return string(b), nil
	}
	link := fmt.Sprintf("delay = %q\nrate = %q\n", t.delay, t.rate)
	if t.queue != "" {
		link += fmt.Sprintf("queue = %q\n", t.queue)
	}
	s := fmt.Sprintf("[lab]\nname = %q\n[site.db]\n", labName)
	for _, sb := range generatedStandbys {
		s += fmt.Sprintf("[site.%s]\n", sb)
	}
	for _, sb := range generatedStandbys {
		s += fmt.Sprintf("[[link]]\nsites = [\"db\", %q]\n%s", sb, link)
	}
	s += "\n[engine]\nkind = \"postgres\"\n\n[node.db]\nsite = \"db\"\nrole = \"primary\"\n"
	for _, sb := range generatedStandbys {
		s += fmt.Sprintf("[node.%s]\nsite = %q\nrole = \"standby\"\nfrom = \"db\"\n", sb, sb)
	}
	return s, nil
}

// load parses and validates the topology's spec.
func (t topology) load() (*spec.Spec, error) {
	text, err := t.toml()
	if err != nil {
		return nil, err
	}
	name := t.example
	if name == "" {
		name = t.id + ".toml"
	}
	s, err := spec.Parse(name, []byte(text))
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	s.Lab.Name = labName
	if err := (postgres.Engine{}).Validate(s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return s, nil
}

func (t topology) describe() string {
	if t.example != "" {
		return t.example
	}
	return fmt.Sprintf("%s each way, %s", t.delay, t.rate)
}

// standbyLink is the link a standby's base backup crosses.
type standbyLink struct {
	Node    string  `json:"node"`
	Dir     string  `json:"direction"` // "upstream site->standby site", as the emulator names it
	DelayMs float64 `json:"delay_ms"`  // one way
	RateBps float64 `json:"rate_bps"`
}

// standbyLinks finds, for every standby of s (spec order), the link from
// its upstream's site to its own.
func standbyLinks(s *spec.Spec) ([]standbyLink, error) {
	site := map[string]string{}
	for _, n := range s.Nodes {
		site[n.Name] = n.Site
	}
	var out []standbyLink
	for _, n := range s.Nodes {
		if n.From == "" {
			continue
		}
		from, to := site[n.From], n.Site
		found := false
		for _, l := range s.Links {
			var p = l.Forward
			switch {
			case l.A == from && l.B == to:
			case l.A == to && l.B == from:
				p = l.Reverse
			default:
				continue
			}
			if p.RateBps <= 0 {
				return nil, fmt.Errorf("standby %s: the link %s has no rate: the target needs one", n.Name, l.Name())
			}
			out = append(out, standbyLink{Node: n.Name, Dir: from + "->" + to, DelayMs: float64(p.Delay) / float64(time.Millisecond), RateBps: float64(p.RateBps)})
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("standby %s: no link between sites %s and %s", n.Name, from, to)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the spec has no standbys")
	}
	return out, nil
}

// primaryOnly drops the tables of the named nodes and the [scheme] table
// from a spec's text: the diagnose step's lab keeps the sites and links
// and starts only the primary (asynchronous, nothing to wait for).
func primaryOnly(text string, drop []string) string {
	var out []string
	skipping := false
	for _, line := range strings.Split(text, "\n") {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "[") {
			skipping = trim == "[scheme]"
			for _, d := range drop {
				if trim == "[node."+d+"]" || strings.HasPrefix(trim, "[node."+d+".") || strings.HasPrefix(trim, "[[node."+d+".") {
					skipping = true
				}
			}
		}
		if !skipping {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
