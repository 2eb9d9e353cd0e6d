"""The compatibility endpoints, spoken to the way the real clients speak them.

- SandboxFusion's own client (the ``sandbox-fusion`` package from PyPI) calls
  ``/run_code`` on a live ``sandbox serve``, and its pydantic models parse our answers.
- verl's sandbox-fusion reward code: its exact payload (``memory_limit_MB=1024``,
  ``stdin`` null, ``files {}``, ``fetch_files []``) and the fields it reads. verl
  retries only HTTP 504, so pool saturation must answer 504 (with Retry-After).
- OpenRLHF's remote reward: ``update_samples_with_rewards`` does ``torch.as_tensor``
  on ``rewards``, ``scores`` and every ``extra_logs`` value, and its
  ``request_api_wrapper`` retries any HTTP error; a sample we could not judge must
  make the whole answer a 503 with Retry-After, never a reward of 0 or null.

Nothing is mocked: real service, real HTTP, real containers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import requests

from tests.conftest import Service, one_container_service

pytestmark = pytest.mark.docker

sandbox_fusion = pytest.importorskip("sandbox_fusion")

CPP_ECHO = """#include <iostream>
#include <string>
int main() {
    std::string name;
    std::getline(std::cin, name);
    std::cout << "hello " << name << std::endl;
    return 0;
}
"""
CPP_BROKEN = "int main() { return undeclared; }\n"
SQUARE_TESTS = {
    "kind": "function",
    "entry_point": "square",
    "cases": [{"args": [2], "expected": 4}, {"args": [-3], "expected": 9}],
}


# --------------------------------------------------------------------------- SandboxFusion client


def fusion_run(service: Service, **fields: Any) -> Any:
    """The real client's run_code (one attempt: a failure must show, not be retried away)."""
    from sandbox_fusion import RunCodeRequest, run_code

    return run_code(RunCodeRequest(**fields), endpoint=service.url, max_attempts=1)


def test_fusion_client_python_success(service: Service) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code="print(input()[::-1])", stdin="abc\n", language="python")
    assert response.status == RunStatus.Success, response
    assert response.compile_result is None
    run = response.run_result
    assert run.status == CommandRunStatus.Finished
    assert (run.return_code, run.stdout, run.stderr) == (0, "cba\n", "")
    assert run.execution_time is not None and run.execution_time > 0
    assert run.cpu_time is not None and run.cpu_time >= 0


def test_fusion_client_python_failure(service: Service) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    code = "import sys\nprint('partial')\nsys.exit('boom')\n"
    response = fusion_run(service, code=code, language="python")
    assert response.status == RunStatus.Failed, response
    run = response.run_result
    assert run.status == CommandRunStatus.Finished
    assert (run.return_code, run.stdout) == (1, "partial\n")
    assert "boom" in run.stderr


def test_fusion_client_python_time_limit(service: Service) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code="while True:\n    pass\n", language="python", run_timeout=1)
    assert response.status == RunStatus.Failed
    assert response.run_result.status == CommandRunStatus.TimeLimitExceeded


def test_fusion_client_cpp_success(service: Service) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus

    response = fusion_run(service, code=CPP_ECHO, stdin="world\n", language="cpp")
    assert response.status == RunStatus.Success, response
    assert response.compile_result.status == CommandRunStatus.Finished
    assert response.compile_result.return_code == 0
    assert response.run_result.status == CommandRunStatus.Finished
    assert (response.run_result.return_code, response.run_result.stdout) == (0, "hello world\n")


def test_fusion_client_cpp_compile_error(service: Service) -> None:
    from sandbox_fusion import CommandRunStatus, RunStatus, SummaryMapping, summary_run_code_result

    response = fusion_run(service, code=CPP_BROKEN, language="cpp")
    assert response.status == RunStatus.Failed, response
    assert response.run_result is None
    compiled = response.compile_result
    assert compiled.status == CommandRunStatus.Finished
    assert compiled.return_code not in (None, 0)
    assert "undeclared" in (compiled.stderr or "") + (compiled.stdout or "")
    # The client's own summary of a result classifies it as a compile failure.
    mapping = SummaryMapping(CompileFailed="compile_failed")
    assert summary_run_code_result(response, mapping) == "compile_failed"


