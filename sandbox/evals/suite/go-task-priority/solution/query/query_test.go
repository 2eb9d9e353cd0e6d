package query

import (
	"testing"

	"taskq/task"
)

func TestParseAndMatch(t *testing.T) {
	home := task.Task{ID: 1, Title: "water plants", Tags: []string{"home"}}
	work := task.Task{ID: 2, Title: "report", Done: true, Tags: []string{"Work"}}
	cases := []struct {
		expr       string
		home, work bool
	}{
		{"", true, true},
		{"done", false, true},
		{"!done", true, false},
		{"tag:work", false, true},
		{"!done tag:home", true, false},
	}
	for _, c := range cases {
		f, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.expr, err)
		}
		if f.Match(home) != c.home || f.Match(work) != c.work {
			t.Errorf("Parse(%q) matches home=%v work=%v", c.expr, f.Match(home), f.Match(work))
		}
	}
	if _, err := Parse("bogus"); err == nil {
		t.Error("Parse(bogus) should fail")
	}
}

func TestPriorityTerms(t *testing.T) {
	urgent := task.Task{ID: 1, Priority: 5}
	later := task.Task{ID: 2, Priority: 2}
	cases := []struct {
		expr          string
		urgent, later bool
	}{
		{"priority>=4", true, false},
		{"priority<3", false, true},
		{"priority=2", false, true},
		{"priority>2", true, false},
		{"priority<=5", true, true},
	}
	for _, c := range cases {
		f, err := Parse(c.expr)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.expr, err)
		}
		if f.Match(urgent) != c.urgent || f.Match(later) != c.later {
			t.Errorf("Parse(%q) wrong", c.expr)
		}
	}
	for _, bad := range []string{"priority", "priority>=x", "priority!=3", "priority:3"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) should fail", bad)
		}
	}
}
