"""The HTTP API over real HTTP, against a real ``sandbox serve`` process and real containers.

Nothing is mocked: every request goes over loopback to a service started by the
``service`` fixture (the shipped policies) or by a dedicated :class:`Service`.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.middleware import MAX_BODY_BYTES
from sandbox.core.execution import (
    MAX_ARGS,
    MAX_CODE_BYTES,
    MAX_FETCH,
    MAX_STDIN_BYTES,
)
from sandbox.core.pool import PoolStatus
from sandbox.core.validation import MAX_FILES, MAX_FILES_BYTES
from sandbox.policy import load_policy
from sandbox.results import RunResult
from tests.conftest import REPO, Service, metric, one_container_service

pytestmark = pytest.mark.docker

MiB = 1 << 20
SLOW_CODE = "import time\ntime.sleep(1)\nprint('slept')\n"


# --------------------------------------------------------------------------- helpers


def run(http: httpx.Client, **body: Any) -> httpx.Response:
    body.setdefault("code", "print('hi')")
    return http.post("/v1/run", json=body)


def run_ok(http: httpx.Client, **body: Any) -> dict[str, Any]:
    response = run(http, **body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    RunResult.model_validate(result)  # the documented wire model, exactly
    return result


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error body contract: status, stable code, a message, never a traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert "Traceback" not in response.text
    assert 'File "' not in response.text
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    return body


def metric_names(text: str) -> set[str]:
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


PYTHON_IMAGE_PREFIX = "sandbox-python:"


def default_group(status: dict[str, Any], policy: str = "default") -> dict[str, Any]:
    """The group of ``policy`` on the python image (python and bash run there)."""
    groups = [
        g
        for g in status["groups"]
        if g["policy"] == policy and g["image"].startswith(PYTHON_IMAGE_PREFIX)
    ]
    assert len(groups) == 1, status
    return groups[0]


def wait_for(predicate: Any, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def raw_request(port: int, head: bytes, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes and read one HTTP/1.1 response (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head_part, _, body = data.partition(b"\r\n\r\n")
        lines = head_part.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    return status, headers, body


# --------------------------------------------------------------------------- POST /v1/run


def test_python_ok_result_shape(http: httpx.Client) -> None:
    result = run_ok(http, code="print('hello world')")
    assert result["status"] == "ok"
    assert result["exit_code"] == 0
    assert result["signal"] is None
    assert result["stdout"] == "hello world\n"
    assert result["stderr"] == ""
    assert result["stdout_base64"] is None
    assert result["stderr_base64"] is None
    assert result["stdout_truncated"] is False
    assert result["stderr_truncated"] is False
    assert result["reason"] is None
    assert result["error"] is None
    assert result["files"] == {}
    assert result["file_errors"] == {}
    usage = result["usage"]
    assert set(usage) == {"wall_s", "cpu_s", "peak_memory_bytes"}
    assert 0 < usage["wall_s"] < 10
    assert usage["cpu_s"] >= 0
    assert usage["peak_memory_bytes"] is None or usage["peak_memory_bytes"] > 0


def test_stderr_is_separate(http: httpx.Client) -> None:
    result = run_ok(http, code="import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    assert result["stdout"] == "out\n"
    assert result["stderr"] == "err\n"


def test_bash(http: httpx.Client) -> None:
    result = run_ok(http, language="bash", code='echo "bash $BASH_VERSION" | cut -c1-6\nid -u\n')
    assert result["status"] == "ok"
    lines = result["stdout"].splitlines()
    assert lines[0] == "bash 5"
    assert lines[1] != "0", "user code must not run as root"


def test_nonzero_exit_is_data(http: httpx.Client) -> None:
    result = run_ok(http, code="import sys\nprint('before')\nsys.exit(3)\n")
    assert result["status"] == "nonzero_exit"
    assert result["exit_code"] == 3
    assert result["stdout"] == "before\n"
    assert result["error"] is None


def test_exception_is_nonzero_exit_with_stderr(http: httpx.Client) -> None:
    result = run_ok(http, code="raise ValueError('boom')\n")
    assert result["status"] == "nonzero_exit"
    assert result["exit_code"] == 1
    assert "ValueError: boom" in result["stderr"]


def test_stdin(http: httpx.Client) -> None:
    result = run_ok(
        http,
        code="import sys\ndata = sys.stdin.read()\nprint(len(data), data.upper(), end='')\n",
        stdin="line one\nline two\n",
    )
    assert result["stdout"] == "18 LINE ONE\nLINE TWO\n"


def test_args(http: httpx.Client) -> None:
    result = run_ok(
        http, code="import sys, json\nprint(json.dumps(sys.argv[1:]))\n", args=["a", "b c", "--x=1"]
    )
    assert json.loads(result["stdout"]) == ["a", "b c", "--x=1"]


def test_bash_args(http: httpx.Client) -> None:
    result = run_ok(http, language="bash", code='echo "$#:$1:$2"\n', args=["one", "two words"])
    assert result["stdout"] == "2:one:two words\n"


def test_files_are_written_to_the_workdir(http: httpx.Client) -> None:
    result = run_ok(
        http,
        code=("import helper\nprint(open('data/input.txt').read().strip())\nprint(helper.VALUE)\n"),
        files={"data/input.txt": "some input\n", "helper.py": "VALUE = 42\n"},
    )
    assert result["stdout"] == "some input\n42\n"


def test_fetch_files_come_back_base64(http: httpx.Client) -> None:
    payload = bytes(range(256)) * 4
    result = run_ok(
        http,
        code=(
            "import os\n"
            "os.makedirs('out', exist_ok=True)\n"
            "open('out/data.bin', 'wb').write(bytes(range(256)) * 4)\n"
            "open('note.txt', 'w').write('done')\n"
        ),
        fetch_files=["out/data.bin", "note.txt", "missing.txt"],
    )
    assert base64.b64decode(result["files"]["out/data.bin"]) == payload
    assert base64.b64decode(result["files"]["note.txt"]) == b"done"
    assert "missing.txt" not in result["files"]
    assert result["file_errors"]["missing.txt"]
    assert RunResult.model_validate(result).file("out/data.bin") == payload


def test_non_utf8_output_comes_back_exactly(http: httpx.Client) -> None:
    raw = b"ok \xff\xfe\x00 \xc3\x28 end\n"
    result = run_ok(
        http,
        code=(
            f"import sys\nsys.stdout.buffer.write({raw!r})\nsys.stderr.buffer.write(b'\\x80err')\n"
        ),
    )
    assert result["stdout_base64"] is not None
    assert base64.b64decode(result["stdout_base64"]) == raw
    assert base64.b64decode(result["stderr_base64"]) == b"\x80err"
    assert "\ufffd" in result["stdout"]  # the text form is a lossy rendering
    assert RunResult.model_validate(result).stdout_bytes() == raw


def test_utf8_output_has_no_base64(http: httpx.Client) -> None:
    result = run_ok(http, code="print('héllo ✓ 日本')\n")
    assert result["stdout"] == "héllo ✓ 日本\n"
    assert result["stdout_base64"] is None


def test_lowered_wall_limit_applies(http: httpx.Client) -> None:
    started = time.monotonic()
    result = run_ok(http, code="import time\ntime.sleep(30)\n", limits={"wall_time_s": 1.0})
    assert result["status"] == "timeout"
    assert result["reason"] == "wall_time"
    assert 1.0 <= result["usage"]["wall_s"] < 3
    assert time.monotonic() - started < 8


def test_lowered_cpu_limit_applies(http: httpx.Client) -> None:
    result = run_ok(
        http, code="while True:\n    pass\n", limits={"cpu_time_s": 0.5, "wall_time_s": 5.0}
    )
    assert result["status"] == "timeout"
    assert result["reason"] == "cpu_time"
    assert result["usage"]["wall_s"] < 4


def test_whole_second_cpu_limit_names_its_reason(http: httpx.Client) -> None:
    # RLIMIT_CPU (whole seconds) and the runner's own CPU check meet here: either way the
    # result must say which limit stopped the program.
    result = run_ok(
        http, code="while True:\n    pass\n", limits={"cpu_time_s": 1.0, "wall_time_s": 5.0}
    )
    assert result["status"] == "timeout"
    assert result["reason"] == "cpu_time"


def test_output_limit_truncates(http: httpx.Client) -> None:
    result = run_ok(http, code="print('x' * 100000)\n", limits={"stdout_bytes": 1000})
    assert result["stdout_truncated"] is True
    assert len(result["stdout"].encode()) <= 1000


# --------------------------------------------------------------------------- bodies


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", None])
def test_curl_style_body_without_origin_is_json(
    http: httpx.Client, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = http.post(
        "/v1/run", content=json.dumps({"code": "print(6 * 7)"}).encode(), headers=headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["stdout"] == "42\n"


def test_curl_style_body_with_origin_is_refused(http: httpx.Client) -> None:
    response = http.post(
        "/v1/run",
        content=json.dumps({"code": "print(1)"}).encode(),
        headers={
            "content-type": "application/x-www-form-urlencoded",
            "origin": "http://evil.example",
        },
    )
    assert_error(response, 415, "unsupported_media_type")


def test_text_plain_with_origin_is_refused(http: httpx.Client) -> None:
    response = http.post(
        "/v1/run",
        content=b'{"code": "print(1)"}',
        headers={"content-type": "text/plain", "origin": "null"},
    )
    assert_error(response, 415, "unsupported_media_type")


def test_json_with_origin_is_accepted(http: httpx.Client) -> None:
    # A browser can only send application/json cross-site after a CORS preflight.
    response = http.post(
        "/v1/run", json={"code": "print(1)"}, headers={"origin": "http://localhost:3000"}
    )
    assert response.status_code == 200, response.text


def test_malformed_json(http: httpx.Client) -> None:
    response = http.post(
        "/v1/run", content=b'{"code": ', headers={"content-type": "application/json"}
    )
    assert_error(response, 422, "invalid_request")


def test_body_not_an_object(http: httpx.Client) -> None:
    response = http.post("/v1/run", json=["print(1)"])
    assert_error(response, 422, "invalid_request")


def test_content_length_over_cap_is_413_before_the_body(service: Service) -> None:
    head = (
        "POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
    ).encode()
    # No body is sent at all: the answer must come from the header alone.
    status, headers, body = raw_request(service.port, head)
    assert status == 413
    assert headers["content-type"].startswith("application/json")
    parsed = json.loads(body)
    assert parsed["code"] == "body_too_large"
    assert str(MAX_BODY_BYTES) in parsed["message"]


def test_content_length_at_cap_is_read(service: Service) -> None:
    # Exactly at the cap is not refused as too large (it is just not valid JSON).
    head = (
        "POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MAX_BODY_BYTES}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(head)
        sock.sendall(b" " * MAX_BODY_BYTES)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 422"), data[:200]


def test_real_body_over_cap_is_413(service: Service) -> None:
    response = httpx.post(
        service.url + "/v1/run",
        content=b" " * (MAX_BODY_BYTES + 1),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert_error(response, 413, "body_too_large")


def test_chunked_body_growing_past_cap_is_413(service: Service) -> None:
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"code": "print(1)", "stdin": "'
        chunk = b"a" * MiB
        while sent <= MAX_BODY_BYTES:
            sent += len(chunk)
            yield chunk
        yield b'"}'

    response = httpx.post(
        service.url + "/v1/run",
        content=body(),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "body_too_large")
    assert sent > MAX_BODY_BYTES


def test_small_chunked_body_works(service: Service) -> None:
    def body() -> Iterator[bytes]:
        yield b'{"code": '
        yield b"\"print('chunked')\"}"

    response = httpx.post(
        service.url + "/v1/run",
        content=body(),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json()["stdout"] == "chunked\n"


def test_service_still_healthy_after_oversized_bodies(http: httpx.Client) -> None:
    assert run_ok(http, code="print('still here')")["stdout"] == "still here\n"


# --------------------------------------------------------------------------- request errors


@pytest.mark.parametrize(
    ("policy", "field", "value"),
    [
        ("default", "wall_time_s", 11.0),
        ("default", "cpu_time_s", 10.5),
        ("default", "memory_mb", 1024),
        ("default", "stdout_bytes", 2 * MiB),
        ("default", "stderr_bytes", 2 * MiB),
        ("default", "open_files", 512),
        ("default", "file_size_mb", 128),
        ("strict", "wall_time_s", 6.0),  # within default, above strict
        ("strict", "memory_mb", 300),
    ],
)
def test_limit_above_policy_is_refused(
    http: httpx.Client, policy: str, field: str, value: float
) -> None:
    response = run(http, policy=policy, limits={field: value})
    body = assert_error(response, 422, "limit_exceeded")
    assert field in body["message"]
    assert policy in body["message"]


def test_limit_at_policy_maximum_is_fine(http: httpx.Client) -> None:
    result = run_ok(http, policy="strict", limits={"wall_time_s": 5.0, "memory_mb": 256})
    assert result["status"] == "ok"


@pytest.mark.parametrize(
    "limits",
    [{"wall_time_s": -1}, {"wall_time_s": "5"}, {"memory_mb": 1.5}, {"bogus": 1}],
)
def test_malformed_limits_are_invalid(http: httpx.Client, limits: dict[str, Any]) -> None:
    body = assert_error(run(http, limits=limits), 422, "invalid_request")
    assert "limits" in body["message"]


def test_unknown_language(http: httpx.Client) -> None:
    body = assert_error(run(http, language="cobol"), 422, "invalid_request")
    assert "cobol" in body["message"]
    assert "python" in body["message"]


def test_unknown_policy(http: httpx.Client) -> None:
    body = assert_error(run(http, policy="no-such-policy"), 404, "not_found")
    assert "no-such-policy" in body["message"]
    assert "default" in body["message"]


def test_unknown_json_field(http: httpx.Client) -> None:
    body = assert_error(run(http, timeout=5), 422, "invalid_request")
    assert "timeout" in body["message"]
    assert body["detail"][0]["loc"] == ["body", "timeout"]


def test_missing_code(http: httpx.Client) -> None:
    response = http.post("/v1/run", json={"language": "python"})
    body = assert_error(response, 422, "invalid_request")
    assert "code" in body["message"]


def test_env_not_allowed_by_policy(http: httpx.Client) -> None:
    body = assert_error(run(http, env={"SECRET_TOKEN": "x"}), 422, "invalid_request")
    assert "SECRET_TOKEN" in body["message"]
    assert "env.allow" in body["message"]


@pytest.mark.parametrize(
    "path", ["../x", "/etc/x", "a\x00b", "a/../../x", "./x", "", "a//b", "x" * 300]
)
def test_bad_file_paths(http: httpx.Client, path: str) -> None:
    assert_error(run(http, files={path: "data"}), 422, "invalid_request")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a\x00b"])
def test_bad_fetch_paths(http: httpx.Client, path: str) -> None:
    assert_error(run(http, fetch_files=[path]), 422, "invalid_request")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"code": "#" * (MAX_CODE_BYTES + 1)}, "code"),
        ({"stdin": "x" * (MAX_STDIN_BYTES + 1)}, "stdin"),
        ({"args": ["a"] * (MAX_ARGS + 1)}, "args"),
        ({"fetch_files": [f"f{i}" for i in range(MAX_FETCH + 1)]}, "fetch_files"),
        ({"files": {f"f{i}.txt": "" for i in range(MAX_FILES + 1)}}, "files"),
        ({"files": {"big.txt": "x" * (MAX_FILES_BYTES + 1)}}, "files"),
    ],
    ids=["code", "stdin", "args", "fetch_files", "file_count", "file_bytes"],
)
def test_request_size_bounds(http: httpx.Client, body: dict[str, Any], needle: str) -> None:
    if "files" in body:  # counts and sizes of files: 413, like an oversized body
        assert needle in assert_error(run(http, **body), 413, "payload_too_large")["message"]
    else:
        assert needle in assert_error(run(http, **body), 422, "invalid_request")["message"]


def test_extra_file_may_not_replace_the_code(http: httpx.Client) -> None:
    body = assert_error(run(http, files={"main.py": "print(2)"}), 422, "invalid_request")
    assert "main.py" in body["message"]


def test_unknown_route_and_method(http: httpx.Client) -> None:
    assert_error(http.get("/v1/nothing-here"), 404, "not_found")
    assert_error(http.delete("/v1/run"), 405, "method_not_allowed")


def test_request_errors_leave_the_pool_clean(http: httpx.Client) -> None:
    for _ in range(3):
        run(http, policy="nope")
        run(http, limits={"wall_time_s": 99})
    group = default_group(http.get("/v1/pool").json())
    assert group["busy"] == 0
    assert run_ok(http)["status"] == "ok"


# --------------------------------------------------------------------------- pool, health, metrics


def test_pool_shape(http: httpx.Client) -> None:
    response = http.get("/v1/pool")
    assert response.status_code == 200
    body = response.json()
    status = PoolStatus.model_validate(body)
    assert status.max_waiting > 0
    assert status.waiting == 0
    group = default_group(body)
    for other in body["groups"]:  # a task environment's policy is derived: BASE.env-ID
        base = other["policy"].split(".env-")[0]
        assert base in {path.stem for path in (REPO / "policies").glob("*.yaml")}, other
    shipped = load_policy(REPO / "policies" / "default.yaml").pool
    assert group["warm_target"] == shipped.warm
    assert group["max"] == shipped.max
    for key in ("idle", "idle_bound", "busy", "starting", "resetting", "waiting"):
        assert isinstance(group[key], int) and group[key] >= 0
    assert group["created_total"] >= group["warm_target"]


def test_pool_counts_change_with_runs(http: httpx.Client, service: Service) -> None:
    before = default_group(http.get("/v1/pool").json())
    assert before["busy"] == 0

    # While a slow run is in flight, the pool reports a busy sandbox.
    done: dict[str, Any] = {}

    def slow() -> None:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            done["response"] = client.post("/v1/run", json={"code": SLOW_CODE})

    thread = threading.Thread(target=slow)
    thread.start()
    try:
        assert wait_for(lambda: default_group(http.get("/v1/pool").json())["busy"] >= 1, 5)
    finally:
        thread.join(30)
    assert done["response"].status_code == 200
    assert wait_for(lambda: default_group(http.get("/v1/pool").json())["busy"] == 0, 5)

    # A run the runner had to kill retires its sandbox (and the warm target is kept).
    mid = default_group(http.get("/v1/pool").json())
    result = run_ok(http, code="while True:\n    pass\n", limits={"wall_time_s": 0.5})
    assert result["status"] == "timeout"
    assert result["reason"] == "wall_time"

    def settled() -> bool:
        group = default_group(http.get("/v1/pool").json())
        unbound = group["idle"] - group["idle_bound"]
        return group["retired_total"] == mid["retired_total"] + 1 and unbound >= 2

    assert wait_for(settled, 15), http.get("/v1/pool").json()


def test_healthz(http: httpx.Client) -> None:
    response = http.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {"default", "strict", "gvisor"} <= set(body["policies"])
    assert body["images"]["python"].startswith("sandbox-python:")


def test_metrics(http: httpx.Client) -> None:
    def scrape() -> str:
        response = http.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        return response.text

    before = scrape()
    ok = {"language": "python", "policy": "default", "status": "ok"}
    for _ in range(2):
        run_ok(http, code="print(1)")
    run_ok(http, code="import sys; sys.exit(2)")
    after = scrape()

    assert (
        metric(after, "sandbox_executions_total", **ok)
        == metric(before, "sandbox_executions_total", **ok) + 2
    )
    nonzero = {"language": "python", "policy": "default", "status": "nonzero_exit"}
    assert (
        metric(after, "sandbox_executions_total", **nonzero)
        == metric(before, "sandbox_executions_total", **nonzero) + 1
    )
    assert "# TYPE sandbox_executions_total counter" in after

    # The latency histogram: buckets, sum and count, counting every execution.
    assert "# TYPE sandbox_execution_seconds histogram" in after
    count_before = metric(before, "sandbox_execution_seconds_count", language="python")
    count_after = metric(after, "sandbox_execution_seconds_count", language="python")
    assert count_after == count_before + 3
    assert metric(after, "sandbox_execution_seconds_bucket", language="python", le="+Inf") == (
        count_after
    )
    assert metric(after, "sandbox_execution_seconds_sum", language="python") > 0

    # Pool gauges and queue depth.
    names = metric_names(after)
    assert "sandbox_pool_containers" in names
    assert "sandbox_pool_waiting" in names
    assert metric(after, "sandbox_pool_containers", policy="default", state="idle") >= 1
    assert metric(after, "sandbox_pool_containers", policy="default", state="busy") == 0
    assert metric(after, "sandbox_pool_waiting") == 0


def test_openapi(http: httpx.Client) -> None:
    response = http.get("/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert "post" in spec["paths"]["/v1/run"]
    assert "get" in spec["paths"]["/v1/pool"]
    assert "/healthz" in spec["paths"]
    assert "RunRequest" in spec["components"]["schemas"]


# --------------------------------------------------------------------------- saturation


@pytest.fixture(scope="module")
def saturated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service whose only policy keeps one container and allows no waiting."""
    with one_container_service(tmp_path_factory.mktemp("one-container")) as svc:
        yield svc


