"""The agent evaluator: tasks, agents, trials in sandbox sessions, metrics, reports, a gate.

Harbor and legacy Terminal-Bench tasks are read too, and ours written in Harbor's
format, by :mod:`sandbox.evals.formats` (its ``load_tasks`` reads every format).

A task is a directory::

    task.yaml      the task (validated strictly, like policies)
    files/         the initial workspace (copied to /workspace)
    tests/         hidden tests: copied in only after the agent has stopped
    solution/      the reference solution (never shown to agents): files laid over
                   the workspace, then ``solution/solve.sh`` run there if present
    environment/   optional: the task's own build context (see ``environment:``)

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
      framework: pytest       the platform runs pytest on tests/ (the default), or instead
      command: "bash check.sh"  a shell command judged by its exit status
      timeout_s: 120          (default 120)
      isolate_agent: true     command only: false runs the agent's code as the judge (unsafe)
    category: bugfix          free text, used to group metrics
    difficulty: easy          easy | medium | hard
    tags: [python]
    environment:              optional: the task's own environment instead of ``image``
      dockerfile: environment/Dockerfile   below environment/ (the build context); or
      image: "python:3.13-slim"            an image name (the operator's aliases apply)
      cpus: 2                 the request, lowered to ``policy``'s bounds (with notes)
      memory_mb: 1024
      storage_mb: 256         the workspace tmpfs
      network_allow: []       hosts; only those ``policy``'s rules allow are kept
      root: false             allowed only under a gVisor policy (still runs unprivileged)
      build_timeout_s: 600

A task with an ``environment`` is built before its first trial (found cached
after: :mod:`sandbox.environments`) and its trials run in sessions in it; each
trial's record carries ``environment`` (id, image, cached, build seconds, the
build log's path, notes).

How a trial ends: once the agent stops, every process it left is killed. For
pytest tests (and a ``command`` with ``isolate_agent: false``), as the judge
uid, with nothing else in ``/judge`` yet, the workspace is copied to
``/judge/work``: directories and files, a file the agent left executable stays
executable (0700, others 0600), and a symbolic link survives only if it
resolves, once the whole tree is copied, to something that exists inside
``/judge/work`` (a link to ``/judge/...``, to a system file, to ``..``, a
dangling link or a loop is dropped, so the judge never follows the agent's
links out of the copy); what the judge cannot read, FIFOs, sockets and devices
are left out. Only then are the hidden tests written to ``/judge/tests``. The
tests run as the judge uid in ``/judge/tests`` with ``$WORK`` (and
``$WORKSPACE``) set to ``/judge/work``, ``HOME`` ``/judge``, ``USER`` and
``LOGNAME`` ``judge``, and a ``PATH`` of system directories only: tests import
or run the agent's work from there. A ``command`` (isolated, the default) gets
``$WORK=/workspace`` itself, closed to the judge uid, and reaches it only through
``agent-run`` (:mod:`sandbox.core.agent_code`). The agent never sees the tests,
and nothing it left can change after it stopped.

``framework: pytest``: the platform runs ``pytest -q -p no:cacheprovider
/judge/tests`` itself, through its harness (``runner/harness/pytest_channel.py``),
which registers its own plugin as pytest starts, before any ``conftest.py``, test
module or agent code is imported. The plugin reads a random nonce the runner made
for this run from an inherited descriptor (never the environment, the arguments
or a file) and closes it; at the end of the session it sends every test's outcome
with the nonce on a pipe that only the runner, outside the test process, reads.
The trial passes when pytest exits 0 and that report, with the right nonce, lists
at least one passed test and no failure, error, collection error or test left
without an outcome. A report file the agent's code writes means nothing; no
report (``os._exit(0)`` at import, a killed pytest) or a wrong one fails, and so
do ``sys.exit(0)`` at import (a collection error) and ``pytest.exit()`` in a
test (tests left without an outcome).

``command``: run with ``bash`` from ``/judge/.command.sh``; the trial passes when
it exits 0. Nothing else is evidence, so a command must decide its exit status
itself, from the agent's work, and never take it from the agent's code: a command
that runs pytest or names a JUnit report is refused (use ``framework: pytest``).
It runs the agent's programs as the sandbox uid, never as the judge: ``$WORK`` is
``/workspace``, closed to the judge, ``agent-run CMD`` runs ``CMD`` there as the
sandbox uid, and the interpreters on ``PATH`` do so for a run naming
``/workspace`` (:mod:`sandbox.core.agent_code`); ``isolate_agent: false`` is the
old, unsafe way (``$WORK`` the judge's copy, the agent's code run as the judge).

Residual risk, said plainly: agent code that the tests import runs inside the
test process, as the judge uid, with that process's memory. Code written to
target this harness can read the nonce there (or patch pytest) and forge a
passing report; it can also read the hidden tests in ``/judge/tests``. The
channel shuts out report files, exit statuses and every other process (the
harness is not dumpable, so programs the tests start cannot read its memory or
descriptors); it cannot shut out the process it runs in. Tests that must hold
against a forged report run the agent's work as a separate program and compare
its output (``suite/fix-js-slugify`` does so for JavaScript). Such a program started
by pytest still runs as the judge uid: it cannot forge the report, but it can read
``/judge/tests``; a ``command`` test runs it as the sandbox uid instead.
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
