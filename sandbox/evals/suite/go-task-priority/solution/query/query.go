// Package query parses list filters such as "!done tag:home priority>=4".
package query

import (
	"fmt"
	"strconv"
	"strings"

	"taskq/task"
)

// Filter holds every term of a query; a task matches when all terms do.
type Filter struct {
	terms []func(task.Task) bool
}

var comparisons = []struct {
	op   string
	test func(have, want int) bool
}{
	// Two-character operators first, so that ">=" is not read as ">".
	{">=", func(h, w int) bool { return h >= w }},
	{"<=", func(h, w int) bool { return h <= w }},
	{">", func(h, w int) bool { return h > w }},
	{"<", func(h, w int) bool { return h < w }},
	{"=", func(h, w int) bool { return h == w }},
}

func priorityTerm(term string) (func(task.Task) bool, error) {
	rest := strings.TrimPrefix(term, "priority")
	for _, c := range comparisons {
		if !strings.HasPrefix(rest, c.op) {
			continue
		}
		want, err := strconv.Atoi(rest[len(c.op):])
		if err != nil {
			return nil, fmt.Errorf("bad priority in %q", term)
		}
		test := c.test
		return func(t task.Task) bool { return test(t.Priority, want) }, nil
	}
	return nil, fmt.Errorf("unknown query term %q", term)
}

// Parse reads space-separated terms: "done", "!done", "tag:NAME" and
// "priority" compared with =, >=, <=, > or < to an integer.
func Parse(expr string) (Filter, error) {
	var f Filter
	for _, term := range strings.Fields(expr) {
		switch {
		case term == "done":
			f.terms = append(f.terms, func(t task.Task) bool { return t.Done })
		case term == "!done":
			f.terms = append(f.terms, func(t task.Task) bool { return !t.Done })
		case strings.HasPrefix(term, "tag:") && len(term) > 4:
			tag := term[4:]
			f.terms = append(f.terms, func(t task.Task) bool { return t.HasTag(tag) })
		case strings.HasPrefix(term, "priority"):
			match, err := priorityTerm(term)
			if err != nil {
				return Filter{}, err
			}
			f.terms = append(f.terms, match)
		default:
			return Filter{}, fmt.Errorf("unknown query term %q", term)
		}
	}
	return f, nil
}

// Match reports whether the task satisfies every term.
func (f Filter) Match(t task.Task) bool {
	for _, term := range f.terms {
		if !term(t) {
			return false
		}
	}
	return true
}
