package faultkind

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// cut takes a site's links to some sites down, both directions, and
// leaves its other links up: the primary's site cut off from the
// majority of the HA manager's store while its clients (in the site, or
// in a site still linked to it) still reach it — the asymmetric
// partition a manager must fence.
//
//	site = "us"
//	do = "cut"
//	from = ["eu", "asia"]
//	for = "20s"
func init() {
	Register(Kind{
		Name:  "cut",
		On:    OnSite,
		About: "the site's links to the sites in from down, both directions; its other links stay up",
		Keys:  []Key{{Name: "from", About: `the sites it is cut off from: from = ["eu", "asia"], --from eu,asia`}},
		Heal:  "parameters before it put back",
		Parse: parseCut,
	})
}

// Cut takes the links between Site and each of From down. With Site
// PrimaryNode, the primary's site is cut from those of From it is linked
// to (From may name every site: the primary's own is left out).
type Cut struct {
	Site  string
	From  []string
	links [][2]string // every link, for PrimaryNode
}

func parseCut(r Reader, sub Subject, s Spec) Fault {
	var from []string
	switch v := r.Value("from").(type) {
	case nil:
		r.FailAt("from", `cut needs from: the sites %s is cut off from, like ["eu", "asia"] (all of them: use do = "isolate")`, sub.Site)
		return nil
	case string:
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				from = append(from, p)
			}
		}
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				r.Fail("from", `want a list of site names, like ["eu", "asia"]`)
				return nil
			}
			from = append(from, strings.TrimSpace(str))
		}
	default:
		r.Fail("from", `want a list of site names, like ["eu", "asia"]`)
		return nil
	}
	if len(from) == 0 {
		r.Fail("from", `want at least one site, like ["eu"]`)
		return nil
	}
	f := &Cut{Site: sub.Site}
	for _, o := range from {
		switch {
		case o == sub.Site && sub.Site != PrimaryNode:
			r.Fail("from", "site %s cannot be cut off from itself", o)
			return nil
		case slices.Contains(f.From, o):
			r.Fail("from", "site %s is named twice", o)
			return nil
		}
		f.From = append(f.From, o)
	}
	if s == nil {
		return f // the lab checks the links when it applies it
	}
	if sub.Site == PrimaryNode {
		f.links = s.Links()
		for _, o := range f.From {
			if len(linkedTo(f.links, o)) == 0 {
				r.Fail("from", "site %s has no [[link]]", clean(o))
				return nil
			}
		}
		return f
	}
	linked := linkedTo(s.Links(), sub.Site)
	for _, o := range f.From {
		if !slices.Contains(linked, o) {
			r.Fail("from", "no [[link]] joins %s and %s; %s is linked to %s", sub.Site, clean(o), sub.Site, orNone(linked))
			return nil
		}
	}
	return f
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "no site"
	}
	return strings.Join(list, ", ")
}

// Describe: "site us cut from eu, asia".
func (f *Cut) Describe() string { return "site " + f.Site + " cut from " + strings.Join(f.From, ", ") }

// Parts are both directions of each link it takes down (for PrimaryNode's
// site, those to every site of From: which is the primary's own is known
// only when it is applied).
func (f *Cut) Parts() []Part {
	if f.Site == PrimaryNode {
		return nil
	}
	return dirParts(isolateDirs(f.Site, f.From))
}

// Apply takes the links down after saving their directions; if one cannot
// be, the others are put back.
func (f *Cut) Apply(ctx context.Context, w World) (Heal, error) {
	site, from := f.Site, f.From
	if site == PrimaryNode {
		var err error
		if site, err = primarySite(ctx, w, site); err != nil {
			return nil, err
		}
		linked := linkedTo(f.links, site)
		from = nil
		for _, o := range f.From {
			if o != site && (f.links == nil || slices.Contains(linked, o)) {
				from = append(from, o)
			}
		}
		if len(from) == 0 {
			return nil, fmt.Errorf("site %s (the primary's) has no link to %s", site, strings.Join(f.From, ", "))
		}
	}
	what := "site " + site + " cut from " + strings.Join(from, ", ")
	sv, err := save(w, isolateDirs(site, from))
	if err != nil {
		return nil, err
	}
	for _, o := range from {
		if err := w.SetLink(site, o, true, []string{"down"}); err != nil {
			if rerr := sv.restore(w, what); rerr != nil {
				err = fmt.Errorf("%w; %v", err, rerr)
			}
			return nil, err
		}
	}
	return func(context.Context) error { return sv.restore(w, what) }, nil
}
