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
	a := s.Add("first", nil)
	b := s.Add("second", []string{"x"})
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
