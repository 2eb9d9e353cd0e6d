// Package query parses list filters such as "!done tag:home".
package query

import (
	"fmt"
	"strings"

	"taskq/task"
)

// Filter holds every term of a query; a task matches when all terms do.
type Filter struct {
	terms []func(task.Task) bool
}

// Parse reads space-separated terms: "done", "!done" and "tag:NAME".
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
