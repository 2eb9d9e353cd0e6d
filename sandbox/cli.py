"""The ``sandbox`` command.

Each subcommand is one ``_cmd_*`` function taking the parsed arguments and
returning the exit code; :func:`_build_parser` registers them. To add one,
write the function and register it in a ``_register_*`` helper there.
A :class:`~sandbox.errors.SandboxError` prints its message on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sandbox.errors import InvalidRequestError, NotFoundError, SandboxError
from sandbox.rl.command import register as register_train
from sandbox.telemetry.logs import LOG_FORMATS, LogFormat
from sandbox.telemetry.logs import configure as configure_logs

logger = logging.getLogger("sandbox.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2

Handler = Callable[[argparse.Namespace], int]


# --------------------------------------------------------------------------- engine


def _cmd_engine_ensure(args: argparse.Namespace) -> int:
    from sandbox.host.engine import ensure_engine

    ensure_engine()
    return EXIT_OK


def _cmd_engine_status(args: argparse.Namespace) -> int:
    from sandbox.host.engine import engine_status

    status = engine_status()
    sys.stdout.write(json.dumps(status, indent=2, sort_keys=True) + "\n")
    return EXIT_OK if status["running"] else EXIT_FAILED


def _register_engine(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    engine = commands.add_parser("engine", help="the Docker engine the sandboxes run on")
    sub = engine.add_subparsers(dest="engine_command", metavar="ACTION", required=True)
    ensure = sub.add_parser(
        "ensure",
        help="install and start dockerd with the gVisor runtimes if needed (idempotent)",
    )
    ensure.set_defaults(handler=_cmd_engine_ensure)
    status = sub.add_parser("status", help="print the engine's state as JSON (exit 1 if down)")
    status.set_defaults(handler=_cmd_engine_status)


# --------------------------------------------------------------------------- images


def _cmd_images_build(args: argparse.Namespace) -> int:
    from sandbox.host.images import build_images

    tags = build_images(args.names or None, base=args.base)
    for tag in tags:
        sys.stdout.write(tag + "\n")
    return EXIT_OK


def _cmd_images_list(args: argparse.Namespace) -> int:
    from sandbox.host.images import list_images

    missing = 0
    for row in list_images():
        for entry in row["tags"]:
            state = "built" if entry["built"] else "missing"
            if not entry["built"] and entry["base"] == "debootstrap":
                missing += 1
            sys.stdout.write(f"{entry['tag']:<32} {entry['base']:<12} {state}\n")
        for tag in row["stale"]:
            sys.stdout.write(f"{tag:<32} {'':<12} stale\n")
    return EXIT_FAILED if missing else EXIT_OK


def _register_images(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.host.images import BASE_KINDS

    images = commands.add_parser("images", help="the sandbox images (built locally)")
    sub = images.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="build the images whose sources changed")
    build.add_argument(
        "--base",
        choices=BASE_KINDS,
        default="debootstrap",
        help="debootstrap: a local Debian base (needs root, no registry); "
        "registry: FROM debian:bookworm-slim (default: %(default)s)",
    )
    build.add_argument("names", nargs="*", metavar="NAME", help="images to build (default: all)")
    build.set_defaults(handler=_cmd_images_build)
    listing = sub.add_parser(
        "list", help="which tags the current sources need, and which exist (exit 1 if missing)"
    )
    listing.set_defaults(handler=_cmd_images_list)


# --------------------------------------------------------------------------- serve


def _at_least(low: float, kind: type[float] | type[int], *, above: bool = False) -> Any:
    """An argparse type: a number of ``kind`` not below ``low`` (above it with ``above``)."""

    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or value < low or (above and value == low):
            bound = "above" if above else "at least"
            raise argparse.ArgumentTypeError(f"must be a finite number {bound} {low}")
        return value

    return parse


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.app import create_app
    from sandbox.policy import load_policy_dir
    from sandbox.service.platform import PlatformSettings
    from sandbox.service.tenants import Keyring
    from sandbox.telemetry import tracing

    policies = load_policy_dir(args.policies)  # a bad policy stops us here, with its message
    unknown = sorted(set(args.warm or ()) - set(policies))
    if unknown:
        raise InvalidRequestError(
            f"--warm {', '.join(unknown)}: no such policy in {args.policies}; "
            f"known: {', '.join(sorted(policies))}"
        )
    keyring = Keyring.from_environment(args.keys)
    if keyring.open and args.host not in ("127.0.0.1", "localhost", "::1"):
        raise InvalidRequestError(
            f"no API keys are configured, so serving on {args.host} would let anyone who can "
            "reach it run code; pass --keys FILE (see `sandbox keys new`) or bind to 127.0.0.1"
        )

    settings = PlatformSettings(
        keys_file=args.keys,
        policies_dir=args.policies,
        warm=args.warm if args.warm is not None else ["default"],
        max_waiters=args.max_waiting,
        start_concurrency=args.start_concurrency,
        snapshot_ttl_s=args.snapshot_ttl,
        snapshot_budget_bytes=args.snapshot_budget_mb << 20,
        audit_verify_interval_s=args.audit_verify_interval,
    )
    fleet_config = None
    if args.fleet_config is not None and args.fleet is None:
        raise InvalidRequestError("--fleet-config configures a fleet: add --fleet auto")
    if args.fleet is not None:
        from sandbox.fleet.config import load_fleet_config

        fleet_config = load_fleet_config(args.fleet_config)  # refused here, naming file and key
    if tracing.configure(args.otel_endpoint):
        logger.info("exporting traces to %s", args.otel_endpoint or "$" + tracing.ENDPOINT_ENV)
    uvicorn.run(
        create_app(
            settings,
            fleet=args.fleet,
            fleet_config=fleet_config,
            runs_dir=args.runs_dir,
            reload_on_sighup=True,
        ),
        host=args.host,
        port=args.port,
        log_level="debug" if args.verbose else "info",
        log_config=None,  # uvicorn's loggers (access log too) go through ours: text or JSON
        access_log=args.access_log,
    )
    return EXIT_OK


def _register_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.core.pool import DEFAULT_MAX_WAITERS, DEFAULT_START_CONCURRENCY
    from sandbox.core.snapshots import DEFAULT_BUDGET_BYTES, DEFAULT_TTL_S
    from sandbox.service.platform import DEFAULT_POLICIES_DIR

    serve = commands.add_parser("serve", help="run the HTTP service with a warm pool")
    serve.add_argument("--host", default="127.0.0.1", help="address (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    serve.add_argument(
        "--policies", type=Path, default=DEFAULT_POLICIES_DIR, help="policy directory"
    )
    serve.add_argument(
        "--warm",
        action="append",
        default=None,
        metavar="POLICY",
        help="policy to pre-warm at start (repeatable; default: default)",
    )
    serve.add_argument("--max-waiting", type=_at_least(0, int), default=DEFAULT_MAX_WAITERS)
    serve.add_argument(
        "--start-concurrency", type=_at_least(1, int), default=DEFAULT_START_CONCURRENCY
    )
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text, or json: one object per line with request_id and tenant (default: text)",
    )
    serve.add_argument(
        "--otel-endpoint",
        metavar="URL",
        help="export OpenTelemetry traces over OTLP/HTTP to URL/v1/traces "
        "(else $OTEL_EXPORTER_OTLP_ENDPOINT; neither: no tracing)",
    )
    serve.add_argument(
        "--snapshot-ttl",
        type=_at_least(0, float, above=True),
        default=DEFAULT_TTL_S,
        metavar="SECONDS",
        help="how long a session snapshot is kept (default: %(default)s)",
    )
    serve.add_argument(
        "--snapshot-budget-mb",
        type=_at_least(0, int),
        default=DEFAULT_BUDGET_BYTES >> 20,
        metavar="MB",
        help="disk for all tenants' snapshots together (default: %(default)s)",
    )
    serve.add_argument(
        "--audit-verify-interval",
        type=_at_least(0, float, above=True),
        default=None,
        metavar="SECONDS",
        help="walk the audit log's hash chain this often and publish sandbox_audit_chain_ok "
        "in /metrics (default: never)",
    )
    serve.add_argument(
        "--keys", type=Path, help="API keys file (else $SANDBOX_API_KEYS_FILE / $SANDBOX_API_KEYS)"
    )
    serve.add_argument(
        "--fleet",
        metavar="auto|ray://HOST:10001",
        help="route to the host agents of a Ray cluster (auto: $RAY_ADDRESS or the local one)",
    )
    serve.add_argument(
        "--fleet-config",
        type=Path,
        help="the fleet's scheduling config (priority classes, tenants, quotas; YAML)",
    )
    serve.add_argument(
        "--runs-dir",
        type=Path,
        default=Path("runs"),
        metavar="DIR",
        help="where the console (/ui) finds evaluation, training and quality runs "
        "(default: %(default)s)",
    )
    serve.set_defaults(handler=_cmd_serve)


# --------------------------------------------------------------------------- fleet


def _cmd_fleet_status(args: argparse.Namespace) -> int:
    from sandbox.client import SandboxClient
    from sandbox.fleet.status import FleetStatus

    with SandboxClient(args.url, api_key=args.key) as client:
        status = FleetStatus.model_validate(client.fleet())
    if args.json:
        sys.stdout.write(status.model_dump_json(indent=2) + "\n")
        return EXIT_OK
    sys.stdout.write(f"{status.healthy} of {len(status.hosts)} hosts healthy\n")
    if status.scheduler is not None:
        sched = status.scheduler
        queued = ", ".join(f"{name} {n}" for name, n in sched.queued.items())
        sys.stdout.write(
            f"slots {sched.busy}/{sched.capacity} busy; queued: {queued}; "
            f"drain {sched.drain_per_s:.1f}/s; rejected {sched.rejected}\n"
        )
    sys.stdout.write(
        f"{'HOST':<28} {'STATE':<9} {'FLIGHT':>6} {'SESS':>4} {'IDLE':>4} {'BUSY':>4} "
        f"{'START':>5} {'WAIT':>4} {'ROUTED':>7}  REASON\n"
    )
    for h in status.hosts:
        sys.stdout.write(
            f"{h.name:<28} {h.state.value:<9} {h.in_flight:>6} {h.sessions:>4} {h.idle:>4} "
            f"{h.busy:>4} {h.starting:>5} {h.waiting:>4} {h.routed:>7}  {h.reason}\n"
        )
        for g in h.groups:  # each policy group of the host, as its last heartbeat gave it
            sys.stdout.write(
                f"  group {g.policy}: idle {g.idle}, busy {g.busy}, starting {g.starting}, "
                f"warm target {g.warm_target}\n"
            )
    return EXIT_OK


def _cmd_fleet_drain(args: argparse.Namespace) -> int:
    from sandbox.client import SandboxClient
    from sandbox.fleet.status import HostView

    with SandboxClient(args.url, api_key=args.key) as client:
        view = HostView.model_validate(client.drain_host(args.host, timeout_s=args.timeout))
    sys.stdout.write(f"{view.name}: {view.state.value}\n")
    return EXIT_OK


def _register_fleet(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.client import DEFAULT_URL

    fleet = commands.add_parser("fleet", help="the hosts behind a `serve --fleet` service")
    sub = fleet.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    status = sub.add_parser(
        "status", help="hosts, health, load, calls routed, and each host's policy groups"
    )
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_cmd_fleet_status)
    drain = sub.add_parser("drain", help="finish what runs on HOST, take nothing new, release it")
    drain.add_argument("host", help="a host's name or node id (as `fleet status` shows)")
    drain.add_argument("--timeout", type=float, help="seconds open sessions may run on")
    drain.set_defaults(handler=_cmd_fleet_drain)
    for parser in (status, drain):
        parser.add_argument("--url", default=DEFAULT_URL, help="service URL (default: %(default)s)")
        parser.add_argument("--key", default=None, help="API key (an admin key to drain)")


# --------------------------------------------------------------------------- run

_EXTENSIONS = {".py": "python", ".sh": "bash"}


def _cmd_run(args: argparse.Namespace) -> int:
    from sandbox.core.execution import RunRequest
    from sandbox.results import ExecStatus, RunResult

    path: Path = args.file
    code = _read_text(path)
    language = args.language or _EXTENSIONS.get(path.suffix)
    if language is None:
        raise InvalidRequestError(f"cannot tell the language of {path.name}; pass --language")
    stdin = _read_text(args.stdin) if args.stdin else ""
    if args.url:
        from sandbox.client import SandboxClient

        with SandboxClient(args.url) as client:
            result = client.run(
                code, language=language, stdin=stdin, args=args.args, policy=args.policy
            )
    else:
        request = RunRequest(language=language, code=code, stdin=stdin, args=args.args)
        result = RunResult.from_exec(asyncio.run(_run_locally(request, args.policy)))
    if args.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        sys.stdout.buffer.write(result.stdout_bytes())
        sys.stdout.flush()
        sys.stderr.buffer.write(result.stderr_bytes())
        sys.stderr.flush()
        if result.status not in (ExecStatus.OK, ExecStatus.NONZERO_EXIT):
            detail = result.error or result.reason or ""
            sys.stderr.write(f"sandbox: {result.status.value} {detail}\n")
    if result.status is ExecStatus.INFRA_ERROR:
        return EXIT_ERROR
    return result.exit_code if result.exit_code is not None else EXIT_FAILED


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise InvalidRequestError(f"cannot read {path}: {exc.strerror or exc}") from None


async def _run_locally(request: Any, policy_ref: str) -> Any:
    """Run one request on a private, unwarmed platform with the given policy file or name."""
    from sandbox.policy import load_policy
    from sandbox.service.platform import DEFAULT_POLICIES_DIR, Platform, PlatformSettings

    policy_path = Path(policy_ref)
    if not policy_path.suffix:
        policy_path = DEFAULT_POLICIES_DIR / f"{policy_ref}.yaml"
    policy = load_policy(policy_path)
    platform = Platform(PlatformSettings(warm=[]), policies={policy.name: policy})
    await platform.start()
    try:
        return await platform.execution.run(
            request.model_copy(update={"policy": policy.name}), tenant="cli"
        )
    finally:
        await platform.close()


def _register_run(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run a program in a sandbox and print its output")
    run.add_argument("file", type=Path, help="the program (.py or .sh, or pass --language)")
    run.add_argument("args", nargs="*", help="arguments for the program")
    run.add_argument("--language", help="python or bash (default: from the file's extension)")
    run.add_argument(
        "--policy",
        default="default",
        help="a policy file, or a policy name from policies/ (default: %(default)s)",
    )
    run.add_argument("--stdin", type=Path, help="a file to feed on standard input")
    run.add_argument("--url", help="run through this service instead of a local engine")
    run.add_argument("--json", action="store_true", help="print the whole result as JSON")
    run.set_defaults(handler=_cmd_run)


# --------------------------------------------------------------------------- policy


def _cmd_policy_check(args: argparse.Namespace) -> int:
    from sandbox.policy import lint_policy, load_policy

    failed = 0
    for path in args.files:
        try:
            policy = load_policy(path)
        except SandboxError as exc:
            sys.stderr.write(f"refused: {exc}\n")
            failed += 1
            continue
        sys.stdout.write(f"ok: {path} (policy {policy.name!r}, digest {policy.digest[:12]})\n")
        for warning in lint_policy(policy):
            sys.stdout.write(f"  warning: {warning}\n")
    return EXIT_ERROR if failed else EXIT_OK


def _cmd_policy_reload(args: argparse.Namespace) -> int:
    from sandbox.client import SandboxClient

    with SandboxClient(args.url, api_key=args.api_key) as client:
        changes = client.reload_policies()  # a refusal: PolicyError, printed, exit 2
    if args.json:
        sys.stdout.write(changes.model_dump_json(indent=2) + "\n")
        return EXIT_OK
    for version in changes.added:
        sys.stdout.write(f"added     {version.name} ({version.digest[:12]})\n")
    for change in changes.changed:
        sys.stdout.write(
            f"changed   {change.name} ({change.old_digest[:12]} -> {change.new_digest[:12]})\n"
        )
    for version in changes.removed:
        sys.stdout.write(f"removed   {version.name} ({version.digest[:12]})\n")
    for name in changes.unchanged:
        sys.stdout.write(f"unchanged {name}\n")
    return EXIT_OK


def _register_policy(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.client import DEFAULT_URL

    policy = commands.add_parser("policy", help="security policies (YAML)")
    sub = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate and lint policy files (exit 2 if refused)")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    check.set_defaults(handler=_cmd_policy_check)
    reload = sub.add_parser(
        "reload",
        help="make a running service re-read its policy directory (exit 2 if refused)",
    )
    reload.add_argument("--url", default=DEFAULT_URL, help="service URL (default: %(default)s)")
    reload.add_argument("--api-key", "--key", dest="api_key", help="an admin API key")
    reload.add_argument("--json", action="store_true")
    reload.set_defaults(handler=_cmd_policy_reload)


# --------------------------------------------------------------------------- pool


def _cmd_pool_status(args: argparse.Namespace) -> int:
    from sandbox.client import SandboxClient

    with SandboxClient(args.url) as client:
        status = client.pool()
    if args.json:
        sys.stdout.write(status.model_dump_json(indent=2) + "\n")
        return EXIT_OK
    header = f"{'POLICY':<12} {'IMAGE':<30} {'IDLE':>4} {'BUSY':>4} {'START':>5} {'RESET':>5}"
    sys.stdout.write(header + f" {'WAIT':>4} {'WARM':>4} {'MAX':>4}\n")
    for g in status.groups:
        sys.stdout.write(
            f"{g.policy:<12} {g.image:<30} {g.idle:>4} {g.busy:>4} {g.starting:>5} "
            f"{g.resetting:>5} {g.waiting:>4} {g.warm_target:>4} {g.max:>4}\n"
        )
    return EXIT_OK


def _register_pool(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.client import DEFAULT_URL

    pool = commands.add_parser("pool", help="the running service's warm pool")
    sub = pool.add_subparsers(dest="pool_command", metavar="ACTION", required=True)
    status = sub.add_parser("status", help="print the pool's counts")
    status.add_argument("--url", default=DEFAULT_URL, help="service URL (default: %(default)s)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_cmd_pool_status)


# --------------------------------------------------------------------------- keys


def _cmd_keys_new(args: argparse.Namespace) -> int:
    from sandbox.service.tenants import TenantConfig, hash_key, new_key

    key = new_key()
    entry = TenantConfig(
        tenant=args.tenant,
        key_sha256=hash_key(key),
        policies=tuple(args.policy or ["*"]),
        max_concurrency=args.max_concurrency,
        rate_per_s=args.rate,
        admin=args.admin,
    )
    import yaml

    sys.stderr.write("the key (shown once; give it to the tenant):\n")
    sys.stdout.write(key + "\n")
    sys.stderr.write("add this to the keys file, under `keys:`\n")
    line = yaml.safe_dump([entry.model_dump(mode="json")], sort_keys=False)
    sys.stderr.write(line)
    return EXIT_OK


def _register_keys(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.service.tenants import DEFAULT_MAX_CONCURRENCY, DEFAULT_RATE_PER_S

    keys = commands.add_parser("keys", help="API keys and tenants")
    sub = keys.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    new = sub.add_parser("new", help="make a key: prints it, and the hashed entry to store")
    new.add_argument("--tenant", required=True)
    new.add_argument("--policy", action="append", help="a policy it may use (repeatable)")
    new.add_argument("--max-concurrency", type=int, default=DEFAULT_MAX_CONCURRENCY)
    new.add_argument("--rate", type=float, default=DEFAULT_RATE_PER_S, help="requests/s")
    new.add_argument("--admin", action="store_true", help="may read every tenant's audit log")
    new.set_defaults(handler=_cmd_keys_new)


# --------------------------------------------------------------------------- audit


def _open_audit(args: argparse.Namespace) -> Any:
    from sandbox.service.platform import default_state_dir
    from sandbox.telemetry.audit import AuditLog

    path: Path = args.db or default_state_dir() / "audit.db"
    if not path.exists():
        raise NotFoundError(f"no audit log at {path}; pass --db")
    return AuditLog(path)


def _cmd_audit_query(args: argparse.Namespace) -> int:
    log = _open_audit(args)
    try:
        records = log.query(
            tenant=args.tenant, kind=args.kind, since=args.since, until=args.until, limit=args.limit
        )
    finally:
        log.close()
    for record in records:
        if args.json:
            sys.stdout.write(record.model_dump_json() + "\n")
        else:
            sys.stdout.write(
                f"{record.time} {record.tenant:<12} {record.kind:<6} {record.policy or '-':<8} "
                f"{record.language or '-':<10} {record.verdict or '-':<14} "
                f"{(record.duration_s or 0) * 1000:8.1f} ms  {(record.code_sha256 or '')[:12]}\n"
            )
    return EXIT_OK


def _cmd_audit_verify(args: argparse.Namespace) -> int:
    log = _open_audit(args)
    try:
        intact, count, broken = log.verify()
    finally:
        log.close()
    if intact:
        sys.stdout.write(f"ok: {count} records, hash chain intact\n")
        return EXIT_OK
    sys.stdout.write(f"BROKEN at record {broken} (after {count} good records)\n")
    return EXIT_FAILED


def _register_audit(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser("audit", help="the append-only audit log")
    sub = audit.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    query = sub.add_parser("query", help="records, newest first")
    verify = sub.add_parser("verify", help="check the hash chain (exit 1 if broken)")
    for parser in (query, verify):
        parser.add_argument("--db", type=Path, help="the audit database (default: state dir)")
    query.add_argument("--tenant")
    query.add_argument("--kind", choices=["run", "judge", "session"])
    query.add_argument("--since", help="ISO 8601 time, inclusive")
    query.add_argument("--until", help="ISO 8601 time, exclusive")
    query.add_argument("--limit", type=int, default=50)
    query.add_argument("--json", action="store_true")
    query.set_defaults(handler=_cmd_audit_query)
    verify.set_defaults(handler=_cmd_audit_verify)


# --------------------------------------------------------------------------- eval


def _eval_agent(args: argparse.Namespace) -> Any:
    from sandbox.evals.agents import (
        NullAgent,
        OpenAIAgent,
        OracleAgent,
        ReplayAgent,
        TokenPrice,
        openai_config_from_env,
    )

    spec: str = args.agent
    if spec == "oracle":
        return OracleAgent()
    if spec == "null":
        return NullAgent()
    if spec.startswith("replay:") and len(spec) > len("replay:"):
        return ReplayAgent(Path(spec[len("replay:") :]))
    if spec == "openai":
        if not args.model:
            raise InvalidRequestError("--agent openai needs --model NAME")
        config = openai_config_from_env(
            model=args.model,
            base_url=args.base_url,
            api_key_env=args.api_key_env,
            temperature=args.temperature,
            seed=args.seed,
            price=TokenPrice(args.price_prompt_per_1k, args.price_completion_per_1k),
        )
        return OpenAIAgent(config)
    raise InvalidRequestError(
        f"unknown agent {spec!r}; use oracle, null, replay:PATH or openai (with --model)"
    )


def _print_eval_summary(report: dict[str, Any]) -> None:
    m = report["metrics"]
    run = report["run"]

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    k = max((int(key) for key in m["pass_at_k"]), default=0)
    lines = [
        f"agent {run['agent'].get('name', '?')}: {m['tasks']} task(s) x {run['epochs']} "
        "epoch(s), "
        f"{m['trials']} trials ({m['scored_trials']} scored, {m['infra_errors']} infra errors)",
        f"pass rate {pct(m['pass_rate'])} +- {pct(m['stderr'])} (standard error over tasks)"
        + (
            f", pass@{k} {pct(m['pass_at_k'][str(k)])}, pass^{k} {pct(m['pass_hat_k'][str(k)])}"
            if k > 1
            else ""
        ),
        "outcomes: " + ", ".join(f"{name} {count}" for name, count in m["outcomes"].items()),
    ]
    for label, groups in (("category", m["by_category"]), ("difficulty", m["by_difficulty"])):
        if len(groups) > 1:
            lines.append(
                f"by {label}: "
                + ", ".join(f"{name} {pct(g['pass_rate'])}" for name, g in groups.items())
            )
    usage = m["usage"]
    lines.append(
        f"usage: {usage['total_tokens']} tokens, {usage['steps']} steps, agent "
        f"{usage['agent_s']:.1f} s, trials {usage['trial_s']:.1f} s"
    )
    sys.stdout.write("\n".join(lines) + "\n")


def _quiet_platform_logs(args: argparse.Namespace) -> None:
    if not args.verbose:
        logging.getLogger().setLevel(logging.WARNING)


def _cmd_eval_run(args: argparse.Namespace) -> int:
    from sandbox.evals.formats import load_tasks
    from sandbox.evals.report import write_reports
    from sandbox.evals.runner import run_local

    _quiet_platform_logs(args)
    tasks = load_tasks(args.tasks)
    agent = _eval_agent(args)

    async def run() -> None:
        try:
            await run_local(
                tasks,
                agent,
                out=args.out,
                epochs=args.epochs,
                concurrency=args.concurrency,
                policies_dir=args.policies,
                progress=not args.no_progress,
            )
        finally:
            await agent.aclose()

    asyncio.run(run())
    report = write_reports(args.out)
    _print_eval_summary(report)
    sys.stdout.write(f"report: {args.out / 'report.html'} and {args.out / 'report.json'}\n")
    return EXIT_OK


def _cmd_eval_report(args: argparse.Namespace) -> int:
    from sandbox.evals.report import write_reports

    report = write_reports(args.dir, json_path=args.json, html_path=args.html)
    _print_eval_summary(report)
    html_path = args.html or args.dir / "report.html"
    json_path = args.json or args.dir / "report.json"
    sys.stdout.write(f"report: {html_path} and {json_path}\n")
    return EXIT_OK


def _cmd_eval_compare(args: argparse.Namespace) -> int:
    from sandbox.evals.compare import compare_runs

    comparison = compare_runs(
        args.baseline, args.candidate, alpha=args.alpha, min_drop=args.min_drop
    )
    if args.json:
        sys.stdout.write(json.dumps(comparison.as_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(comparison.table() + "\n")
    return EXIT_FAILED if comparison.regression else EXIT_OK


def _register_eval(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.evals.compare import DEFAULT_ALPHA, DEFAULT_MIN_DROP
    from sandbox.service.platform import DEFAULT_POLICIES_DIR

    evals = commands.add_parser("eval", help="agent evaluations: run tasks, report, compare")
    sub = evals.add_subparsers(dest="eval_command", metavar="ACTION", required=True)

    run = sub.add_parser(
        "run",
        help="run tasks x epochs with an agent (resumes what --out already holds)",
        description="Each trial: a sandbox session from the task, the agent under its "
        "budget, then the hidden tests. Results, trajectories and a report go to --out; "
        "running again into the same --out resumes without redoing finished trials.",
    )
    run.add_argument(
        "tasks",
        type=Path,
        help="a task directory, or a directory of them (ours, Harbor or Terminal-Bench)",
    )
    run.add_argument(
        "--agent",
        required=True,
        help="oracle (the reference solution), null (does nothing), replay:PATH "
        "(recorded actions), openai (a chat-completions endpoint; needs --model)",
    )
    run.add_argument("--epochs", type=int, default=1, help="trials per task (default: 1)")
    run.add_argument(
        "--concurrency", type=int, default=4, help="trials at once (default: %(default)s)"
    )
    run.add_argument("--out", type=Path, required=True, help="the run directory")
    run.add_argument("--policies", type=Path, default=DEFAULT_POLICIES_DIR, help="policy directory")
    run.add_argument("--model", help="model name (openai agent)")
    run.add_argument(
        "--base-url", help="endpoint base URL (default: $OPENAI_BASE_URL or api.openai.com/v1)"
    )
    run.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default: %(default)s)",
    )
    run.add_argument("--temperature", type=float, default=0.0)
    run.add_argument("--seed", type=int, default=None)
    for kind in ("prompt", "completion"):
        run.add_argument(
            f"--price-{kind}-per-1k",
            type=_at_least(0, float),
            default=0.0,
            metavar="COST",
            help=f"what 1,000 {kind} tokens cost (openai agent; default: 0): each call's "
            "cost goes in the trajectory, the results and the report",
        )
    run.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    run.set_defaults(handler=_cmd_eval_run)

    report = sub.add_parser("report", help="write report.json and report.html for a run")
    report.add_argument("dir", type=Path, help="the run directory")
    report.add_argument("--html", type=Path, help="where the HTML page goes")
    report.add_argument("--json", type=Path, help="where the JSON report goes")
    report.set_defaults(handler=_cmd_eval_report)

    compare = sub.add_parser(
        "compare",
        help="the no-regression gate: exit 1 if CANDIDATE is worse than BASELINE beyond noise",
    )
    compare.add_argument("baseline", type=Path, help="run directory or report JSON")
    compare.add_argument("candidate", type=Path, help="run directory or report JSON")
    compare.add_argument("--alpha", type=float, default=DEFAULT_ALPHA)
    compare.add_argument(
        "--min-drop",
        type=float,
        default=DEFAULT_MIN_DROP,
        help="a drop in mean pass rate at most this large is never a regression",
    )
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.set_defaults(handler=_cmd_eval_compare)


# --------------------------------------------------------------------------- quality


def _register_quality(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.quality.command import register

    register(commands, agent_factory=_eval_agent)


# --------------------------------------------------------------------------- parser


def _cmd_tasks_export(args: argparse.Namespace) -> int:
    from sandbox.evals.formats import load_tasks
    from sandbox.evals.formats.export import export_harbor

    written = export_harbor(load_tasks(args.tasks), args.dir)
    sys.stdout.write(f"wrote {len(written)} task(s) in {args.format} format to {args.dir}\n")
    return EXIT_OK


def _register_tasks(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sandbox.evals.formats.export import SUITE

    tasks = commands.add_parser("tasks", help="evaluation tasks: export them in other formats")
    sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)
    export = sub.add_parser(
        "export",
        help="write tasks in Harbor's format (which `harbor lint` accepts)",
        description="Each task becomes DIR/<id>/ with task.toml, instruction.md, "
        "environment/, solution/solve.sh and tests/test.sh writing its reward.",
    )
    export.add_argument("dir", type=Path, help="where the tasks go (made if missing)")
    export.add_argument("--format", choices=["harbor"], required=True)
    export.add_argument(
        "--tasks", type=Path, default=SUITE, help="the tasks (default: the shipped suite)"
    )
    export.set_defaults(handler=_cmd_tasks_export)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sandbox", description="Secure code-execution sandboxes on Docker."
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log debug detail (build steps, apt output)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _register_engine(commands)
    _register_images(commands)
    _register_serve(commands)
    _register_run(commands)
    _register_policy(commands)
    _register_pool(commands)
    _register_fleet(commands)
    _register_keys(commands)
    _register_audit(commands)
    _register_eval(commands)
    _register_tasks(commands)
    register_train(commands)
    _register_quality(commands)
    return parser


# Commands whose stdout/stderr belong to the user's program or to a report: quiet logs.
_QUIET_COMMANDS = frozenset({"run", "policy", "pool", "fleet", "keys", "audit"})


def _configure_logging(verbose: bool, command: str, log_format: LogFormat) -> None:
    quiet = command in _QUIET_COMMANDS
    configure_logs(
        logging.DEBUG if verbose else (logging.WARNING if quiet else logging.INFO),
        log_format,
        with_request=command == "serve",
    )
    # Every HTTP request of docker-py would be logged at debug: keep that out.
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("docker").setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``sandbox`` console script; returns the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose, args.command, getattr(args, "log_format", "text"))
    handler: Handler = args.handler
    try:
        return handler(args)
    except SandboxError as exc:
        sys.stderr.write(f"sandbox: error: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("sandbox: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
