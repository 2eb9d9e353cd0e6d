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
