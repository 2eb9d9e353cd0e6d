// Package task defines a to-do task.
package task

import "strings"

// Task is one to-do item.
type Task struct {
	ID    int      `json:"id"`
	Title string   `json:"title"`
	Done  bool     `json:"done"`
	Tags  []string `json:"tags,omitempty"`
}

// HasTag reports whether the task carries the tag (case-insensitive).
func (t Task) HasTag(tag string) bool {
	for _, have := range t.Tags {
		if strings.EqualFold(have, tag) {
			return true
		}
	}
	return false
}
