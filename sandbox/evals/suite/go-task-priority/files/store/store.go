// Package store keeps tasks in a JSON file.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"taskq/query"
	"taskq/task"
)

type file struct {
	NextID int         `json:"next_id"`
	Tasks  []task.Task `json:"tasks"`
}

// Store is the task list of one file.
type Store struct {
	path string
	data file
}

// Open reads the store at path; a missing file is an empty store.
func Open(path string) (*Store, error) {
	s := &Store{path: path, data: file{NextID: 1}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &s.data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Save writes the store back to its file.
func (s *Store) Save() error {
	raw, err := json.MarshalIndent(s.data, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(s.path, append(raw, '\n'), 0o644)
}

// Add appends a new open task and returns it.
func (s *Store) Add(title string, tags []string) task.Task {
	t := task.Task{ID: s.data.NextID, Title: title, Tags: tags}
	s.data.NextID++
	s.data.Tasks = append(s.data.Tasks, t)
	return t
}

// Complete marks a task done.
func (s *Store) Complete(id int) error {
	for i := range s.data.Tasks {
		if s.data.Tasks[i].ID == id {
			s.data.Tasks[i].Done = true
			return nil
		}
	}
	return fmt.Errorf("no task %d", id)
}

// List returns the tasks matching the filter, by id.
func (s *Store) List(f query.Filter) []task.Task {
	var out []task.Task
	for _, t := range s.data.Tasks {
		if f.Match(t) {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
