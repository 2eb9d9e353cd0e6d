"""The TRL and verl reward functions, called as those trainers call them, against a real service.

``trl_reward`` is called exactly as TRL's ``GRPOTrainer._calculate_rewards`` calls an
async reward function (TRL >= 0.27.0): keywords ``prompts``, ``completions``,
``completion_ids``, every dataset column, ``trainer_state`` (and, from TRL 1.0,
``log_extra`` and ``log_metric``), awaited on a persistent event loop in another thread
through ``asyncio.run_coroutine_threadsafe``. ``compute_score`` is called as verl's reward
managers call a custom reward function: keywords ``data_source``, ``solution_str``,
``ground_truth``, ``extra_info``. Nothing of the platform is mocked: a ``sandbox serve``
process judges everything in real containers; requests are counted by wrapping the
real HTTP transport, and judgements by the service's own ``/metrics``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import pickle
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import docker
import httpx
import pytest
import yaml

from sandbox.client import AsyncSandboxClient
from sandbox.errors import AuthenticationError, InfrastructureError
from sandbox.host.labels import LABEL_OWNER, LABEL_POLICY
from sandbox.integrations import rewards
from sandbox.rewards import compute_score, trl_reward
from sandbox.service.tenants import hash_key, new_key
from tests.conftest import Service, free_port, metric

pytestmark = pytest.mark.docker

T = TypeVar("T")

KILL_POLICY = "trlkill"
KEY = new_key()

SQUARE_IO = {"kind": "io", "cases": [{"stdin": "3\n", "expected_stdout": "9"}]}
SQUARE_RIGHT = "x = int(input())\nprint(x * x)\n"
SQUARE_WRONG = "x = int(input())\nprint(x + x)\n"
ADD_FUNCTION = {
    "kind": "function",
    "entry_point": "add",
    "cases": [{"args": [1, 2], "expected": 3}, {"args": [-4, 4], "expected": 0}],
}
# verl's code ground truth (prime_code / sandbox_fusion): stdin -> stdout ...
VERL_STDIN = {"inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
SUM_RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
SUM_WRONG = "a, b = map(int, input().split())\nprint(a * b)\n"
# ... and call-based: one JSON argument per input line, the output a JSON value.
VERL_CALL = {
    "inputs": ["[1, 2, 3]\n2", "[]\n5"],
    "outputs": ["[2, 4, 6]", "[]"],
    "fn_name": "scale",
}
SCALE_RIGHT = "def scale(xs, k):\n    return [x * k for x in xs]\n"
SCALE_METHOD = "class Solution:\n    def scale(self, xs, k):\n        return [x * k for x in xs]\n"


def fenced(code: str, prose: str = "Here is my solution.") -> str:
    return f"{prose}\n\n```python\n{code}```\n"


# --------------------------------------------------------------------------- services


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reward-policies")
    (root / "default.yaml").write_text("pool: {warm: 1, max: 4}\n")
    # A policy of its own, so the infrastructure test kills only its containers.
    kill = {
        "extends": "default",
        "resources": {"wall_time_s": 30.0, "cpu_time_s": 30.0},
        "pool": {"warm": 0, "max": 2},
    }
    (root / f"{KILL_POLICY}.yaml").write_text(yaml.safe_dump(kill))
    return root


@pytest.fixture(scope="module")
def served(policies: Path) -> Iterator[Service]:
    svc = Service(policies=policies)
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("reward-keys")
    keys = root / "keys.yaml"
    entry = {"tenant": "trainer", "policies": ["default"], "key_sha256": hash_key(KEY)}
    keys.write_text(yaml.safe_dump({"keys": [entry]}))
    svc = Service("--keys", str(keys), env={"SANDBOX_STATE_DIR": str(root / "state")})
    try:
        svc.wait_ready()
        yield svc
    finally:
        svc.stop()


@pytest.fixture
def verl_env(served: Service, monkeypatch: pytest.MonkeyPatch) -> Service:
    monkeypatch.setenv(rewards.URL_ENV, served.url)
    monkeypatch.delenv(rewards.KEY_ENV, raising=False)
    return served


class CountingTransport(httpx.AsyncHTTPTransport):
    """The real HTTP transport, noting each request's method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}")
        return await super().handle_async_request(request)


def judgements(service: Service) -> float:
    """``sandbox_judgements_total`` over every label: submissions the service judged."""
    text = httpx.get(f"{service.url}/metrics", timeout=30).text
    return metric(text, "sandbox_judgements_total")