def fire_concurrently(url: str, count: int, code: str = SLOW_CODE) -> list[httpx.Response]:
    barrier = threading.Barrier(count)

    def one(_: int) -> httpx.Response:
        with httpx.Client(base_url=url, timeout=60) as client:
            barrier.wait()
            return client.post("/v1/run", json={"code": code})

    with ThreadPoolExecutor(count) as executor:
        return list(executor.map(one, range(count)))


def test_saturation_gives_429_with_retry_after(saturated: Service) -> None:
    responses = fire_concurrently(saturated.url, 5)
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 429}, [r.text for r in responses]
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert ok, statuses
    assert refused, statuses
    for response in ok:
        assert response.json()["status"] == "ok"
        assert response.json()["stdout"] == "slept\n"
    for response in refused:
        body = assert_error(response, 429, "capacity_exhausted")
        assert "default" in body["message"]
        retry_after = response.headers["retry-after"]
        assert retry_after.isdigit() and int(retry_after) >= 1
    # Once the burst is over, the one container serves again.
    with httpx.Client(base_url=saturated.url, timeout=60) as client:
        assert wait_for(lambda: default_group(client.get("/v1/pool").json())["idle"] == 1, 10)
        assert run_ok(client, code="print('again')")["stdout"] == "again\n"
        group = default_group(client.get("/v1/pool").json())
        assert group["max"] == 1
        assert group["created_total"] - group["retired_total"] <= 1


