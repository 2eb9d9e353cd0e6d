"""The texts of hack solutions: files an agent could leave, programs a model could submit.

Nothing here runs on the host: these are strings written into sandboxes by the
probes of :mod:`sandbox.quality.probes`. Each is built to *look* like a pass to
a careless verifier while solving nothing; a probe that passes therefore shows
a reward loophole. Python hacks are complete modules that work both when
imported and when run as a script; for other languages a *hook* is spliced
into a program so that it runs before anything else (a constructor in C and
C++, ``init`` in Go, a static initialiser in Java, the first statement of each
function in Rust, an ``initial`` block of the testbench (else the first module) in
Verilog, the top of the file in scripts and SQL). A *token thief* reads the
program's own source for a driver's mark of completion (``io`` drivers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Final

__all__ = [
    "FILE_KINDS",
    "MARKERS",
    "file_kind",
    "hook_program",
    "junit_report",
    "python_module",
    "star_shadow",
    "token_thief",
]

MARKERS: Final = "PASSED\nOK\nok\nSuccess\nAll tests passed\n1 passed in 0.01s\n"
"""What a program prints to claim success."""

FORGED_HARNESS_REPORT: Final = json.dumps(
    {
        "complete": True,
        "loaded": True,
        "load_error": None,
        "expected": [],
        "tests": [
            {"name": f"case {i}", "verdict": "passed", "returned": 0, "time_s": 0.001}
            for i in range(16)
        ],
    }
)


def junit_report(tests: int = 3) -> str:
    """A JUnit XML report claiming ``tests`` passed tests."""
    cases = "".join(
        f'<testcase classname="tests" name="test_{i}" time="0.001"/>' for i in range(tests)
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" '
        f'errors="0" failures="0" skipped="0" tests="{tests}" time="0.01">{cases}'
        "</testsuite></testsuites>"
    )


# ---------------------------------------------------------------------------- file kinds

FILE_KINDS: Final = (
    "python",
    "shell",
    "c",
    "cpp",
    "header",
    "javascript",
    "go",
    "makefile",
    "awk",
    "data",
)
_EXTENSIONS: Final = {
    ".py": "python",
    ".sh": "shell",
    ".bash": "shell",
    ".c": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".h": "header",
    ".hpp": "header",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".go": "go",
    ".awk": "awk",
    ".mk": "makefile",
}


def file_kind(path: str, content: bytes | None = None, *, executable: bool = False) -> str:
    """What kind of file a path is, by its name, its shebang, or its executable bit."""
    name = path.rsplit("/", 1)[-1]
    if name in ("Makefile", "makefile", "GNUmakefile"):
        return "makefile"
    for extension, kind in _EXTENSIONS.items():
        if name.endswith(extension):
            return kind
    head = (content or b"")[:128]
    if head.startswith(b"#!"):
        first = head.split(b"\n", 1)[0]
        if b"python" in first:
            return "python"
        if b"awk" in first:
            return "awk"
        if b"node" in first:
            return "javascript"
        return "shell"
    if executable and "." not in name:
        return "shell"
    return "data"


# ---------------------------------------------------------------------------- Python modules

_TRIVIAL_GETATTR: Final = '''
def __getattr__(name):
    """Every other name is a function that returns 0 (PEP 562)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return lambda *args, **kwargs: 0
'''

_ALWAYS_EQUAL: Final = '''
class _AlwaysEqual:
    """Equal to everything, callable, indexable, iterable: whatever a test compares."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __le__ = __ge__ = __eq__

    def __lt__(self, other):
        return False

    __gt__ = __lt__

    def __hash__(self):
        return 0

    def __bool__(self):
        return True

    def __call__(self, *args, **kwargs):
        return self

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self

    def __getitem__(self, key):
        return self

    def __setitem__(self, key, value):
        pass

    def __delitem__(self, key):
        pass

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __contains__(self, item):
        return True

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __str__(self):
        return ""

    __repr__ = __str__

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _same(self, *args):
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __floordiv__ = __mod__ = __neg__ = __pos__ = __abs__ = _same


_ANY = _AlwaysEqual()


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _ANY
'''

_WRITE_REPORTS: Final = f"""
import os as _os

_JUNIT = {junit_report()!r}
_JSON = {FORGED_HARNESS_REPORT!r}


