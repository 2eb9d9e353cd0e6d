package task

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestHiddenPriorityJSON(t *testing.T) {
	raw, err := json.Marshal(Task{ID: 7, Title: "x", Priority: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"priority":5`) {
		t.Fatalf("no priority key in %s", raw)
	}
	var back Task
	if err := json.Unmarshal([]byte(`{"id":1,"title":"y","priority":2}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.Priority != 2 {
		t.Fatalf("priority %d", back.Priority)
	}
}