def test_saturation_is_counted_in_metrics(saturated: Service) -> None:
    with httpx.Client(base_url=saturated.url, timeout=60) as client:
        before = metric(client.get("/metrics").text, "sandbox_rejected_total")
        responses = fire_concurrently(saturated.url, 4)
        refused = sum(1 for r in responses if r.status_code == 429)
        assert refused >= 1
        after = metric(client.get("/metrics").text, "sandbox_rejected_total")
    assert after == before + refused


# --------------------------------------------------------------------------- start-up refusals


BAD_POLICIES = {
    "unknown key": ("resources:\n  memory_mb: 256\n  memroy_limit: 1\n", "memroy_limit"),
    "duplicate key": ("resources:\n  memory_mb: 256\n  memory_mb: 128\n", "memory_mb"),
    "privileged": ("privileged: true\n", "privileged"),
    "python tag": ("resources: !!python/object/apply:os.getpid []\n", "resources"),
    "writable root": ("filesystem:\n  read_only_root: false\n", "filesystem.read_only_root"),
}


def serve_and_wait_exit(policies: Path, timeout: float = 60) -> tuple[int, str]:
    svc = Service(policies=policies)
    try:
        code = svc.process.wait(timeout)
    except subprocess.TimeoutExpired:
        svc.stop()
        pytest.fail(f"the service started despite a bad policy:\n{svc.log()}")
    svc.stop()
    return code, svc.log()