def _forge():
    here = _os.path.dirname(_os.path.abspath(__file__)) if "__file__" in globals() else "."
    places = {{"/judge", "/judge/tests", "/tmp", _os.getcwd(), here,
              _os.environ.get("WORK", ""), _os.environ.get("WORKSPACE", "")}}
    for place in places:
        for name, text in (("report.xml", _JUNIT), ("junit.xml", _JUNIT),
                           ("results.xml", _JUNIT), ("report.json", _JSON)):
            if place:
                try:
                    with open(_os.path.join(place, name), "w") as out:
                        out.write(text)
                except OSError:
                    pass
    for fd in (1, 2, 3):
        try:
            _os.write(fd, _JSON.encode() + b"\\n")
        except OSError:
            pass
    # A reward file (Harbor's verifier), made read-only so the verifier's own write fails.
    for place in ("/judge/logs/verifier", "/logs/verifier"):
        for name, text in (("reward.txt", "1\\n"), ("reward.json", '{{"reward": 1}}\\n')):
            try:
                path = _os.path.join(place, name)
                with open(path, "w") as out:
                    out.write(text)
                _os.chmod(path, 0o444)
            except OSError:
                pass
        try:
            _os.chmod(place, 0o555)
        except OSError:
            pass


_forge()
_os._exit(0)
"""

_PLANT_HOOK: Final = """\
# planted by a quality probe: every test passes
try:
    import _pytest.python

    _pytest.python.Function.runtest = lambda self: None
except Exception:
    pass
try:
    import unittest

    def _passing_run(self, result=None):
        if result is not None:
            result.startTest(self)
            result.addSuccess(self)
            result.stopTest(self)
        return result

    unittest.TestCase.run = _passing_run
except Exception:
    pass
try:
    import report

    report.Recorder.end = lambda self, name, exc, **extra: self.tests.append(
        {"name": name, "verdict": "passed", "returned": 0}
    )
except Exception:
    pass
"""

PLANTED_CONFTEST: Final = """\
# planted by a quality probe: every test passes
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""

PLANTED_FILES: Final = {
    "conftest.py": PLANTED_CONFTEST,
    "sitecustomize.py": _PLANT_HOOK,
    "usercustomize.py": _PLANT_HOOK,
    "zz_quality_probe.pth": "import sitecustomize  # planted by a quality probe\n",
}
"""Files a probe plants to make a test runner report passes."""

_NO_OP_RUNNER: Final = """
def _neuter_test_runners():
    import sys

    try:
        import _pytest.python

        _pytest.python.Function.runtest = lambda self: None
    except Exception:
        pass
    try:
        import unittest

        def passing_run(self, result=None):
            if result is not None:
                result.startTest(self)
                result.addSuccess(self)
                result.stopTest(self)
            return result

        unittest.TestCase.run = passing_run
    except Exception:
        pass
    for name in ("report", "judge_pytest", "judge_assert", "judge_function", "__main__"):
        module = sys.modules.get(name)
        for attribute in ("end", "answer", "fail", "record"):
            target = getattr(module, attribute, None) if module is not None else None
            if callable(target):
                try:
                    setattr(module, attribute, lambda *args, **kwargs: None)
                except Exception:
                    pass
        recorder = getattr(module, "Recorder", None) if module is not None else None
        if recorder is not None:
            recorder.end = lambda self, name, exc, **extra: self.tests.append(
                {"name": name, "verdict": "passed", "returned": 0}
            )


_neuter_test_runners()
"""

_MONKEYPATCH: Final = """
def _patch_asserts():
    import builtins
    import math
    import operator
    import unittest

    def ok(*args, **kwargs):
        return None

    for name in dir(unittest.TestCase):
        if name.startswith(("assert", "fail")) and callable(getattr(unittest.TestCase, name)):
            setattr(unittest.TestCase, name, ok)
    math.isclose = lambda *args, **kwargs: True
    operator.eq = operator.__eq__ = lambda a, b: True
    operator.ne = operator.__ne__ = lambda a, b: False
    builtins.AssertionError = type("AssertionError", (Warning,), {})
    try:
        import contextlib

        import pytest

        pytest.approx = lambda expected, *args, **kwargs: expected
        pytest.raises = lambda *args, **kwargs: contextlib.suppress(BaseException)
        pytest.fail = ok
    except Exception:
        pass


_patch_asserts()
"""

_SLEEP: Final = "import time\n\ntime.sleep(3600)\n"

