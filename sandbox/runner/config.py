"""Who runs what: the uids of the untrusted roles and the writable directories."""

from __future__ import annotations

SANDBOX = "sandbox"
JUDGE = "judge"
ROOT = "root"
RUNTIMES = ("runc", "runsc")


class WritableDir:
    """A directory untrusted code may write, with the mode it must keep."""

    def __init__(self, spec: str) -> None:
        path, _, mode = spec.partition(":")
        self.path = path
        self.mode = int(mode, 8) if mode else None

    def __repr__(self) -> str:
        return f"WritableDir({self.path!r})"


class Config:
    """The runner's command line: ``--uid U --gid G --judge-uid J --judge-gid K --dir P:MODE``.

    ``sandbox`` is the role of candidate code; ``judge`` the role of hidden
    tests, which must be out of the candidate's reach (another uid).

    ``--runtime runsc`` says the container runs under gVisor, whose kernel is
    the sandbox's own; untrusted code then gets a seccomp filter that stands in
    for what Docker's profile and some rlimits do under runc (see
    :mod:`runner.seccomp`). ``--nproc N`` caps the processes (threads included)
    of each untrusted uid with RLIMIT_NPROC. The backend passes it under gVisor:
    there the host's pids cgroup counts the sandbox kernel's threads, not the
    sandbox's processes, so this limit stands in for it. Under runc the cgroup
    does the job (RLIMIT_NPROC would count the uid across the whole host).
    ``--socket PATH`` asks for a direct channel as well: a unix socket at PATH, in a
    directory only root may enter, that the service connects to (through the
    container's root as seen in the host's ``/proc``) so that requests and replies do
    not go through the engine's attach stream. Never under gVisor, whose sandbox
    kernel keeps its unix sockets to itself.
    ``--root on`` (gVisor only) adds the ``root`` role: uid 0 with the container's
    capabilities, for a session whose commands all run as root (the backend sends
    every request of such a session in that role). Its processes are not among the
    :attr:`untrusted_uids` (uid 0 is the runner's too): after an execution they are
    killed by a scan that spares the runner's own processes (see
    :meth:`Executor.kill_leftovers <runner.execute.Executor.kill_leftovers>`).
    ``--memory BYTES`` (gVisor too) is the policy's memory limit, which the runner
    enforces on the sandbox kernel's own count (``/proc/meminfo``) for every
    execution: the host's memory cgroup also holds that kernel, so the backend
    gives it headroom, and a program reaching the limit is killed with a
    ``memory_limit`` verdict instead of the host's OOM killer taking the sandbox.
    """

    def __init__(self, argv: list[str]) -> None:
        values: dict[str, int] = {}
        self.dirs: list[WritableDir] = []
        self.nproc: int | None = None
        self.memory_bytes: int | None = None
        self.runtime = "runc"
        self.socket_path: str | None = None
        self.root = False
        pairs = iter(argv)
        for flag in pairs:
            value = next(pairs, None)
            if value is None:
                raise SystemExit(f"runner: {flag} needs a value")
            if flag == "--dir":
                self.dirs.append(WritableDir(value))
            elif flag == "--runtime":
                if value not in RUNTIMES:
                    raise SystemExit(f"runner: --runtime must be one of {', '.join(RUNTIMES)}")
                self.runtime = value
            elif flag == "--socket":
                if not value.startswith("/"):
                    raise SystemExit("runner: --socket must be an absolute path")
                self.socket_path = value
            elif flag == "--root":
                if value != "on":
                    raise SystemExit("runner: --root takes the value 'on'")
                self.root = True
            elif flag == "--nproc":
                self.nproc = int(value)
                if self.nproc < 1:
                    raise SystemExit("runner: --nproc must be at least 1")
            elif flag == "--memory":
                self.memory_bytes = int(value)
                if self.memory_bytes < 1:
                    raise SystemExit("runner: --memory must be at least 1")
            elif flag in ("--uid", "--gid", "--judge-uid", "--judge-gid"):
                values[flag] = int(value)
            else:
                raise SystemExit(f"runner: unknown option {flag}")
        if self.root and self.runtime != "runsc":
            raise SystemExit("runner: --root is for gVisor only (--runtime runsc)")
        if self.socket_path is not None and self.runtime == "runsc":
            raise SystemExit("runner: --socket is for runc only (gVisor keeps its sockets)")
        missing = {"--uid", "--gid", "--judge-uid", "--judge-gid"} - set(values)
        if missing:
            raise SystemExit(f"runner: missing {sorted(missing)}")
        self.ids = {
            SANDBOX: (values["--uid"], values["--gid"]),
            JUDGE: (values["--judge-uid"], values["--judge-gid"]),
        }
        uids = [uid for uid, _ in self.ids.values()]
        if 0 in uids or len(set(uids)) != len(uids):
            raise SystemExit("runner: the sandbox and judge uids must differ and not be 0")
        self.untrusted_uids = uids
        # Every role a request may name: the untrusted two, and root under --root.
        self.role_ids = {**self.ids, **({ROOT: (0, 0)} if self.root else {})}
