"""The tasks' hidden tests run inside sandboxes during evaluations, never in this test suite."""

collect_ignore_glob = ["*"]