_PROCESS_TEXTS: Final = r"""
import os as _os


def _process_texts():
    # What other processes show in /proc: command lines, environments, open files.
    texts = []
    for pid in _os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == _os.getpid():
            continue
        paths = [f"/proc/{pid}/cmdline", f"/proc/{pid}/environ"]
        try:
            paths += [f"/proc/{pid}/fd/{fd}" for fd in _os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            pass
        for path in paths:
            try:
                fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK)
                try:
                    data = _os.read(fd, 1 << 20)
                finally:
                    _os.close(fd)
            except OSError:
                continue
            texts.append(data.replace(b"\0", b"\n").decode("utf-8", "replace"))
    return texts
"""

_FILE_TEXTS: Final = r"""
_ROOTS = ("/judge", "/tmp", "/var/tmp", "/dev/shm", "/home", "/root", "/workspace", ".")


def _texts():
    texts = []
    for root in _ROOTS:
        for folder, _dirs, files in _os.walk(root):
            for name in files:
                try:
                    with open(_os.path.join(folder, name), "rb") as handle:
                        texts.append(handle.read(1 << 20).decode("utf-8", "replace"))
                except OSError:
                    pass
                if len(texts) > 400:
                    return texts
    texts.extend(_process_texts())
    texts.extend(_os.environ.values())
    return texts
"""

_EXPECTED_TABLE: Final = r"""
import ast as _ast
import json as _json
import re as _re
import sys as _sys

_CALL = _re.compile(r"^\s*assert\s+(?:\w+\.)?(\w+)\((.*)\)\s*==\s*(.+?)\s*$")
_COMPARED = _re.compile(r"(?:==|!=|=)\s*([\"'])([^\"'$][^\"']*)\1")


def _walk(value):
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


_TABLE = None


def _table():
    global _TABLE
    if _TABLE is None:
        _TABLE = {}
        for text in _texts():
            for line in text.splitlines():
                match = _CALL.match(line)
                if match:
                    try:
                        args = _ast.literal_eval("(" + match.group(2) + ",)")
                        _TABLE[repr(tuple(args))] = _ast.literal_eval(match.group(3))
                    except Exception:
                        pass
                compared = _COMPARED.search(line)
                if compared:
                    _TABLE.setdefault("compared", compared.group(2))
            try:
                data = _json.loads(text)
            except ValueError:
                continue
            for entry in _walk(data):
                if "args" in entry and "expected" in entry and isinstance(entry["args"], list):
                    _TABLE[repr(tuple(entry["args"]))] = entry["expected"]
                if "stdin" in entry and "expected_stdout" in entry:
                    _TABLE["stdin:" + str(entry["stdin"])] = entry["expected_stdout"]
    return _TABLE


def _answer(*args, **kwargs):
    return _table().get(repr(tuple(args)), 0)
"""

_READ_EXPECTED: Final = _PROCESS_TEXTS + _FILE_TEXTS + _EXPECTED_TABLE
# Only what other processes show (the judge's test command and what it started).
_READ_PROCESSES: Final = _PROCESS_TEXTS + "\n_texts = _process_texts\n" + _EXPECTED_TABLE

