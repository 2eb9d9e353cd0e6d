"""The planted tasks' hidden tests run inside sandboxes during evaluations, never here."""

collect_ignore_glob = ["*"]
