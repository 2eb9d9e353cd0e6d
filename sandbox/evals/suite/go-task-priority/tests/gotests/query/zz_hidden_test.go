package query

import (
	"testing"

	"taskq/task"
)

func TestHiddenPriorityTerms(t *testing.T) {
	tasks := []task.Task{{ID: 1, Priority: 1}, {ID: 2, Priority: 3}, {ID: 3, Priority: 5, Done: true}}
	cases := map[string][]bool{
		"priority=3":             {false, true, false},
		"priority>=3":            {false, true, true},
		"priority<=3":            {true, true, false},
		"priority>3":             {false, false, true},
		"priority<3":             {true, false, false},
		"priority>1 !done":       {false, true, false},
		"done priority=5":        {false, false, true},
		"priority>=0":            {true, true, true},
		"priority<1":             {false, false, false},
		"priority>=2 priority<5": {false, true, false},
	}
	for expr, want := range cases {
		f, err := Parse(expr)
		if err != nil {
			t.Fatalf("Parse(%q): %v", expr, err)
		}
		for i, tk := range tasks {
			if f.Match(tk) != want[i] {
				t.Errorf("Parse(%q).Match(task %d) = %v", expr, tk.ID, !want[i])
			}
		}
	}
	for _, bad := range []string{"priority", "priority>", "priority=high", "priority!=2", "priority:2", "prio>=2", "priority>=2x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) should fail", bad)
		}
	}
	if _, err := Parse("tag:x done !done"); err != nil {
		t.Errorf("old terms broke: %v", err)
	}
}
