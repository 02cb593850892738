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
}

func parseIsolate(r Reader, sub Subject, s Spec) Fault {
	f := &Isolate{Site: sub.Site}
	if s == nil {
		return f // the lab finds the links when it applies it
	}
	for _, l := range s.Links() {
		switch sub.Site {
		case l[0]:
			f.Others = append(f.Others, l[1])
		case l[1]:
			f.Others = append(f.Others, l[0])
		}
	}
	if len(f.Others) == 0 {
		r.Fail("site", "site %s has no [[link]]: there is nothing to cut it off from", sub.Site)
		return nil
	}
	return f
}

// Describe: "site eu isolate".
func (f *Isolate) Describe() string { return "site " + f.Site + " isolate" }

func (f *Isolate) dirs() [][2]string {
	var d [][2]string
	for _, o := range f.Others {
		d = append(d, [2]string{f.Site, o}, [2]string{o, f.Site})
	}
	return d
}

// Parts are both directions of each of the site's links.
func (f *Isolate) Parts() []Part { return dirParts(f.dirs()) }

// Apply takes every link down after saving its directions; if one cannot
// be, the others are put back.
func (f *Isolate) Apply(ctx context.Context, w World) (Heal, error) {
	if len(f.Others) == 0 {
		return nil, fmt.Errorf("site %s has no links to cut", f.Site)
	}
	sv, err := save(w, f.dirs())
	if err != nil {
		return nil, err
	}
	for _, o := range f.Others {
		if err := w.SetLink(f.Site, o, true, []string{"down"}); err != nil {
			if rerr := sv.restore(w, "site "+f.Site); rerr != nil {
				err = fmt.Errorf("%w; %v", err, rerr)
			}
			return nil, err
		}
	}
	return func(context.Context) error { return sv.restore(w, "site "+f.Site) }, nil
}
