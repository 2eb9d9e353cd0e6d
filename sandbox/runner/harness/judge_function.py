"""Call the candidate's entry point on each case and report what it returned.

    python3 judge_function.py SPEC_JSON

The spec holds the entry point, the cases' arguments (never their expected
values: those stay with the trusted host, which compares) and the timeouts.
Runs as the judge uid; each case is one call across the boundary, so what
comes back is plain data or a handle, and the host decides.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import wire
from report import Judge, StopTests


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    judge = Judge(spec)
    if judge.connection.loaded:
        with contextlib.suppress(StopTests):  # early stop: the rest is reported as not reached
            _call_cases(judge, spec)
    judge.finish()


def _call_cases(judge: Judge, spec: dict[str, Any]) -> None:
    try:
        entry = judge.connection.attribute(spec["entry_point"])
    except BaseException as exc:  # no such function: every case fails
        entry = _missing(exc)
    if not callable(entry):
        entry = _missing(TypeError(f"{spec['entry_point']} is not callable"))
    for index, case in enumerate(spec["cases"]):
        name = f"case {index}"
        judge.recorder.begin(name)
        try:
            args = [wire.decode(a) for a in case.get("args", [])]
            kwargs = {k: wire.decode(v) for k, v in case.get("kwargs", {}).items()}
            value = entry(*args, **kwargs)
        except BaseException as exc:
            judge.recorder.end(name, exc)
            continue
        try:
            returned = wire.encode(value, _refuse)
        except wire.Unencodable as exc:  # a handle to a remote object: not a value
            judge.recorder.end(name, exc)
            continue
        judge.recorder.end(name, None, returned=returned)


def _missing(exc: BaseException) -> Any:
    def fail(*_: Any, **__: Any) -> Any:
        raise exc

    return fail


def _refuse(obj: object) -> object:
    raise wire.Unencodable(type(obj).__name__)


if __name__ == "__main__":
    main()
