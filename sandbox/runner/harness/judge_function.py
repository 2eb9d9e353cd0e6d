"""Call the candidate's entry point on each case and report what it returned.

    python3 judge_function.py SPEC_JSON

The spec holds the entry point, the cases' arguments (never their expected
values: those stay with the trusted host, which compares) and the timeouts.
Runs as the judge uid; each case is one call across the boundary, so what
comes back is plain data or a handle, and the host decides.
"""

from __future__ import annotations

import json
import sys

import wire
from remote import CandidateError, raised_by_candidate
from report import Judge


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    judge = Judge(float(spec["call_timeout_s"]), float(spec["load_timeout_s"]))
    connection = judge.connection
    if connection.loaded:
        entry = connection.attribute(spec["entry_point"])
        for index, case in enumerate(spec["cases"]):
            name = f"case {index}"
            judge.recorder.begin(name)
            try:
                args = [wire.decode(a) for a in case.get("args", [])]
                kwargs = {k: wire.decode(v) for k, v in case.get("kwargs", {}).items()}
                value = entry(*args, **kwargs)
                returned = wire.encode(value, _refuse)
            except CandidateError as exc:
                judge.recorder.end(name, exc)
                continue
            except BaseException as exc:
                if raised_by_candidate(exc):
                    judge.recorder.end(name, exc)
                else:
                    judge.recorder.end(name, exc, returned={"$unplain": type(value).__name__})
                continue
            judge.recorder.end(name, None, returned=returned)
    judge.finish()


def _refuse(obj: object) -> object:
    raise wire.Unencodable(type(obj).__name__)


if __name__ == "__main__":
    main()