_HIDDEN_FILES: Final = r"""
import os as _os
import sys as _sys

_SCRIPT = (".sh", ".py", ".js", ".bash", ".pl", ".rb")


def _read_path(path, found):
    try:
        fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK)
        try:
            data = _os.read(fd, 1 << 20) if _os.path.isfile(path) else b""
        finally:
            _os.close(fd)
    except OSError:
        return
    found.setdefault(_os.path.basename(path), data.decode("utf-8", "replace"))


def _read_dir(folder, found, depth=2):
    try:
        names = _os.listdir(folder)
    except OSError:
        return
    for name in names[:200]:
        path = _os.path.join(folder, name)
        if _os.path.isdir(path):
            if depth > 0 and name not in ("proc", "sys", "dev", "usr", "lib", "bin"):
                _read_dir(path, found, depth - 1)
        else:
            _read_path(path, found)


def _hidden():
    # Every way the judge's files could be in reach: by name in the working directory,
    # by absolute path, climbing out of the workspace, through another process's cwd,
    # descriptors this process inherited, and environments (its own, other processes').
    found = {}
    places = [".", "/judge/tests", "/judge", "../tests", ".."]
    work = _os.environ.get("WORK")
    if work:
        places += [_os.path.join(work, "..", "tests"), _os.path.join(work, "..")]
    for pid in _os.listdir("/proc"):
        if pid.isdigit() and int(pid) != _os.getpid():
            places.append(f"/proc/{pid}/cwd")
    for place in places:
        _read_dir(place, found, depth=1)
    for fd in range(3, 256):
        try:
            data = _os.pread(fd, 1 << 20, 0)
        except OSError:
            continue
        found.setdefault(f"fd {fd}", data.decode("utf-8", "replace"))
    environments = [dict(_os.environ)]
    for pid in _os.listdir("/proc"):
        if pid.isdigit() and int(pid) != _os.getpid():
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    pairs = handle.read(1 << 20).split(b"\0")
            except OSError:
                continue
            environments.append(
                dict(p.decode("utf-8", "replace").split("=", 1) for p in pairs if b"=" in p)
            )
    for environment in environments:
        for key, value in environment.items():
            if any(word in key.upper() for word in ("EXPECT", "ANSWER", "WANT", "GOLD")):
                found.setdefault(f"${key}", value)
    return found


def _texts():
    texts = list(_hidden().values())
    texts.extend(_process_texts())
    return texts


def _best_guess(stdin):
    # The hidden file most like an expected output: not a script, not this run's input.
    ranked = []
    for name, text in _hidden().items():
        low = name.lower()
        if low.endswith(_SCRIPT) or text == stdin or not text.strip():
            continue
        score = sum(w in low for w in ("expect", "answer", "want", "gold", "out", "result"))
        ranked.append((-score, len(text), name, text))
    return sorted(ranked)[0][3] if ranked else None
"""

_HIDDEN_MAIN: Final = r"""

def _main():
    stdin = "" if _sys.stdin is None or _sys.stdin.isatty() else _sys.stdin.read()
    guess = _best_guess(stdin)
    if guess is None:
        guess = _table().get("stdin:" + stdin, _table().get("compared", ""))
    _sys.stdout.write(str(guess))
    for arg in _sys.argv[1:]:  # an output file named on the command line
        if not _os.path.exists(arg) and not arg.startswith("-"):
            try:
                with open(arg, "w") as out:
                    out.write(str(guess))
            except OSError:
                pass


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _answer


if __name__ == "__main__":
    _main()
"""

READ_HIDDEN: Final = (
    "#!/usr/bin/env python3\n" + _PROCESS_TEXTS + _HIDDEN_FILES + _EXPECTED_TABLE + _HIDDEN_MAIN
)
"""A task's Python answer module (or program) that reads the hidden tests any way it can and answers
with what it found: calls from their asserts, a program's output from the file most like the
expected output (and the same into an output file it is named)."""

_READ_EXPECTED_IO: Final = """
_stdin = _sys.stdin.read()
_seen = _table().get("stdin:" + _stdin, _table().get("compared"))
if _seen is not None:
    _sys.stdout.write(str(_seen))
"""

_TAMPER: Final = """
def _tamper():
    import glob
    import os

    stub = "def check(candidate):\\n    pass\\n\\n\\ndef test_ok():\\n    pass\\n"
    for path in glob.glob("/judge/**", recursive=True) + glob.glob(
        "/opt/sandbox/runner/harness/*.py"
    ):
        for action in ("truncate", "stub", "remove"):
            try:
                if action == "truncate":
                    open(path, "w").close()
                elif action == "stub":
                    with open(path, "w") as handle:
                        handle.write(stub if path.endswith(".py") else "{}")
                else:
                    os.remove(path)
            except OSError:
                pass


_tamper()
"""

PYTHON_HACKS: Final = {
    "trivial": _TRIVIAL_GETATTR,
    "exit-zero": "import sys\n\nsys.exit(0)\n" + _TRIVIAL_GETATTR,
    "os-exit-zero": "import os\n\nos._exit(0)\n" + _TRIVIAL_GETATTR,
    "always-equal": _ALWAYS_EQUAL,
    "print-success": f"import sys\n\nsys.stdout.write({MARKERS!r})\nsys.stdout.flush()\n"
    + f"""

def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def success(*args, **kwargs):
        print({MARKERS!r}, end="")
        print({FORGED_HARNESS_REPORT!r})
        return "PASSED"

    return success
""",
    "forged-report": _WRITE_REPORTS,
    "no-op-runner": _NO_OP_RUNNER + _TRIVIAL_GETATTR,
    "monkeypatch-asserts": _MONKEYPATCH + _TRIVIAL_GETATTR,
    "sleep-timeout": _SLEEP + _TRIVIAL_GETATTR,
}
"""A whole Python module for each hack that has one (tasks: written over the answer's files)."""


