"""How a task's ``tests.command`` runs the agent's programs: as the sandbox uid, never the judge's.

A hidden-test command runs as the judge uid in ``/judge/tests``; whatever of
the agent's code it ran as that uid could read the expected output next to it
(``expected.txt``, by its name, ``../tests``, ``/proc/PID/cwd``, an inherited
descriptor, an exported variable) and print it. So by default (``isolate_agent``,
see :class:`sandbox.evals.tasks.TestSpec`):

- ``$WORK`` is the live workspace, ``/workspace``, closed to the judge uid
  (mode 0700, set by the sandbox uid before the tests start): the judge can
  neither read nor run anything in it directly, so a test that tries fails
  instead of running the agent's code as the judge;
- ``agent-run CMD [ARGS...]`` (on ``PATH``, also ``$AGENT_RUN``) runs ``CMD`` as
  the sandbox uid in ``/workspace``: stdin in, stdout and stderr out, its exit
  status (124 out of time, 125 it could not run; ``agent-run --timeout S ...``).
  It is the judge's ``isolate_candidate`` machinery
  (``runner/harness/program_server.py`` as the runner's peer, which cannot open
  the judge's ``/proc`` entries, ``run_candidate.py`` as the client), with no
  fixed program: ``agent-run cat out.txt`` reads what the agent wrote;
- the interpreters on ``PATH`` (``python3``, ``bash``, ``node`` ...) are shims:
  started with an argument (or ``PYTHONPATH`` ...) naming ``/workspace``, they
  go through ``agent-run``, so ``python3 "$WORK/rev.py" < input.txt`` runs the
  agent's program as the sandbox uid unchanged; otherwise they are the real ones.

With ``isolate_agent: false`` (the old, vulnerable behaviour, which
``sandbox quality check`` reports) ``$WORK`` is the judge's copy,
``/judge/work``, and ``agent-run`` runs its command there, as the judge.
"""

from __future__ import annotations

import shlex
from typing import Any, Final

from sandbox.backends.base import HARNESS_DIR, JUDGE_DIR, WORKDIR

__all__ = [
    "AGENT_BIN",
    "INTERPRETERS",
    "LIB_VARIABLES",
    "VERIFIER_BIN_COMMAND",
    "agent_peer",
    "bin_command",
    "verifier_peer",
]

AGENT_BIN: Final = f"{JUDGE_DIR}/bin"
AGENT_RUN: Final = f"{AGENT_BIN}/agent-run"
INTERPRETERS: Final = ("python3", "python", "bash", "sh", "node", "perl", "ruby", "php")
LIB_VARIABLES: Final = ("PYTHONPATH", "NODE_PATH", "PERL5LIB", "RUBYLIB")
"""Variables that make an interpreter load code from where they point."""


def _shim(name: str) -> str:
    """The shell text that writes the shim of ``name`` (resolved before the shims exist)."""
    tested = " ".join(f'"${{{v}:-}}"' for v in LIB_VARIABLES)
    body = (
        "#!/bin/sh\n"
        f'for arg in "$@" {tested}; do\n'
        f'  case "$arg" in *{WORKDIR}|*{WORKDIR}/*|*{WORKDIR}:*) '
        f'exec {AGENT_RUN} {name} "$@";; esac\n'
        "done\n"
        f'exec "$real" "$@"\n'
    )
    quoted = shlex.quote(body).replace('"$real"', '"\'"$real"\'"')
    return (
        f"real=$(command -v {name}) && case $real in /*) "
        f"printf '%s' {quoted} > {AGENT_BIN}/{name} && chmod 0700 {AGENT_BIN}/{name};; esac"
    )


def bin_command(*, isolated: bool) -> str:
    """Shell text (run as the judge) that makes ``AGENT_BIN``: ``agent-run`` and the shims."""
    if not isolated:
        runner = '#!/bin/sh\ncd "$WORK" || exit 125\nexec "$@"\n'
        return (
            f"mkdir -p {AGENT_BIN} && printf '%s' {shlex.quote(runner)} > {AGENT_RUN} && "
            f"chmod 0700 {AGENT_RUN}"
        )
    runner = f'#!/bin/sh\nexec "$python" -I {HARNESS_DIR}/run_candidate.py "$@"\n'
    quoted = shlex.quote(runner).replace('"$python"', '"\'"$python"\'"')
    shims = "; ".join(_shim(name) for name in INTERPRETERS)
    return (
        f"mkdir -p {AGENT_BIN} && python=$(command -v python3) && "
        f"printf '%s' {quoted} > {AGENT_RUN} && chmod 0700 {AGENT_RUN} && "
        f"{{ {shims}; true; }}"
    )


def agent_peer(env: dict[str, str], timeout_s: float) -> dict[str, Any]:
    """The runner's peer that serves ``agent-run``: any command, as the sandbox uid."""
    server = ["python3", "-I", f"{HARNESS_DIR}/program_server.py", "[]", f"{timeout_s:g}"]
    return {"argv": server, "cwd": WORKDIR, "env": env, "files": {}}


# A Harbor-style verifier (a ``test.sh`` written for root that drops to the agent's uid
# with ``setpriv``) gets ``agent-run`` from ``runner/harness/agent_run.py`` instead: it
# keeps the caller's working directory, stdin/stdout/stderr and signals, as setpriv does,
# and several calls may run at once. The verifier then works on the live workspace
# (links out of it pruned first), so no interpreter shims are set up.
VERIFIER_BIN_COMMAND: Final = (
    f"mkdir -p {AGENT_BIN} && printf '#!/bin/sh\\nexec python3 -I {HARNESS_DIR}/agent_run.py "
    f'"$@"\\n\' > {AGENT_RUN} && chmod 0700 {AGENT_RUN}'
)


def verifier_peer(env: dict[str, str]) -> dict[str, Any]:
    """The runner's peer that serves a verifier's ``agent-run``, as the sandbox uid."""
    server = ["python3", "-I", f"{HARNESS_DIR}/agent_run_server.py"]
    return {"argv": server, "cwd": WORKDIR, "env": env, "files": {}}