class TrlLoop:
    """TRL's way of awaiting async reward functions: one event loop in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def trl_loop() -> Iterator[TrlLoop]:
    loop = TrlLoop()
    yield loop
    loop.close()


def trainer_state(step: int) -> Any:
    try:
        from transformers import TrainerState
    except ImportError:  # the rl extra is not installed: any object stands for it
        import types

        return types.SimpleNamespace(global_step=step, epoch=0.0)
    return TrainerState(global_step=step)


def trl_kwargs(
    completions: list[Any], tests: list[Any], step: int = 1, **columns: list[Any]
) -> dict[str, Any]:
    """What ``_calculate_rewards`` passes: the standard keywords, then every other column."""
    extra: dict[str, list[Any]] = {}
    prompts: list[Any] = [f"task {i}" for i in range(len(completions))]
    if completions and not isinstance(completions[0], str):  # conversational: messages
        prompts = [[{"role": "user", "content": prompt}] for prompt in prompts]
    return {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": [[101 + i, 102, 103] for i in range(len(completions))],
        "tests": tests,
        **columns,
        "trainer_state": trainer_state(step),
        "log_extra": lambda column, values: extra.setdefault(column, []).extend(values),
        "log_metric": lambda name, value: None,
    }


# --------------------------------------------------------------------------- TRL


def test_the_trl_function_is_async_named_and_picklable() -> None:
    reward = trl_reward("http://127.0.0.1:9", policy="strict")
    assert inspect.iscoroutinefunction(reward)  # TRL's test for its async branch
    assert asyncio.iscoroutinefunction(reward)  # TRL 0.27 - 1.x used this one
    assert getattr(reward, "__name__", None) == "sandbox_reward"  # TRL < 1.x names it so
    # AsyncGRPOTrainer pickles reward functions into its rollout process.
    copy = pickle.loads(pickle.dumps(reward))
    assert inspect.iscoroutinefunction(copy) and copy.__name__ == "sandbox_reward"


def test_plain_completions_one_evaluate_call(served: Service, trl_loop: TrlLoop) -> None:
    transport = CountingTransport()
    client = AsyncSandboxClient(served.url, transport=transport)
    reward = trl_reward(client=client)
    completions = [
        fenced(SQUARE_RIGHT),
        fenced(SQUARE_WRONG),
        # the code block, then a block of sample output: the python block is judged
        fenced(SUM_RIGHT) + "Running it:\n```\n$ python main.py\n3\n```\n",
        fenced(SCALE_RIGHT),
        SUM_WRONG,  # no fence at all: the whole completion is the code
        "Sure.\n```python\n" + SQUARE_RIGHT,  # cut off at the token limit before the fence closed
        "The capital of France is Paris.",  # a row of another task: no tests
    ]
    tests = [
        SQUARE_IO,
        json.dumps(SQUARE_IO),  # JSON text, as a datasets string column holds it
        json.dumps(VERL_STDIN),
        VERL_CALL,
        VERL_STDIN,
        {"tests": SQUARE_IO, "test_timeout_s": 5},  # a whole label
        None,
    ]
    before = judgements(served)
    kwargs = trl_kwargs(completions, tests, difficulty=["easy"] * len(completions))
    result = trl_loop.run(reward(**kwargs))
    assert result == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, None]
    assert len(result) == len(completions)
    assert transport.requests.count("POST /v1/evaluate") == 1, transport.requests
    assert len(transport.requests) == 1, transport.requests
    assert judgements(served) - before == 6  # each code row judged once, the other never sent
    # A second step, on the same loop and client: again one call.
    again = trl_loop.run(reward(**trl_kwargs(completions[:2], tests[:2], step=2)))
    assert again == [1.0, 0.0]
    assert transport.requests.count("POST /v1/evaluate") == 2
    trl_loop.run(client.aclose())


def test_conversational_completions(verl_env: Service) -> None:
    """Completions as lists of messages; the URL from ``$SANDBOX_URL``; a fresh loop each call."""
    reward = trl_reward()  # no client: each call opens its own connection
    completions = [
        [{"role": "assistant", "content": fenced(SQUARE_RIGHT)}],
        [{"role": "assistant", "content": fenced(SQUARE_WRONG)}],
        [  # a tool turn in between: the assistant's answer with code is judged
            {"role": "assistant", "content": "Let me check.", "tool_calls": [{"id": "1"}]},
            {"role": "tool", "name": "python", "content": "```python\nprint('not this')\n```"},
            {"role": "assistant", "content": [{"type": "text", "text": fenced(SUM_RIGHT)}]},
        ],
        [{"role": "assistant", "content": fenced("def add(a, b):\n    return a - b\n")}],
    ]
    tests = [SQUARE_IO, SQUARE_IO, VERL_STDIN, ADD_FUNCTION]
    for step in (1, 2):  # asyncio.run: a new event loop each time
        result = asyncio.run(reward(**trl_kwargs(completions, tests, step=step)))
        assert result == [1.0, 0.0, 1.0, 0.0]


def test_fraction_reward_and_language_column(served: Service) -> None:
    reward = trl_reward(served.url, reward="fraction")
    half = "def add(a, b):\n    return a + b if a > 0 else 99\n"
    bash = "read x\necho $((x * x))\n"
    kwargs = trl_kwargs(
        [fenced(half), f"```bash\n{bash}```"],
        [ADD_FUNCTION, SQUARE_IO],
        language=[None, "bash"],
    )
    assert asyncio.run(reward(**kwargs)) == [0.5, 1.0]


def test_a_missing_tests_column_is_a_clear_error(served: Service) -> None:
    reward = trl_reward(served.url, tests_column="hidden_tests")
    with pytest.raises(KeyError, match="hidden_tests"):
        asyncio.run(reward(**trl_kwargs([fenced(SQUARE_RIGHT)], [SQUARE_IO])))


def test_an_item_not_judged_in_time_gets_none(served: Service) -> None:
    reward = trl_reward(served.url, item_timeout_s=2.0)
    slow = "import time\ntime.sleep(8)\nx = int(input())\nprint(x * x)\n"
    result = asyncio.run(reward(**trl_kwargs([fenced(SQUARE_RIGHT), slow], [SQUARE_IO] * 2)))
    assert result == [1.0, None]


async def test_a_killed_container_gives_none_never_zero(
    served: Service, docker_client: docker.DockerClient
) -> None:
    """A container killed while the candidate runs: that sample is None, the others scored."""
    reward = trl_reward(served.url, policy=KILL_POLICY)
    hanging = "import time\n\n\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n"
    tests = [SQUARE_IO, {"tests": ADD_FUNCTION, "test_timeout_s": 25}]
    task = asyncio.create_task(reward(**trl_kwargs([SQUARE_RIGHT, hanging], tests)))
    owner = f"{socket.gethostname()}:{served.process.pid}:"
    running_since: dict[str, float] = {}
    killed = False
    deadline = time.monotonic() + 40
    while not killed and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        containers = await asyncio.to_thread(
            docker_client.containers.list, filters={"label": f"{LABEL_POLICY}={KILL_POLICY}"}
        )
        for container in containers:
            if not container.labels.get(LABEL_OWNER, "").startswith(owner):
                continue
            try:
                top = await asyncio.to_thread(container.top)
            except docker.errors.APIError:
                continue
            uid = top["Titles"].index("UID")
            if not any(process[uid] == "10001" for process in top.get("Processes") or []):
                running_since.pop(str(container.id), None)
                continue
            # The quick program exits in well under a second; the hanging one stays.
            first = running_since.setdefault(str(container.id), time.monotonic())
            if time.monotonic() - first > 1.5:
                await asyncio.to_thread(container.kill)
                killed = True
    assert killed, "no candidate of the policy kept running"
    result = await asyncio.wait_for(task, 60)
    assert result == [1.0, None]


def test_an_unreachable_service_raises_after_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewards, "RETRY_WAIT_S", 0.05)
    reward = trl_reward(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(InfrastructureError, match="3 attempts"):
        asyncio.run(reward(**trl_kwargs([fenced(SQUARE_RIGHT)], [SQUARE_IO])))


# --------------------------------------------------------------------------- verl


def verl_score(solution: str, ground_truth: Any, **extra_info: Any) -> dict[str, Any]:
    """As verl's reward managers call it (``extra_info`` as they fill it in)."""
    info = {"split": "train", "index": 0, "num_turns": None, "rollout_reward_scores": {}}
    return compute_score(
        data_source="codecontests",
        solution_str=solution,
        ground_truth=ground_truth,
        extra_info={**info, **extra_info},
    )


