"""The judge side of the boundary: stand-ins for the candidate's functions, classes and objects.

Tests written against a module (``candidate(3) == 5``, ``solution.Stack()``,
``pytest.raises(solution.Empty)``) run unchanged against :class:`Connection`
proxies: every call crosses to the candidate's process and comes back as a
plain value (or a handle to a remote object, which only ever equals itself).
A call that takes longer than the per-call timeout, a candidate process that
dies, or one that raises ``SystemExit``/``KeyboardInterrupt`` (which end a
Python program rather than reach its ``except Exception``) raises
:class:`CandidateTimeout` / :class:`CandidateCrashed`, and every later call
fails the same way. Those are no :class:`Exception`: a test expecting the
candidate to raise cannot take its end for one (and :mod:`report` fails any
test during which the connection died, whatever the test caught).
"""

from __future__ import annotations

import builtins
import socket
import types
from typing import Any

import wire


class CandidateError(BaseException):
    """The candidate can no longer answer (not an ``Exception``: no test may catch it as one)."""


class CandidateCrashed(CandidateError):
    """The candidate's process closed the connection (it exited, crashed or was killed)."""


class CandidateTimeout(CandidateError):
    """A call into the candidate took longer than the per-call timeout."""


class CandidateRaised(Exception):
    """An exception the candidate raised whose own type must not act in the judge."""


_CONTROL_FLOW = (StopIteration, StopAsyncIteration)
_ENDS_A_PROGRAM = ("SystemExit", "KeyboardInterrupt")


def _safe_base(kind: type) -> bool:
    """An exception type that is safe to raise inside the judge's test code."""
    return issubclass(kind, Exception) and not issubclass(kind, _CONTROL_FLOW)


def ends_the_candidate(spec: dict[str, Any]) -> bool:
    """True when what the candidate raised ends its program instead of being an error:
    ``SystemExit`` or ``KeyboardInterrupt`` (even mixed with an ``Exception``), or
    anything that is no ``Exception`` at all."""
    bases = spec.get("bases") or []
    return "Exception" not in bases or any(name in bases for name in _ENDS_A_PROGRAM)


def raised_by_candidate(exc: BaseException) -> bool:
    """True for exceptions the candidate's code raised (re-created on this side)."""
    return bool(getattr(exc, "__raised_by_candidate__", False))


