package store

import (
	"os"
	"path/filepath"
	"testing"

	"taskq/query"
	"taskq/task"
)

func ids(tasks []task.Task) []int {
	out := []int{}
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

func same(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHiddenAddValidatesAndDefaults(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "t.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Add("default", []string{"a"}, 0)
	if err != nil || got.Priority != 3 || got.Title != "default" {
		t.Fatalf("Add(0) = %+v, %v", got, err)
	}
	for _, p := range []int{1, 5} {
		if got, err := s.Add("ok", nil, p); err != nil || got.Priority != p {
			t.Fatalf("Add(%d) = %+v, %v", p, got, err)
		}
	}
	for _, p := range []int{-1, 6, 100} {
		if _, err := s.Add("bad", nil, p); err == nil {
			t.Errorf("Add(priority %d) should fail", p)
		}
	}
	all, _ := query.Parse("")
	if n := len(s.List(all)); n != 3 {
		t.Fatalf("%d tasks after refused adds, want 3", n)
	}
}

func TestHiddenListOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	s, _ := Open(path)
	for _, p := range []int{1, 4, 0, 4, 5, 1, 3} {
		if _, err := s.Add("t", nil, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Complete(5); err != nil {
		t.Fatal(err)
	}
	all, _ := query.Parse("")
	if got := ids(s.List(all)); !same(got, []int{5, 2, 4, 3, 7, 1, 6}) {
		t.Fatalf("order %v", got)
	}
	open, _ := query.Parse("!done priority>=3")
	if got := ids(s.List(open)); !same(got, []int{2, 4, 3, 7}) {
		t.Fatalf("filtered order %v", got)
	}
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(again.List(all)); !same(got, []int{5, 2, 4, 3, 7, 1, 6}) {
		t.Fatalf("order after reload %v", got)
	}
	if next, _ := again.Add("next", nil, 0); next.ID != 8 {
		t.Fatalf("next id %d", next.ID)
	}
}

func TestHiddenLegacyFileGetsDefaultPriority(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.json")
	legacy := `{"next_id": 3, "tasks": [
  {"id": 1, "title": "old one", "done": false},
  {"id": 2, "title": "old two", "done": true, "tags": ["x"]}
]}`
	if err := os.WriteFile(path, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add("new", nil, 4); err != nil {
		t.Fatal(err)
	}
	all, _ := query.Parse("")
	list := s.List(all)
	if got := ids(list); !same(got, []int{3, 1, 2}) {
		t.Fatalf("order %v", got)
	}
	for _, task := range list[1:] {
		if task.Priority != 3 {
			t.Fatalf("legacy task %d has priority %d", task.ID, task.Priority)
		}
	}
	three, _ := query.Parse("priority=3")
	if got := ids(s.List(three)); !same(got, []int{1, 2}) {
		t.Fatalf("priority=3 gives %v", got)
	}
}