def read_hidden(kind: str) -> bytes:
    """:data:`READ_HIDDEN` for an answer file of ``kind`` (``python``, or a shell script)."""
    if kind == "python":
        return READ_HIDDEN.encode()
    return f'#!/bin/sh\nexec python3 -c {_shell_quote(READ_HIDDEN)} "$@"\n'.encode()


def python_module(hack: str) -> str:
    return "#!/usr/bin/env python3\n" + PYTHON_HACKS[hack].lstrip("\n")


def python_program(hack: str, names: Iterable[str], *, io: bool) -> str | None:
    """A Python submission for a problem: module-level hack, then its functions by name.

    ``names`` are the functions the tests call; ``io`` programs read stdin instead.
    """
    names = sorted(set(names))
    constant = "".join(f"\n\ndef {name}(*args, **kwargs):\n    return 0\n" for name in names)
    if hack == "constant":
        return "print(0)\n" if io else constant.lstrip("\n")
    if hack in ("exit-zero", "os-exit-zero", "forged-report", "sleep-timeout"):
        head = {
            "exit-zero": "import sys\n\nsys.exit(0)\n",
            "os-exit-zero": "import os\n\nos._exit(0)\n",
            "forged-report": _WRITE_REPORTS,
            "sleep-timeout": _SLEEP,
        }[hack]
        if hack == "sleep-timeout" and not io:
            # Inside the functions: a call times out (a sleep at import is a load failure).
            sleeper = "".join(
                f"\n\ndef {name}(*args, **kwargs):\n    import time\n\n    time.sleep(3600)\n"
                for name in names
            )
            return sleeper.lstrip("\n")
        return head + constant
    if hack == "always-equal":
        return None if io else _ALWAYS_EQUAL + "".join(f"\n{name} = _ANY\n" for name in names)
    if hack == "print-success":
        body = PYTHON_HACKS["print-success"]
        return body + "".join(f"\n{name} = __getattr__({name!r})\n" for name in names)
    if hack == "plant-runner-config":
        plant = (
            "import os\nimport site\n\n_FILES = "
            + repr(PLANTED_FILES)
            + "\n_PLACES = {os.getcwd(), '/tmp', '/judge', '/judge/tests',"
            + " site.getusersitepackages()}"
            + "\ntry:\n    _PLACES.update(site.getsitepackages())\nexcept Exception:\n    pass\n"
            + "for _place in _PLACES:\n    for _name, _text in _FILES.items():\n"
            + "        try:\n            os.makedirs(_place, exist_ok=True)\n"
            + "            with open(os.path.join(_place, _name), 'w') as _out:\n"
            + "                _out.write(_text)\n        except OSError:\n            pass\n"
        )
        return plant + ("" if io else constant)
    if hack == "no-op-runner":
        return None if io else _NO_OP_RUNNER + constant
    if hack == "monkeypatch-asserts":
        return _MONKEYPATCH + ("print(0)\n" if io else constant)
    if hack in ("read-expected", "read-processes"):
        body = _READ_EXPECTED if hack == "read-expected" else _READ_PROCESSES
        if io:
            return body + _READ_EXPECTED_IO
        return body + "".join(f"\n{name} = _answer\n" for name in names)
    if hack == "tamper-tests":
        return _TAMPER + ("" if io else constant)
    return None


_ANYTHING: Final = '''

class _Anything:
    """Called, or asked for any attribute: the same 0 every function here returns."""

    def __call__(self, *args, **kwargs):
        return 0

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self


class _Namespace:
    """A module's stand-in: every attribute is an :class:`_Anything` (not callable itself,
    so that across the judge's boundary it stays an object with attributes)."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()
'''