def test_verl_with_our_tests_format(verl_env: Service) -> None:
    right = verl_score(fenced(SQUARE_RIGHT), SQUARE_IO)
    assert right == {
        "score": 1.0,
        "passed": 1,
        "total": 1,
        "error_class": "none",
        "data_source": "codecontests",
    }
    wrong = verl_score(fenced(SQUARE_WRONG), json.dumps(SQUARE_IO))
    assert wrong["score"] == 0.0 and wrong["error_class"] == "wrong_answer"
    assert wrong.keys() == right.keys()  # verl gathers each key into a column
    # the ground truth as a label, with its own options
    label = {"tests": ADD_FUNCTION, "reward": "fraction"}
    half = verl_score(fenced("def add(a, b):\n    return a + b if a > 0 else 99\n"), label)
    assert (half["score"], half["passed"], half["total"]) == (0.5, 1, 2)


def test_verl_inputs_outputs_format(verl_env: Service) -> None:
    assert verl_score(fenced(SUM_RIGHT), VERL_STDIN)["score"] == 1.0
    assert verl_score(fenced(SUM_WRONG), VERL_STDIN)["score"] == 0.0
    # JSON text, as verl's parquet files hold it, and lines given as lists
    as_text = json.dumps({"inputs": [["1 2"], ["10 -3"]], "outputs": [["3"], ["7"]]})
    assert verl_score(fenced(SUM_RIGHT), as_text)["score"] == 1.0
    # whitespace-insensitive, as competitive-programming judges are
    spaced = "a, b = map(int, input().split())\nprint(' ', a + b, ' ')\n"
    assert verl_score(fenced(spaced), VERL_STDIN)["score"] == 1.0
    assert verl_score(fenced(spaced), VERL_STDIN, compare="exact")["score"] == 0.0
    # a fraction of the cases
    partial = "a, b = map(int, input().split())\nprint(3)\n"
    assert verl_score(fenced(partial), VERL_STDIN, reward="fraction")["score"] == 0.5


