package spec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxErrors is how many errors an ErrorList prints before summarising the rest.
const MaxErrors = 20

// Error is one user error in a spec: where it is, which field, and what is
// wrong and accepted. Its Error() is a single line:
//
//	two-sites.toml:12: link[1].delay = "80": missing unit; use a duration like "80ms", "1.5s", "250us"
type Error struct {
	File  string // spec file name as given to Load or Parse
	Line  int    // 1-based line; 0 when there is no file (ApplyKV)
	Field string // e.g. "link[1].delay", "site.eu.tcp_rmem"; may be ""
	Value string // the value as written, e.g. `"80"`; may be ""
	Msg   string // what is wrong and what is accepted
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
		if e.Line > 0 {
			b.WriteString(strconv.Itoa(e.Line))
			b.WriteString(":")
		}
		b.WriteString(" ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		if e.Value != "" {
			b.WriteString(" = ")
			b.WriteString(e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every error found in one spec, sorted by line. Its Error()
// prints one error per line, at most MaxErrors of them.
type ErrorList []*Error

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == MaxErrors {
			fmt.Fprintf(&b, "\n%s: %d more errors not shown", e.File, len(l)-MaxErrors)
			break
		}
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// sortErrors orders errors by line, keeping the order they were found in
// within a line, and drops exact duplicates.
func sortErrors(l ErrorList) ErrorList {
	sort.SliceStable(l, func(i, j int) bool { return l[i].Line < l[j].Line })
	out := l[:0]
	seen := map[string]bool{}
	for _, e := range l {
		s := e.Error()
		if seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, e)
	}
	return out
}

// DidYouMean returns ` (did you mean "x"?)` for the candidate closest to
// word, or "" when none is close: for error messages about a spec.
func DidYouMean(word string, candidates []string) string { return didYouMean(word, candidates) }

func didYouMean(word string, candidates []string) string {
	best, bestD := "", 1<<30
	lw := strings.ToLower(word)
	for _, c := range candidates {
		d := editDistance(lw, strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := 0 // short words: only a difference in case
	switch {
	case len(word) >= 5:
		limit = 2
	case len(word) >= 3:
		limit = 1
	}
	if best == "" || bestD > limit {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the optimal-string-alignment distance (Levenshtein plus
// adjacent transpositions) between a and b, compared byte by byte. Long inputs
// are cut to keep it cheap.
func editDistance(a, b string) int {
	const maxLen = 64
	if len(a) > maxLen {
		a = a[:maxLen]
	}
	if len(b) > maxLen {
		b = b[:maxLen]
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