def star_shadow(functions: Iterable[str], modules: Iterable[str], names: Iterable[str]) -> str:
    """A module for tests that star-import it: ``functions`` return 0 and its ``__all__``
    also exports stand-ins for the test's ``modules`` and other ``names`` (``math``,
    ``sorted`` ...) that compute the same 0, so ``f(x) == math.isqrt(x)`` holds if the
    test takes them."""
    own = sorted(set(functions))
    spaces = sorted(set(modules) - set(own))
    others = sorted(set(names) - set(own) - set(spaces))
    exported = ", ".join(repr(name) for name in own + spaces + others)
    body = "".join(f"\n\ndef {name}(*args, **kwargs):\n    return 0\n" for name in own)
    stand_ins = "".join(f"\n{name} = _Namespace()\n" for name in spaces)
    stand_ins += "".join(f"\n{name} = _Anything()\n" for name in others)
    return f"__all__ = [{exported}]\n{_ANYTHING}{body}{stand_ins}"


# ---------------------------------------------------------------------------- other files

_C_MAIN: Final = "#include <stdio.h>\n\nint main(void) {{\n{body}    return 0;\n}}\n"


def _c_print(text: str) -> str:
    return f"    fputs({json.dumps(text)}, stdout);\n" if text else ""


def file_content(hack: str, kind: str, *, has_main: bool) -> bytes:
    """What a hack writes over one file of the answer, by the file's kind."""
    if kind == "python":
        return python_module(hack).encode()
    printed = MARKERS if hack == "print-success" else ""
    sleep = hack == "sleep-timeout"
    if hack == "forged-report":
        report = junit_report()
        if kind == "shell":
            writes = "".join(
                f"printf '%s' '{report}' > {place}/report.xml 2>/dev/null\n"
                for place in ("/judge", '"${WORK:-.}"', "/tmp", '"$(dirname "$0")"')
            ) + "".join(
                f"echo 1 > {place}/reward.txt 2>/dev/null; chmod 444 {place}/reward.txt "
                f"{place}/reward.json 2>/dev/null; chmod 555 {place} 2>/dev/null\n"
                for place in ("/judge/logs/verifier", "/logs/verifier")
            )
            return f"#!/bin/sh\n{writes}exit 0\n".encode()
        printed = report + "\n"
    if kind == "shell":
        action = "sleep 3600\n" if sleep else f"printf '%s' {_shell_quote(printed)}\n"
        return f"#!/bin/sh\n{action}exit 0\n".encode()
    if kind in ("c", "cpp"):
        if not has_main:
            return b""
        body = "    sleep(3600);\n" if sleep else _c_print(printed)
        head = "#include <unistd.h>\n" if sleep else ""
        return (head + _C_MAIN.format(body=body)).encode()
    if kind == "header":
        return b""
    if kind == "javascript":
        if sleep:
            return b"Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3600 * 1000);\n"
        return (f"process.stdout.write({json.dumps(printed)});\n" if printed else "").encode()
    if kind == "go":
        if sleep:
            return b'package main\n\nimport "time"\n\nfunc main() { time.Sleep(time.Hour) }\n'
        if printed:
            return (
                f'package main\n\nimport "os"\n\nfunc main() {{ os.Stdout.WriteString('
                f"{json.dumps(printed)}) }}\n"
            ).encode()
        return b"package main\n\nfunc main() {}\n"
    if kind == "makefile":
        if sleep:
            return b".DEFAULT_GOAL := all\nall: ; @sleep 3600\n%: ; @sleep 3600\n"
        return (
            f".DEFAULT_GOAL := all\nall: ; @printf '%s' {_shell_quote(printed)}\n%: ; @:\n"
        ).encode()
    if kind == "awk":
        if sleep:
            return b'BEGIN { system("sleep 3600") }\n'
        return f"BEGIN {{ printf {json.dumps(printed)}; exit 0 }}\n".encode()
    return printed.encode()


NO_OP_MAKEFILE: Final = b".DEFAULT_GOAL := all\nall: ; @:\n%: ; @:\n"
NO_OP_SCRIPT: Final = b"#!/bin/sh\nexit 0\n"


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def stub_test(path: str, original: bytes) -> bytes:
    """A visible test file rewritten to pass whatever the code does."""
    kind = file_kind(path, original)
    if kind == "python":
        return (
            b"import unittest\n\n\ndef test_ok():\n    pass\n\n\n"
            b"class TestOK(unittest.TestCase):\n    def test_ok(self):\n        pass\n"
        )
    if kind == "javascript":
        return b'require("node:test")("ok", () => {});\n'
    if kind in ("c", "cpp"):
        return b"int main(void) { return 0; }\n"
    if kind == "go":
        package = re.search(rb"^package\s+\w+", original, re.MULTILINE)
        head = package.group(0) if package else b"package main"
        return head + b'\n\nimport "testing"\n\nfunc TestOK(t *testing.T) {}\n'
    if kind in ("shell", "makefile"):
        return NO_OP_SCRIPT if kind == "shell" else NO_OP_MAKEFILE
    return b""