def test_verl_call_based_format(verl_env: Service) -> None:
    assert verl_score(fenced(SCALE_RIGHT), VERL_CALL)["score"] == 1.0
    assert verl_score(fenced(SCALE_METHOD), json.dumps(VERL_CALL))["score"] == 1.0
    wrong = verl_score(fenced("def scale(xs, k):\n    return xs\n"), VERL_CALL)
    assert wrong["score"] == 0.0 and wrong["error_class"] == "wrong_answer"
    missing = verl_score(fenced("def other(xs, k):\n    return xs\n"), VERL_CALL)
    assert missing["score"] == 0.0 and missing["error_class"] != "infra"


def test_verl_bad_ground_truth_is_an_error_not_a_score(verl_env: Service) -> None:
    with pytest.raises(ValueError, match="inputs"):
        verl_score("print(1)", {"answer": 42})
    with pytest.raises(ValueError, match="not JSON"):
        verl_score("print(1)", "[[not json")
    with pytest.raises(ValueError, match="Python only"):
        verl_score("int main(){}", VERL_CALL, language="cpp")


def test_verl_unreachable_service_raises_never_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewards, "RETRY_WAIT_S", 0.05)
    monkeypatch.setenv(rewards.URL_ENV, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(InfrastructureError, match="not scoring it 0"):
        verl_score(fenced(SQUARE_RIGHT), SQUARE_IO)


# --------------------------------------------------------------------------- API keys


def test_keys_from_sandbox_api_key(keyed: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rewards.URL_ENV, keyed.url)
    monkeypatch.delenv(rewards.KEY_ENV, raising=False)
    with pytest.raises(AuthenticationError):  # refused at once, not retried as infrastructure
        verl_score(fenced(SQUARE_RIGHT), SQUARE_IO)
    with pytest.raises(AuthenticationError):
        asyncio.run(trl_reward()(**trl_kwargs([fenced(SQUARE_RIGHT)], [SQUARE_IO])))

    monkeypatch.setenv(rewards.KEY_ENV, KEY)
    assert verl_score(fenced(SQUARE_RIGHT), SQUARE_IO)["score"] == 1.0
    assert verl_score(fenced(SUM_RIGHT), json.dumps(VERL_STDIN))["score"] == 1.0
    reward = trl_reward()
    completions = [fenced(SQUARE_RIGHT), fenced(SQUARE_WRONG)]
    assert asyncio.run(reward(**trl_kwargs(completions, [SQUARE_IO] * 2))) == [1.0, 0.0]


def test_an_explicit_key_wins(keyed: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(rewards.KEY_ENV, "sbx_not_a_key")
    reward = trl_reward(keyed.url, api_key=KEY)
    assert asyncio.run(reward(**trl_kwargs([fenced(SQUARE_RIGHT)], [SQUARE_IO]))) == [1.0]
    with pytest.raises(AuthenticationError):
        asyncio.run(trl_reward(keyed.url)(**trl_kwargs([fenced(SQUARE_RIGHT)], [SQUARE_IO])))
