// Command taskq manages a to-do list:
//
//	taskq [-db FILE] add [-tag TAG]... [-priority N] TITLE...
//	taskq [-db FILE] list [QUERY]...
//	taskq [-db FILE] done ID
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"taskq/query"
	"taskq/store"
	"taskq/task"
)

type tagList []string

func (l *tagList) String() string     { return strings.Join(*l, ",") }
func (l *tagList) Set(v string) error { *l = append(*l, v); return nil }

func format(t task.Task) string {
	mark := " "
	if t.Done {
		mark = "x"
	}
	line := fmt.Sprintf("%3d [%s] P%d %s", t.ID, mark, t.Priority, t.Title)
	if len(t.Tags) > 0 {
		line += " #" + strings.Join(t.Tags, " #")
	}
	return line
}

func run(args []string) error {
	global := flag.NewFlagSet("taskq", flag.ContinueOnError)
	db := global.String("db", "tasks.json", "the task file")
	if err := global.Parse(args); err != nil {
		return err
	}
	rest := global.Args()
	if len(rest) == 0 {
		return fmt.Errorf("usage: taskq [-db FILE] add|list|done ...")
	}
	s, err := store.Open(*db)
	if err != nil {
		return err
	}
	switch rest[0] {
	case "add":
		cmd := flag.NewFlagSet("add", flag.ContinueOnError)
		var tags tagList
		cmd.Var(&tags, "tag", "a tag (repeatable)")
		priority := cmd.Int("priority", task.DefaultPriority, "1 (lowest) to 5 (highest)")
		if err := cmd.Parse(rest[1:]); err != nil {
			return err
		}
		if cmd.NArg() == 0 {
			return fmt.Errorf("add: a title is required")
		}
		t, err := s.Add(strings.Join(cmd.Args(), " "), tags, *priority)
		if err != nil {
			return err
		}
		if err := s.Save(); err != nil {
			return err
		}
		fmt.Printf("added %d\n", t.ID)
	case "list":
		f, err := query.Parse(strings.Join(rest[1:], " "))
		if err != nil {
			return err
		}
		for _, t := range s.List(f) {
			fmt.Println(format(t))
		}
	case "done":
		if len(rest) != 2 {
			return fmt.Errorf("usage: taskq done ID")
		}
		id, err := strconv.Atoi(rest[1])
		if err != nil {
			return fmt.Errorf("done: bad id %q", rest[1])
		}
		if err := s.Complete(id); err != nil {
			return err
		}
		if err := s.Save(); err != nil {
			return err
		}
		fmt.Printf("done %d\n", id)
	default:
		return fmt.Errorf("unknown command %q", rest[0])
	}
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "taskq:", err)
		os.Exit(2)
	}
}
