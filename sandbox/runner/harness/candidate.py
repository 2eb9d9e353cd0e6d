"""The candidate side: load the candidate's module and serve the judge's calls on fd 3.

Runs as the sandbox uid, in its own process: whatever the candidate's code
does here (exit at import, patch this very file, print "PASSED") it can only
answer the judge's questions with plain values, or fail to.

    python3 candidate.py FILE [MODULE_NAME]

Messages (``wire`` framing), judge to candidate:
``{"op": "get", "target": T}`` describes an attribute; ``{"op": "call",
"target": T, "args": [...], "kwargs": {...}}`` calls it; ``{"op": "dunder",
"handle": H, "name": "__len__", "args": [...]}`` applies a protocol method to a
handle. A target is ``{"name": N}`` (module attribute) or ``{"handle": H,
"attr": A}``. Answers are ``{"value": V}``, ``{"describe": D}`` or
``{"raise": {"type", "builtin", "message"}}``.
"""

from __future__ import annotations

import builtins
import os
import socket
import sys
import traceback
import types
from typing import Any

import wire

MAX_ITER_ITEMS = 100_000
_DUNDERS = frozenset(
    {"__len__", "__iter__", "__getitem__", "__contains__", "__bool__", "__str__", "__repr__"}
)


class Handles:
    """Objects the judge holds by number."""

    def __init__(self) -> None:
        self.objects: list[Any] = []

    def encode(self, obj: Any) -> dict[str, Any]:
        self.objects.append(obj)
        return {"$handle": len(self.objects) - 1, "type": type(obj).__qualname__}

    def decode(self, spec: dict[str, Any]) -> Any:
        return self.objects[int(spec["$handle"])]


def describe(obj: Any, handles: Handles, *, with_value: bool = True) -> dict[str, Any]:
    """What the judge needs to stand in for ``obj`` on its side."""
    if isinstance(obj, type):
        return {
            "kind": "class",
            "name": obj.__qualname__,
            "exception": issubclass(obj, BaseException),
            "bases": [c.__name__ for c in obj.__mro__ if getattr(builtins, c.__name__, None) is c],
        }
    if isinstance(obj, types.ModuleType):
        return {"kind": "module", "name": obj.__name__}
    if callable(obj) and not _is_plain(obj):
        return {"kind": "callable", "name": getattr(obj, "__qualname__", type(obj).__name__)}
    if not with_value:
        return {"kind": "value"}
    return {"kind": "value", "value": wire.encode(obj, handles.encode)}


def _is_plain(obj: Any) -> bool:
    try:
        wire.encode(obj)
    except wire.Unencodable:
        return False
    return True


def raised(exc: BaseException) -> dict[str, Any]:
    kind = type(exc)
    return {
        "raise": {
            "type": kind.__qualname__,
            "builtin": getattr(builtins, kind.__name__, None) is kind,
            "bases": [c.__name__ for c in kind.__mro__ if getattr(builtins, c.__name__, None) is c],
            "message": str(exc)[:2000],
        }
    }


def resolve(module: types.ModuleType, target: dict[str, Any], handles: Handles) -> Any:
    if "name" in target:
        return getattr(module, str(target["name"]))
    obj = handles.objects[int(target["handle"])]
    return getattr(obj, str(target["attr"])) if "attr" in target else obj


def answer(module: types.ModuleType, request: dict[str, Any], handles: Handles) -> dict[str, Any]:
    op = request.get("op")
    try:
        if op == "get":
            return {"describe": describe(resolve(module, request["target"], handles), handles)}
        if op == "call":
            function = resolve(module, request["target"], handles)
            args = [wire.decode(a, handles.decode) for a in request.get("args", [])]
            kwargs = {
                k: wire.decode(v, handles.decode) for k, v in request.get("kwargs", {}).items()
            }
            return {"value": wire.encode(function(*args, **kwargs), handles.encode)}
        if op == "dunder" and request.get("name") in _DUNDERS:
            obj = handles.objects[int(request["handle"])]
            args = [wire.decode(a, handles.decode) for a in request.get("args", [])]
            if request["name"] == "__iter__":
                items = []
                for item in obj:
                    items.append(item)
                    if len(items) > MAX_ITER_ITEMS:
                        raise OverflowError(f"more than {MAX_ITER_ITEMS} items")
                return {"value": wire.encode(items, handles.encode)}
            result = getattr(type(obj), request["name"])(obj, *args)
            return {"value": wire.encode(result, handles.encode)}
        return {"raise": {"type": "TypeError", "builtin": True, "message": f"bad op {op!r}"}}
    except BaseException as exc:  # SystemExit too: the judge side decides what each one means
        return raised(exc)


def load(path: str, name: str) -> types.ModuleType:
    """Import the candidate's file as module ``name`` (not ``__main__``)."""
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    with open(path, "rb") as handle:
        source = handle.read()
    exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
    return module


def main() -> None:
    path = os.path.abspath(sys.argv[1])
    name = sys.argv[2] if len(sys.argv) > 2 else "solution"
    sock = socket.socket(fileno=3)
    sys.path[0] = os.path.dirname(path)  # the candidate's own directory, as for python3 FILE
    handles = Handles()
    try:
        module = load(path, name)
    except BaseException as exc:  # SystemExit at import is a failure, not a pass
        traceback.print_exc()
        wire.send(sock, {"loaded": False, **raised(exc)})
        return
    public = {
        k: describe(v, handles, with_value=False)
        for k, v in vars(module).items()
        if not k.startswith("__")
    }
    wire.send(sock, {"loaded": True, "names": public})
    while (request := wire.receive(sock)) is not None:
        wire.send(sock, answer(module, request, handles))


if __name__ == "__main__":
    main()