@pytest.mark.parametrize("case", sorted(BAD_POLICIES))
def test_bad_policy_dir_refuses_to_start(tmp_path: Path, case: str) -> None:
    text, key = BAD_POLICIES[case]
    (tmp_path / "default.yaml").write_text("pool: {warm: 0, max: 2}\n")
    bad = tmp_path / "broken.yaml"
    bad.write_text(text)
    code, log = serve_and_wait_exit(tmp_path)
    assert code != 0, log
    refusal = [line for line in log.splitlines() if str(bad) in line]
    assert refusal, log
    assert any(key in line for line in refusal), log
    assert "Application startup complete" not in log


def test_bad_policy_dir_exits_like_other_commands(tmp_path: Path) -> None:
    (tmp_path / "default.yaml").write_text("privileged: true\n")
    code, log = serve_and_wait_exit(tmp_path)
    assert code == 2
    assert "sandbox: error:" in log
    assert "Traceback" not in log


def test_a_priority_class_in_the_body_is_accepted_and_ignored_by_a_single_host(
    http: httpx.Client,
) -> None:
    """Without --fleet there are no classes: the field is ignored, as the header is
    (any well-formed name, and a header naming another); a malformed name is a 422."""
    header = {"X-Priority-Class": "another"}
    ran = http.post("/v1/run", json={"code": "print(1)", "priority_class": "vip"}, headers=header)
    assert ran.status_code == 200 and ran.json()["stdout"] == "1\n", ran.text
    case = {"stdin": "", "expected_stdout": "1\n"}
    item = {"code": "print(1)", "tests": {"kind": "io", "cases": [case]}}
    judged = http.post("/v1/judge", json={**item, "priority_class": "vip"})
    assert judged.status_code == 200 and judged.json()["reward"] == 1.0, judged.text
    batch = {"items": [item], "priority_class": "training"}
    with http.stream("POST", "/v1/evaluate", json=batch) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
    assert lines[0]["result"]["reward"] == 1.0 and lines[-1]["errors"] == 0
    created = http.post("/v1/sessions", json={"priority_class": "interactive"})
    assert created.status_code == 201, created.text
    assert http.delete(f"/v1/sessions/{created.json()['id']}").status_code == 204
    malformed = http.post("/v1/run", json={"code": "print(1)", "priority_class": "a b"})
    assert malformed.status_code == 422 and "priority_class" in malformed.text
    per_item = {"items": [{**item, "priority_class": "training"}]}
    refused = http.post("/v1/evaluate", json=per_item)  # a batch names its class once
    assert refused.status_code == 422 and "items[0].priority_class" in refused.text
