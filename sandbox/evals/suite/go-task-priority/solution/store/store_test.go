package store

import (
	"path/filepath"
	"testing"

	"taskq/query"
)

func TestAddCompleteSaveOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.json")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Add("first", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Add("second", []string{"x"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != 1 || b.ID != 2 {
		t.Fatalf("ids %d %d", a.ID, b.ID)
	}
	if err := s.Complete(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := query.Parse("!done")
	got := again.List(open)
	if len(got) != 1 || got[0].Title != "second" {
		t.Fatalf("open tasks: %+v", got)
	}
	if err := again.Complete(9); err == nil {
		t.Error("Complete(9) should fail")
	}
}

func TestPriorities(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{2, 5, 0, 5} {
		if _, err := s.Add("t", nil, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Add("bad", nil, 6); err == nil {
		t.Error("priority 6 should be refused")
	}
	all, _ := query.Parse("")
	var order []int
	for _, task := range s.List(all) {
		order = append(order, task.ID)
	}
	if len(order) != 4 || order[0] != 2 || order[1] != 4 || order[2] != 3 || order[3] != 1 {
		t.Errorf("order %v, want [2 4 3 1]", order)
	}
}