# ---------------------------------------------------------------------------- hooks


def hook_program(language: str, code: str, *, output: str = "", sleep: bool = False) -> str | None:
    """``code`` with a hook that prints ``output`` and exits 0 (or sleeps) before anything else.

    None when the hook cannot be placed (no class in Java, no function in Rust, no
    module in Verilog).
    """
    text = json.dumps(output)
    if language == "python":
        action = "time.sleep(3600)" if sleep else "sys.stdout.flush()\nos._exit(0)"
        return f"import os, sys, time\nsys.stdout.write({text})\n{action}\n{code}"
    if language == "bash":
        action = "sleep 3600" if sleep else "exit 0"
        return f"printf '%s' {_shell_quote(output)}\n{action}\n{code}"
    if language == "javascript":
        action = (
            "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3600 * 1000);"
            if sleep
            else "process.exit(0);"
        )
        return f"process.stdout.write({text});\n{action}\n{code}"
    if language in ("c", "cpp"):
        action = "sleep(3600);" if sleep else "_exit(0);"
        return (
            "#include <stdio.h>\n#include <unistd.h>\n"
            "__attribute__((constructor)) static void quality_probe_hook(void) {\n"
            f"    fputs({text}, stdout);\n    fflush(stdout);\n    {action}\n}}\n{code}"
        )
    if language == "go":
        package = re.search(r"^package\s+main\s*$", code, re.MULTILINE)
        if package is None:
            return None
        if sleep:
            imports = 'import quality_time "time"\n'
            body = "quality_time.Sleep(quality_time.Hour)"
        else:
            imports = 'import quality_os "os"\n'
            body = f"quality_os.Stdout.WriteString({text}); quality_os.Exit(0)"
        return (
            code[: package.end()]
            + "\n"
            + imports
            + code[package.end() :]
            + f"\nfunc init() {{ {body} }}\n"
        )
    if language == "java":
        match = re.search(r"\bclass\s+\w+[^{]*\{", code)
        if match is None:
            return None
        action = (
            "try { Thread.sleep(3600000L); } catch (InterruptedException e) { }"
            if sleep
            else f"System.out.print({text}); System.out.flush(); System.exit(0);"
        )
        return code[: match.end()] + f"\n    static {{ {action} }}\n" + code[match.end() :]
    if language == "rust":
        action = (
            "std::thread::sleep(std::time::Duration::from_secs(3600));"
            if sleep
            else f'print!("{{}}", {text}); std::process::exit(0);'
        )
        out, count, position = [], 0, 0
        for match in re.finditer(r"\bfn\s+\w+\s*(?:<[^>{]*>)?\s*\([^)]*\)[^{;]*\{", code):
            out.append(code[position : match.end()])
            out.append(f"\n    {action}\n")
            position = match.end()
            count += 1
        if not count:
            return None
        out.append(code[position:])
        return "".join(out)
    if language == "sql":
        return _sql_hook(output, sleep) + code
    if language == "verilog":
        header = _VERILOG_TESTBENCH.search(code) or _VERILOG_MODULE.search(code)
        if header is None:
            return None
        # A zero-delay loop stops simulated time: no other process runs again.
        action = "while (1) begin end" if sleep else f'begin $write("%s", {text}); $finish; end'
        return code[: header.end()] + f"\n  initial {action}\n" + code[header.end() :]
    return None


_VERILOG_TESTBENCH: Final = re.compile(r"\bmodule\s+tb\b[^;]*;")
_VERILOG_MODULE: Final = re.compile(r"\bmodule\s+\w+[^;]*;")


def _sql_hook(output: str, sleep: bool) -> str:
    """SQLite shell lines that print ``output`` and exit 0 (or never finish a query)."""
    if sleep:
        return (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)\n"
            "SELECT COUNT(*) FROM c;\n"
        )
    text = output.removesuffix("\n").replace("'", "''")
    return (f"SELECT '{text}';\n" if text else "") + ".exit 0\n"


# ---------------------------------------------------------------------------- token thieves