def test_fusion_server_request_with_every_field(http: httpx.Client) -> None:
    """SandboxFusion's server model also has memory_limit_MB and args (argv for the program)."""
    body = {
        "compile_timeout": 10,
        "run_timeout": 10,
        "memory_limit_MB": -1,
        "code": "import sys\nprint(sys.argv[1:])\n",
        "stdin": None,
        "language": "python",
        "files": {},
        "fetch_files": [],
        "args": ["--flag", "two words"],
    }
    response = http.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "Success", result
    assert result["run_result"]["stdout"] == "['--flag', 'two words']\n"
    # The client's default, an empty list, is accepted too.
    response = http.post("/run_code", json={**body, "args": []})
    assert response.status_code == 200, response.text
    assert response.json()["run_result"]["stdout"] == "[]\n"


def test_fusion_unknown_field_names_it(http: httpx.Client) -> None:
    response = http.post("/run_code", json={"code": "print(1)", "language": "python", "gpu": 1})
    assert response.status_code == 422, response.text
    assert "gpu" in response.json()["message"]


# --------------------------------------------------------------------------- verl


def verl_payload(code: str, stdin: str | None, language: str = "python") -> str:
    """What verl's call_sandbox_api posts (timeouts as given, memory_limit_MB its default 1024)."""
    return json.dumps(
        {
            "compile_timeout": 10,
            "run_timeout": 10,
            "code": code,
            "stdin": stdin,
            "memory_limit_MB": 1024,
            "language": language,
            "files": {},
            "fetch_files": [],
        }
    )


def verl_post(url: str, payload: str) -> requests.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    return requests.post(f"{url}/run_code", headers=headers, data=payload, timeout=30)


def verl_verdict(api_response: dict[str, Any], expected_output: str | None) -> Any:
    """verl's classification of one case, from the fields it reads.

    True/False: ran and the output did (not) match; -1 sandbox error; -2 runtime
    error; -3 time limit; -4 compile error or compile time limit.
    """
    status = api_response.get("status")
    compile_result = api_response.get("compile_result")
    run_result = api_response.get("run_result")
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if compile_result and (
            compile_result.get("status") in ("Error", "TimeLimitExceeded")
            or (compile_result.get("status") == "Finished" and compile_result.get("return_code"))
        ):
            return -4
        if run_result:
            if run_result.get("status") == "TimeLimitExceeded":
                return -3
            if run_result.get("status") == "Error" or run_result.get("return_code") != 0:
                return -2
        return -1
    if status == "Success" and run_result and run_result.get("status") == "Finished":
        stdout = run_result.get("stdout") or ""
        return expected_output is None or stdout.rstrip("\n") == expected_output.rstrip("\n")
    return -1


def test_verl_payload_is_accepted_and_read_like_verl(service: Service) -> None:
    cases = [
        ("print(int(input()) * 2)", "21\n", "python", "42", True),
        ("print(int(input()) * 2)", "21\n", "python", "41", False),
        ("print('no stdin')", None, "python", "no stdin", True),
        ("import sys\nsys.exit(3)", None, "python", "", -2),
        ("while True:\n    pass", None, "python", "", -3),
        (CPP_ECHO, "verl\n", "cpp", "hello verl", True),
        (CPP_BROKEN, None, "cpp", "", -4),
    ]
    for code, stdin, language, expected, verdict in cases:
        response = verl_post(service.url, verl_payload(code, stdin, language))
        assert response.status_code == 200, response.text
        data = response.json()
        assert verl_verdict(data, expected) == verdict, (code, data)
        run_result = data.get("run_result")
        if run_result:
            for key in ("status", "stdout", "stderr", "return_code", "execution_time"):
                assert key in run_result, run_result
        compile_result = data.get("compile_result")
        if compile_result:
            for key in ("status", "execution_time", "stderr", "return_code"):
                assert key in compile_result, compile_result


def test_verl_memory_limit_above_policy_is_lowered(service: Service) -> None:
    """verl asks for 1024 MB; the default policy's 512 MB still holds."""
    code = "blob = bytearray(700 * 1024 * 1024)\nprint('allocated', len(blob))\n"
    response = verl_post(service.url, verl_payload(code, None))
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["status"] == "Failed", data
    assert "allocated" not in (data["run_result"]["stdout"] or "")
    assert verl_verdict(data, "allocated") in (-2, -3)


