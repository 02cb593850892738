package faultkind

import (
	"context"
	"fmt"
)

// isolate cuts a site off: every link it has goes down, both directions,
// until healed (with for, or at the end of the run).
//
//	site = "eu"
//	do = "isolate"
//	for = "10s"
func init() {
	Register(Kind{
		Name:  "isolate",
		On:    OnSite,
		About: "every link of the site down, both directions: the site is cut off",
		Heal:  "parameters before it put back",
		Parse: parseIsolate,
	})
}

// Isolate takes every link of Site down.
type Isolate struct {
	Site string
	// Others are the sites Site's links go to, in the spec's order.
	Others []string
	// links are every link, for a Site that is PrimaryNode: its others
	// are found when it is applied.
	links [][2]string
}

func parseIsolate(r Reader, sub Subject, s Spec) Fault {
	f := &Isolate{Site: sub.Site}
	if s == nil {
		return f // the lab finds the links when it applies it
	}
	if sub.Site == PrimaryNode {
		f.links = s.Links()
		return f
	}
	f.Others = linkedTo(s.Links(), sub.Site)
	if len(f.Others) == 0 {
		r.Fail("site", "site %s has no [[link]]: there is nothing to cut it off from", sub.Site)
		return nil
	}
	return f
}

// Describe: "site eu isolate".
func (f *Isolate) Describe() string { return "site " + f.Site + " isolate" }

func isolateDirs(site string, others []string) [][2]string {
	var d [][2]string
	for _, o := range others {
		d = append(d, [2]string{site, o}, [2]string{o, site})
	}
	return d
}

// Parts are both directions of each of the site's links (none known for
// PrimaryNode's site before it is applied).
func (f *Isolate) Parts() []Part { return dirParts(isolateDirs(f.Site, f.Others)) }

// Apply takes every link down after saving its directions; if one cannot
// be, the others are put back.
func (f *Isolate) Apply(ctx context.Context, w World) (Heal, error) {
	site, others := f.Site, f.Others
	if site == PrimaryNode {
		var err error
		if site, err = primarySite(ctx, w, site); err != nil {
			return nil, err
		}
		others = linkedTo(f.links, site)
	}
	if len(others) == 0 {
		return nil, fmt.Errorf("site %s has no links to cut", site)
	}
	sv, err := save(w, isolateDirs(site, others))
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		if err := w.SetLink(site, o, true, []string{"down"}); err != nil {
			if rerr := sv.restore(w, "site "+site); rerr != nil {
				err = fmt.Errorf("%w; %v", err, rerr)
			}
			return nil, err
		}
	}
	return func(context.Context) error { return sv.restore(w, "site "+site) }, nil
}