class Connection:
    """The judge's end of the socket to the candidate's process."""

    def __init__(self, sock: socket.socket, call_timeout_s: float, load_timeout_s: float) -> None:
        self.sock = sock
        self.call_timeout_s = call_timeout_s
        self.dead: CandidateError | None = None
        self._stand_ins: dict[str, type[BaseException]] = {}
        try:
            hello = self._exchange(None, load_timeout_s)
        except CandidateError as exc:  # exited (os._exit) or hung while loading
            hello = {"loaded": False, "raise": {"type": type(exc).__name__, "message": str(exc)}}
        self.loaded = bool(hello.get("loaded"))
        self.load_error: dict[str, Any] | None = hello.get("raise")
        self.names: dict[str, dict[str, Any]] = hello.get("names") or {}

    # -- transport -----------------------------------------------------------------------

    def _exchange(self, message: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        if self.dead is not None:
            raise type(self.dead)(str(self.dead))
        self.sock.settimeout(timeout)
        try:
            if message is not None:
                wire.send(self.sock, message)
            reply = wire.receive(self.sock)
        except TimeoutError:
            self.dead = CandidateTimeout(f"the candidate did not answer within {timeout:g} s")
            raise type(self.dead)(str(self.dead)) from None
        except (OSError, ValueError) as exc:
            self.dead = CandidateCrashed(f"the candidate's connection broke: {exc}")
            raise type(self.dead)(str(self.dead)) from None
        if reply is None:
            self.dead = CandidateCrashed("the candidate's process exited")
            raise type(self.dead)(str(self.dead))
        return reply

    def request(self, message: dict[str, Any]) -> Any:
        """Send ``message``; return the decoded value or raise what the candidate raised."""
        reply = self._exchange(message, self.call_timeout_s)
        if "raise" in reply:
            spec = reply["raise"]
            if ends_the_candidate(spec):
                self.dead = CandidateCrashed(
                    f"the candidate ended its process: it raised {spec.get('type')}"
                )
                raise type(self.dead)(str(self.dead))
            raise self.exception(spec)
        if "describe" in reply:
            return self._stand_in(reply["describe"], message["target"])
        return wire.decode(reply.get("value"), self._handle)

    # -- values, handles and exceptions ---------------------------------------------------

    def _handle(self, spec: dict[str, Any]) -> RemoteObject:
        return RemoteObject(self, int(spec["$handle"]), str(spec.get("type", "object")))

    @staticmethod
    def _encode_handle(obj: Any) -> dict[str, Any]:
        if isinstance(obj, RemoteObject):
            return {"$handle": object.__getattribute__(obj, "_handle")}
        raise wire.Unencodable(f"cannot pass a {type(obj).__name__} to the candidate")

    def encode(self, value: Any) -> Any:
        return wire.encode(value, self._encode_handle)

    def exception(self, spec: dict[str, Any]) -> BaseException:
        """A local exception standing for the one the candidate raised.

        Never one that steers the judge's own control flow: StopIteration would end
        the loop a test is in (``all(map(candidate, xs))``), so it comes back as
        :class:`CandidateRaised` (an ordinary exception) instead. What ends a program
        (SystemExit, KeyboardInterrupt) never gets here: :meth:`request` takes it
        for the candidate's end.
        """
        kind: type[BaseException] | None = None
        if spec.get("builtin"):
            candidate = getattr(builtins, str(spec.get("type")), None)
            if isinstance(candidate, type) and _safe_base(candidate):
                kind = candidate
        if kind is None:
            kind = self.exception_class(str(spec.get("type")), spec.get("bases") or [])
        try:
            exc = kind(spec.get("message", ""))
        except Exception:
            exc = RuntimeError(f"{spec.get('type')}: {spec.get('message', '')}")
        exc.__raised_by_candidate__ = True  # type: ignore[attr-defined]
        return exc

    def exception_class(self, name: str, bases: list[str]) -> type[BaseException]:
        """One local class per remote exception class, so ``pytest.raises`` can match it."""
        if name not in self._stand_ins:
            base: type[BaseException] = CandidateRaised
            for base_name in bases:
                found = getattr(builtins, base_name, None)
                if isinstance(found, type) and issubclass(found, BaseException):
                    if not _safe_base(found):
                        break  # e.g. class K(StopIteration): not that
                    base = found
                    break
            self._stand_ins[name] = type(name, (base,), {"__module__": "candidate"})
        return self._stand_ins[name]

    def _stand_in(self, spec: dict[str, Any], target: dict[str, Any]) -> Any:
        kind = spec.get("kind")
        if kind == "value":
            return wire.decode(spec.get("value"), self._handle)
        if kind == "class" and spec.get("exception"):
            return self.exception_class(str(spec["name"]), spec.get("bases") or [])
        if kind in ("callable", "class"):
            return RemoteCallable(self, target, str(spec.get("name", "?")))
        if kind == "module":
            return RemoteObject(self, None, str(spec.get("name")), target)
        raise CandidateCrashed(f"unexpected description {spec!r}")

    def attribute(self, name: str) -> Any:
        return self.request({"op": "get", "target": {"name": name}})

    def public_names(self) -> list[str]:
        """The candidate's own public names: those not starting with ``_``, and of those only
        the ones its ``__all__`` lists if it has one; never a module it imported."""
        names = [
            name
            for name, spec in self.names.items()
            if name.isidentifier() and not name.startswith("_") and spec.get("kind") != "module"
        ]
        try:
            listed = self.attribute("__all__")
        except AttributeError:
            return names
        chosen = {n for n in listed if type(n) is str} if type(listed) in (list, tuple) else set()
        return [name for name in names if name in chosen]

    def module(self, name: str) -> types.ModuleType:
        """A module whose attributes are fetched from the candidate on first use."""
        module = types.ModuleType(name)
        module.__getattr__ = self.attribute  # type: ignore[method-assign]
        module.__file__ = f"<candidate {name}>"
        return module


class RemoteCallable:
    """A function or class of the candidate."""

    def __init__(self, connection: Connection, target: dict[str, Any], name: str) -> None:
        self._connection = connection
        self._target = target
        self.__name__ = self.__qualname__ = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        connection = self._connection
        return connection.request(
            {
                "op": "call",
                "target": self._target,
                "args": [connection.encode(a) for a in args],
                "kwargs": {k: connection.encode(v) for k, v in kwargs.items()},
            }
        )

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(f"{self.__name__}.{attr} is not available across the boundary")

    def __repr__(self) -> str:
        return f"<candidate {self.__name__}>"


class RemoteObject:
    """An object living in the candidate's process; equal only to itself."""

    def __init__(
        self,
        connection: Connection,
        handle: int | None,
        type_name: str,
        target: dict[str, Any] | None = None,
    ) -> None:
        object.__setattr__(self, "_connection", connection)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_type_name", type_name)
        object.__setattr__(self, "_target", target or {"handle": handle})

    def _dunder(self, name: str, *args: Any) -> Any:
        connection: Connection = object.__getattribute__(self, "_connection")
        return connection.request(
            {
                "op": "dunder",
                "handle": object.__getattribute__(self, "_handle"),
                "name": name,
                "args": [connection.encode(a) for a in args],
            }
        )

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        connection: Connection = object.__getattribute__(self, "_connection")
        target = dict(object.__getattribute__(self, "_target"))
        if "handle" in target and target.get("handle") is not None:
            target = {"handle": target["handle"], "attr": attr}
        else:
            raise AttributeError(attr)
        return connection.request({"op": "get", "target": target})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        target = object.__getattribute__(self, "_target")
        connection: Connection = object.__getattribute__(self, "_connection")
        return RemoteCallable(connection, target, "object")(*args, **kwargs)

    def __len__(self) -> int:
        return int(self._dunder("__len__"))

    def __iter__(self) -> Any:
        return iter(self._dunder("__iter__"))

    def __getitem__(self, key: Any) -> Any:
        return self._dunder("__getitem__", key)

    def __contains__(self, item: Any) -> bool:
        return bool(self._dunder("__contains__", item) is True)

    def __bool__(self) -> bool:
        return self._dunder("__bool__") is True

    def __str__(self) -> str:
        value = self._dunder("__str__")
        return value if type(value) is str else "<candidate object>"

    def __repr__(self) -> str:
        return f"<candidate {object.__getattribute__(self, '_type_name')} object>"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)