# --------------------------------------------------------------------------- saturation


@pytest.fixture(scope="module")
def one_container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service whose only policy keeps one container and lets no request wait for it."""
    with one_container_service(tmp_path_factory.mktemp("compat-one-container")) as svc:
        yield svc


def idle_containers(url: str) -> int:
    status = httpx.get(f"{url}/v1/pool", timeout=10).json()
    return sum(group["idle"] for group in status["groups"] if group["policy"] == "default")


def wait_idle(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if idle_containers(url) >= 1:
            return
        time.sleep(0.1)
    raise AssertionError("the pool's container never came back")


def hold_the_container(url: str, seconds: float) -> threading.Thread:
    """Occupy the only container with a sleeping program; return once it is leased."""
    code = f"import time\ntime.sleep({seconds})\nprint('done')\n"
    thread = threading.Thread(
        target=lambda: httpx.post(f"{url}/v1/run", json={"code": code}, timeout=60)
    )
    thread.start()
    deadline = time.monotonic() + 30
    while idle_containers(url) != 0:
        assert time.monotonic() < deadline, "the hog never got the container"
        time.sleep(0.05)
    return thread


def test_run_code_saturation_is_a_504_verl_retries(one_container: Service) -> None:
    wait_idle(one_container.url)
    hog = hold_the_container(one_container.url, 3)
    try:
        response = verl_post(one_container.url, verl_payload("print('hi')", None))
    finally:
        hog.join()
    assert response.status_code == 504, response.text
    assert response.json()["code"] == "capacity_exhausted"
    retry_after = response.headers["retry-after"]
    assert retry_after.isdigit() and int(retry_after) >= 1


def test_verl_retry_loop_gets_through_a_saturated_pool(one_container: Service) -> None:
    """verl's loop (3 attempts, sleeping 1 s then 2 s after a 504) judges every case."""
    wait_idle(one_container.url)

    def verl_call(index: int) -> tuple[list[int], dict[str, Any] | None]:
        statuses = []
        payload = verl_payload(f"import time\ntime.sleep(0.2)\nprint({index})", None)
        for attempt in range(3):
            response = verl_post(one_container.url, payload)
            statuses.append(response.status_code)
            if response.status_code == 504:
                time.sleep(attempt + 1)
                continue
            response.raise_for_status()
            return statuses, response.json()
        return statuses, None

    with ThreadPoolExecutor(2) as executor:
        outcomes = list(executor.map(verl_call, range(2)))
    all_statuses = [s for statuses, _ in outcomes for s in statuses]
    assert 504 in all_statuses, all_statuses  # the pool really was saturated
    for index, (statuses, data) in enumerate(outcomes):
        assert data is not None, statuses
        assert verl_verdict(data, str(index)) is True, data


# --------------------------------------------------------------------------- OpenRLHF


def openrlhf_update(rewards_info: list[dict[str, Any]], samples_len: list[int]) -> dict[str, Any]:
    """What OpenRLHF's update_samples_with_rewards does with each answer, and its logging."""
    torch = pytest.importorskip("torch")
    rewards = torch.cat([torch.as_tensor(info["rewards"]) for info in rewards_info]).split(
        samples_len
    )
    scores = torch.cat([torch.as_tensor(info["scores"]) for info in rewards_info]).split(
        samples_len
    )
    logs = {
        key: torch.cat([torch.as_tensor(info["extra_logs"][key]) for info in rewards_info]).split(
            samples_len
        )
        for key in rewards_info[0]["extra_logs"]
    }
    # Logged as means: each must be a number tensor that can be averaged.
    means = {key: float(torch.cat(values).mean()) for key, values in logs.items()}
    return {"rewards": rewards, "scores": scores, "means": means}


def openrlhf_body(label: Any) -> dict[str, Any]:
    prompt = "Write square(x).\n"
    right = prompt + "```python\ndef square(x):\n    return x * x\n```"
    wrong = prompt + "```python\ndef square(x):\n    return x\n```"
    broken = prompt + "```python\ndef square(x) return\n```"
    return {"query": [right, wrong, broken], "prompts": [prompt] * 3, "labels": [label] * 3}