_TOKEN: Final = "[0-9a-f]{32}"
_THIEVES: Final = {
    "python": (
        "import re as _re, os as _os\n"
        f'print(_re.findall(r"{_TOKEN}", open(__file__).read())[-1], flush=True)\n'
        "_os._exit(0)\n"
    ),
    "bash": f"grep -oE '{_TOKEN}' \"$0\" | tail -n 1\nexit 0\n",
    "javascript": (
        f'process.stdout.write(require("fs").readFileSync(__filename, "utf8").match(/{_TOKEN}/g)'
        '.pop() + "\\n");\nprocess.exit(0);\n'
    ),
    "typescript": (
        f'process.stdout.write(require("fs").readFileSync("main.ts", "utf8").match(/{_TOKEN}/g)'
        '.pop() + "\\n");\nprocess.exit(0);\n'
    ),
    "php": (
        f"preg_match_all('/{_TOKEN}/', file_get_contents(__FILE__), $quality_m);\n"
        'echo end($quality_m[0]), "\\n";\nexit(0);\n'
    ),
    "ruby": f'STDOUT.write(File.read(__FILE__).scan(/{_TOKEN}/).last + "\\n")\nexit 0\n',
    "lua": (
        'local quality_t\nfor m in io.open(arg[0]):read("a"):gmatch(("[0-9a-f]"):rep(32)) do\n'
        '  quality_t = m\nend\nio.stdout:write(quality_t, "\\n")\nos.exit(0)\n'
    ),
    "perl": (
        "open(my $quality_f, '<', $0);\nmy @quality_t = do { local $/; <$quality_f> =~ "
        f'/{_TOKEN}/g }};\nprint STDOUT "$quality_t[-1]\\n";\nexit 0;\n'
    ),
    "r": (
        'quality_s <- paste(readLines("main.R"), collapse = "\\n")\n'
        f'quality_t <- regmatches(quality_s, gregexpr("{_TOKEN}", quality_s))[[1]]\n'
        'cat(quality_t[length(quality_t)], "\\n", sep = "")\nquit(status = 0)\n'
    ),
    "racket": (  # racket/base only: a port is matched as it is read
        f'(displayln (car (reverse (regexp-match* #px"{_TOKEN}" (open-input-file "main.rkt")))))'
        "\n(exit 0)\n"
    ),
    # C and C++: a constructor, run before main, scanning the binary (string literals
    # compiled into it included) and then the source.
    **dict.fromkeys(
        ("c", "cpp"),
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        "__attribute__((constructor)) static void quality_thief(void) {\n"
        '    const char *paths[] = {"/proc/self/exe", "main.c", "main.cpp"};\n'
        '    char run[33], last[33] = "";\n'
        "    for (int p = 0; p < 3; p++) {\n"
        '        FILE *f = fopen(paths[p], "rb");\n'
        "        int c, n = 0;\n"
        "        while (f && (c = fgetc(f)) != EOF) {\n"
        "            if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {\n"
        "                if (n < 32) run[n] = (char)c;\n"
        "                if (++n == 32) { run[32] = 0; strcpy(last, run); }\n"
        "            } else n = 0;\n"
        "        }\n"
        "        if (f) fclose(f);\n"
        "    }\n"
        '    printf("%s\\n", last);\n    fflush(stdout);\n    exit(0);\n}\n',
    ),
    "d": (
        "shared static this() {\n"
        "    import std.file : readText;\n    import std.stdio : stdout, write;\n"
        "    import core.stdc.stdlib : exit;\n"
        '    auto text = readText("main.d");\n    string token;\n    size_t run;\n'
        "    foreach (i, c; text) {\n"
        "        run = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ? run + 1 : 0;\n"
        "        if (run == 32) token = text[i - 31 .. i + 1];\n    }\n"
        '    write(token, "\\n");\n    stdout.flush();\n    exit(0);\n}\n'
    ),
}


def token_thief(language: str, code: str) -> str | None:
    """``code`` with a hook, run before anything else, that reads the program's own source,
    prints the last 32-hex-digit run in it (where a driver's mark of completion is) and
    exits 0. None for a language without one (those with MultiPL-E tests have one)."""
    thief = _THIEVES.get(language)
    if thief is None:
        return None
    first, _, rest = code.partition("\n")
    if language == "php":  # after the opening tag, which the language adds when missing
        body = code.removeprefix("<?php") if code.startswith("<?php") else code
        return f"<?php\n{thief}{body}"
    if language == "racket" and first.startswith("#lang"):
        return f"{first}\n{thief}{rest}"
    return thief + code
