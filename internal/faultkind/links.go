package faultkind

import (
	"fmt"
	"strings"

	"replab/internal/linkem"
)

// What the link kinds share: saving directions before a change and
// putting them back exactly.

// saved is link directions' parameters from before a fault.
type saved struct {
	dirs   [][2]string
	params []linkem.Params
}

// save reads dirs' parameters from w.
func save(w Links, dirs [][2]string) (saved, error) {
	s := saved{dirs: dirs, params: make([]linkem.Params, len(dirs))}
	for i, d := range dirs {
		p, err := w.LinkParams(d[0], d[1])
		if err != nil {
			return saved{}, err
		}
		s.params[i] = p
	}
	return s, nil
}

// restore puts every saved direction back, trying each even when one
// fails; what names the fault in the error.
func (s saved) restore(w Links, what string) error {
	var errs []string
	for i, d := range s.dirs {
		if err := w.RestoreLink(d[0], d[1], s.params[i]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("restore %s: %s", what, strings.Join(errs, "; "))
	}
	return nil
}

// dirParts are link directions as Parts.
func dirParts(dirs [][2]string) []Part {
	out := make([]Part, len(dirs))
	for i, d := range dirs {
		out[i] = Part{Dir: d}
	}
	return out
}

// clean makes a value as written printable on one line.
func clean(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r == 0x2028 || r == 0x2029 }) {
		return s
	}
	return strings.Trim(fmt.Sprintf("%q", s), `"`)
}