def test_get_reward_passes_through_openrlhf_torch(service: Service) -> None:
    torch = pytest.importorskip("torch")
    label = json.dumps({"tests": SQUARE_TESTS})
    response = requests.post(f"{service.url}/get_reward", json=openrlhf_body(label), timeout=120)
    assert response.status_code == 200, response.text
    info = response.json()
    for key in ("rewards", "scores", *info["extra_logs"]):
        values = info[key] if key in ("rewards", "scores") else info["extra_logs"][key]
        assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in values), (
            key,
            values,
        )
    # Two rollouts' answers, concatenated then split back as OpenRLHF does.
    merged = openrlhf_update([info, info], [2, 4])
    assert torch.cat(merged["rewards"]).tolist() == [1.0, 0.0, 0.0] * 2
    assert merged["means"]["pass_rate"] == pytest.approx((1.0 + 0.0 + 0.0) / 3)
    assert merged["means"]["infra_error"] == 0.0
    assert info["extra_logs"]["passed"] == [2, 0, 0]
    assert info["extra_logs"]["total"][:2] == [2, 2]


def test_get_reward_unjudged_sample_is_a_503_openrlhf_retries(one_container: Service) -> None:
    """With the only container busy past our own retries, no reward is made up: 503."""
    wait_idle(one_container.url)
    body = openrlhf_body({"tests": SQUARE_TESTS})
    hog = hold_the_container(one_container.url, 8)
    try:
        started = time.monotonic()
        response = requests.post(f"{one_container.url}/get_reward", json=body, timeout=120)
        elapsed = time.monotonic() - started
    finally:
        hog.join()
    assert response.status_code == 503, response.text
    assert elapsed < 8, "the answer waited for the hog instead of retrying a bounded number"
    retry_after = response.headers["retry-after"]
    assert retry_after.isdigit() and int(retry_after) >= 1
    assert "could not be judged" in response.json()["message"]
    # OpenRLHF's request_api_wrapper: raise_for_status, sleep 1 s, try again (5 times).
    wait_idle(one_container.url)
    for _ in range(5):
        response = requests.post(f"{one_container.url}/get_reward", json=body, timeout=120)
        if response.status_code == 200:
            break
        time.sleep(1)
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [1.0, 0.0, 0.0]


def test_get_reward_is_bounded_by_the_pool(one_container: Service) -> None:
    """A batch bigger than the pool (one container, no waiting) is judged, not refused."""
    wait_idle(one_container.url)
    body = openrlhf_body({"tests": SQUARE_TESTS})
    body = {key: value * 3 for key, value in body.items()}  # 9 samples, one container
    response = requests.post(f"{one_container.url}/get_reward", json=body, timeout=300)
    assert response.status_code == 200, response.text
    assert response.json()["rewards"] == [1.0, 0.0, 0.0] * 3


def test_get_reward_fenced_unfenced_and_fraction_labels(http: httpx.Client) -> None:
    """The last fenced block, or the whole response; labels as JSON text or objects."""
    prompt = "Write square(x).\n"
    right = prompt + "Sure:\n```python\ndef square(x):\n    return x * x\n```\nDone."
    half = prompt + "```python\ndef square(x):\n    return 4\n```"
    unfenced = prompt + "def square(x):\n    return x ** 2\n"
    body = {
        "query": [right, half, unfenced],
        "prompts": [prompt] * 3,
        "labels": [
            json.dumps({"tests": SQUARE_TESTS}),
            {"tests": SQUARE_TESTS, "reward": "fraction"},
            {"tests": SQUARE_TESTS},
        ],
    }
    response = http.post("/get_reward", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["rewards"] == [1.0, 0.5, 1.0], data
    assert data["scores"] == data["rewards"]
    logs = data["extra_logs"]
    assert logs["pass_rate"] == [1.0, 0.5, 1.0]
    assert logs["all_passed"] == [1.0, 0.0, 1.0]
    assert logs["infra_error"] == [0.0, 0.0, 0.0]
    assert "error_class" not in logs  # strings cannot become a tensor
