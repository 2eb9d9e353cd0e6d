"""Run hidden pytest files against the candidate's module, which lives in another process.

    python3 judge_pytest.py SPEC_JSON

Runs as the judge uid, in /judge, with no configuration from anywhere the
candidate can write. ``import solution`` (the spec's module name) in a test
gets a stand-in whose attributes call into the candidate's process: the
candidate's code never runs inside pytest, so it cannot patch pytest, plant a
``conftest.py`` that matters, or forge a report.

``from solution import *`` gives the test the candidate's own public names
(:meth:`remote.Connection.public_names`) except any the test module has bound by
then and any builtin's name: the candidate cannot swap the test's ``math`` or
``sorted`` for its own (and the test's later bindings replace the candidate's,
as in Python).
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import json
import os
import sys
import types
from typing import Any

from remote import Connection
from report import Judge


class CandidateModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the candidate's module name from stand-ins, before any real finder."""

    def __init__(self, modules: dict[str, Any]) -> None:
        self.modules = modules

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname in self.modules:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: Any) -> Any:
        return self.modules[spec.name]

    def exec_module(self, module: Any) -> None:
        return None


class StarImports:
    """``builtins.__import__`` with ``from MODULE import *`` of the candidate filtered."""

    def __init__(self, connection: Connection, module: str, original: Any) -> None:
        self.connection = connection
        self.module = module
        self.original = original

    def __call__(
        self,
        name: str,
        globals: dict[str, Any] | None = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        if level == 0 and name == self.module and fromlist and "*" in fromlist:
            return self.view(globals or {})
        return self.original(name, globals, locals, fromlist, level)

    def view(self, importer: dict[str, Any]) -> types.ModuleType:
        """The candidate's module as this importer's star import may see it."""
        taken = set(importer) | set(vars(builtins))
        view = types.ModuleType(self.module)
        vars(view)["__all__"] = [n for n in self.connection.public_names() if n not in taken]
        view.__getattr__ = self.connection.attribute  # type: ignore[method-assign]
        return view


class Outcomes:
    """A pytest plugin recording every test's verdict in the judge's report."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.collected: list[str] = []

    def pytest_collection_finish(self, session: Any) -> None:
        self.collected = [item.nodeid for item in session.items]

    def pytest_runtest_makereport(self, item: Any, call: Any) -> None:
        import pytest

        recorder = self.judge.recorder
        if call.when == "setup":
            recorder.begin(item.nodeid)
        if ("judged", True) in item.user_properties:
            return
        if call.excinfo is not None:
            if call.excinfo.errisinstance(pytest.skip.Exception):
                recorder.tests.append({"name": item.nodeid, "verdict": "skipped"})
            else:
                recorder.end(item.nodeid, call.excinfo.value)
            item.user_properties.append(("judged", True))
        elif call.when == "teardown":
            recorder.end(item.nodeid, None)
            item.user_properties.append(("judged", True))

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self.judge.recorder.tests.append(
                {
                    "name": report.nodeid or "collection",
                    "verdict": "runtime_error",
                    "message": str(report.longrepr)[-500:],
                }
            )


def main() -> None:
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    judge = Judge(spec)
    if not judge.connection.loaded:
        judge.finish()
        return
    import pytest

    module = spec.get("module", "solution")
    sys.meta_path.insert(0, CandidateModules({module: judge.connection.module(module)}))
    builtins.__import__ = StarImports(judge.connection, module, builtins.__import__)  # type: ignore[assignment]
    tests_dir = spec["tests_dir"]
    os.chdir(tests_dir)
    outcomes = Outcomes(judge)
    arguments = [
        tests_dir,
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        os.devnull,
        "--rootdir",
        tests_dir,
    ]
    if spec.get("early_stop"):
        arguments.append("--exitfirst")
    code = pytest.main(arguments, plugins=[outcomes])
    # Every collected test is expected: one the run never reached counts as not passed.
    judge.finish(pytest_exit_code=int(code), expected=outcomes.collected)


if __name__ == "__main__":
    main()
