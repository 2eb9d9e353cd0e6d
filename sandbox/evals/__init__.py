"""The agent evaluator: tasks, agents, trials in sandbox sessions, metrics, reports, a gate.

A task is a directory::

    task.yaml      the task (validated strictly, like policies)
    files/         the initial workspace (copied to /workspace)
    tests/         hidden tests: copied in only after the agent has stopped
    solution/      the reference solution (never shown to agents): files laid over
                   the workspace, then ``solution/solve.sh`` run there if present

``task.yaml``::

    instruction: |            what the agent is asked to do (required)
      ...
    image: python             python | polyglot (default python)
    policy: default           a policy name of the platform (default "default")
    setup: "make deps"        a shell command run once in /workspace before the agent (optional)
    agent:
      timeout_s: 600          wall-clock budget of the agent (default 600)
      max_steps: 50           tool calls allowed (default 50)
    tests:
      command: "python3 -m pytest -q -p no:cacheprovider --junitxml=/judge/report.xml /judge/tests"
      timeout_s: 120          (default 120)
    category: bugfix          free text, used to group metrics
    difficulty: easy          easy | medium | hard
    tags: [python]

How a trial ends: once the agent stops, every process it left is killed; the
workspace is copied to ``/judge/work`` and the hidden tests are written to
``/judge/tests``, both owned by the judge uid (the agent never sees the tests,
and nothing it left can change after it stopped); ``tests.command`` runs with
``bash -c`` as the judge uid in ``/judge/tests``, with ``$WORK`` (and
``$WORKSPACE``) set to ``/judge/work``: tests import or run the agent's work
from there. ``PATH`` holds only system directories. The trial passes when the
command exits 0 and, if it wrote a JUnit report to ``/judge/report.xml``, that
report has at least one test and no failure or error.
"""

from .agents import (
    Agent,
    AgentError,
    NullAgent,
    OpenAIAgent,
    OpenAIConfig,
    OracleAgent,
    ReplayAgent,
    Tools,
    TrialContext,
)
from .compare import Comparison, compare_runs, compare_stats, stratified_test
from .metrics import pass_at_k, pass_hat_k, summarize
from .report import build_report, render_html, write_reports
from .runner import OUTCOMES, Outcome, RunSummary, run_eval, run_local
from .tasks import Task, TaskConfig, TaskError, load_task, load_tasks

__all__ = [
    "OUTCOMES",
    "Agent",
    "AgentError",
    "Comparison",
    "NullAgent",
    "OpenAIAgent",
    "OpenAIConfig",
    "OracleAgent",
    "Outcome",
    "ReplayAgent",
    "RunSummary",
    "Task",
    "TaskConfig",
    "TaskError",
    "Tools",
    "TrialContext",
    "build_report",
    "compare_runs",
    "compare_stats",
    "load_task",
    "load_tasks",
    "pass_at_k",
    "pass_hat_k",
    "render_html",
    "run_eval",
    "run_local",
    "stratified_test",
    "summarize",
    "write_reports",
]
