"""A client's own bad input is a 4xx naming the field, never an infrastructure error.

Over real HTTP against a real service: file names that are not text, that are both
a file and a directory, values nested past what the judge carries, and the same
mistakes inside an OpenRLHF label. Bodies are sent as raw bytes, so JSON escapes
(``\\ud800``, half a surrogate pair) reach the service exactly as a client wrote them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sandbox.judge.models import MAX_VALUE_DEPTH

pytestmark = pytest.mark.docker

LONE = "\\ud800"  # as it stands in the JSON text: a JSON escape, not a Python character
LONE_NAMED = '{"' + LONE + '": "x"}'  # files: one named by half a surrogate pair
GOOD_TESTS = {
    "kind": "function",
    "entry_point": "square",
    "cases": [{"args": [3], "expected": 9}],
}
SQUARE = "def square(x):\n    return x * x\n"


def post_raw(http: httpx.Client, path: str, body: str) -> httpx.Response:
    return http.post(path, content=body.encode(), headers={"content-type": "application/json"})


def refused(response: httpx.Response, status: int, *needles: str) -> str:
    """The error's message, after checking its status, its code and that it names each needle."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == "invalid_request", body
    for needle in needles:
        assert needle in body["message"], (needle, body["message"])
    return str(body["message"])


def command_tests(files: str) -> str:
    return (
        '{"kind": "command", "command": ["python3", "-m", "pytest", "-q"], '
        f'"report": "tap", "files": {files}}}'
    )


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


# ----------------------------------------------------------------------------- /v1/run


def test_run_file_name_with_a_lone_surrogate_is_422(http: httpx.Client) -> None:
    body = '{"code": "print(1)", "files": ' + LONE_NAMED + "}"
    refused(post_raw(http, "/v1/run", body), 422, "body.files", "\\ud800", "UTF-8")


def test_run_file_that_is_also_a_directory_is_422(http: httpx.Client) -> None:
    response = http.post("/v1/run", json={"code": "print(1)", "files": {"a": "1", "a/b": "2"}})
    refused(response, 422, "files", "'a'", "'a/b'")


def test_run_same_file_as_text_and_base64_is_422(http: httpx.Client) -> None:
    body = {"code": "print(1)", "files": {"a": "1"}, "files_base64": {"a/b": "MQ=="}}
    refused(http.post("/v1/run", json=body), 422, "'a'", "'a/b'")


@pytest.mark.parametrize("field", ["code", "stdin"])
def test_run_text_with_a_lone_surrogate_is_422(http: httpx.Client, field: str) -> None:
    """Before: the service could not encode the text and dropped the connection."""
    fields = {"code": '"print(1)"', "stdin": '""', field: f'"{LONE}"'}
    raw = "{" + ", ".join(f'"{name}": {value}' for name, value in fields.items()) + "}"
    refused(post_raw(http, "/v1/run", raw), 422, f"body.{field}", "UTF-8")


def test_run_paired_surrogates_are_text(http: httpx.Client) -> None:
    """A pair of escapes is one character (here an emoji): valid text, run as usual."""
    body = '{"code": "print(\\"\\ud83d\\ude00\\")", "files": {"\\ud83d\\ude00.txt": "x"}}'
    response = post_raw(http, "/v1/run", body)
    assert response.status_code == 200, response.text
    assert response.json()["stdout"] == "\U0001f600\n"


# -------------------------------------------------------------------------- /v1/judge


def test_judge_command_test_file_with_a_lone_surrogate_is_422(http: httpx.Client) -> None:
    """Before: reward null, error_class infra (a client mistake scored as our failure)."""
    body = '{"code": "x = 1", "tests": ' + command_tests(LONE_NAMED) + "}"
    refused(post_raw(http, "/v1/judge", body), 422, "body.tests.files", "UTF-8")


@pytest.mark.parametrize(
    ("files", "needles"),
    [
        ({"t": "x", "t/test_a.py": "y"}, ("tests.command.files", "'t'", "'t/test_a.py'")),
        ({"../test_a.py": "x"}, ("tests.command.files", "'..'")),
        ({"a//test_a.py": "x"}, ("tests.command.files",)),
    ],
    ids=["file-and-directory", "dotdot", "empty-part"],
)
def test_judge_bad_test_file_names_are_422(
    http: httpx.Client, files: dict[str, str], needles: tuple[str, ...]
) -> None:
    body = json.dumps({"code": "x = 1", "tests": json.loads(command_tests(json.dumps(files)))})
    refused(post_raw(http, "/v1/judge", body), 422, *needles)


@pytest.mark.parametrize("depth", [150, 600])
@pytest.mark.parametrize("field", ["args", "kwargs", "expected"])
def test_judge_deeply_nested_function_case_is_422(
    http: httpx.Client, depth: int, field: str
) -> None:
    """Before: 500 internal_error, and the leased container retired."""
    case: dict[str, Any] = {"args": [3], "expected": 9}
    case[field] = {"x": nested(depth)} if field == "kwargs" else nested(depth)
    tests = {**GOOD_TESTS, "cases": [case]}
    response = http.post("/v1/judge", json={"code": SQUARE, "tests": tests})
    refused(response, 422, f"tests.function.cases.0.{field}", f"{MAX_VALUE_DEPTH} levels")


def test_judge_nesting_at_the_bound_is_judged(http: httpx.Client) -> None:
    """The deepest value allowed is carried to the candidate and back, and compared."""
    code = "def square(x):\n    return x\n"
    value = nested(MAX_VALUE_DEPTH - 1)
    tests = {**GOOD_TESTS, "cases": [{"args": [value], "expected": value}]}
    response = http.post("/v1/judge", json={"code": code, "tests": tests})
    assert response.status_code == 200, response.text
    assert response.json()["reward"] == 1.0


def test_evaluate_with_a_deeply_nested_item_is_422_naming_it(http: httpx.Client) -> None:
    """Before: 200 with no item line at all and a summary of judged 0, errors 0."""
    deep = {**GOOD_TESTS, "cases": [{"args": [nested(150)], "expected": 9}]}
    items = [
        {"code": SQUARE, "tests": GOOD_TESTS},
        {"code": SQUARE, "tests": deep},
        {"code": SQUARE, "tests": GOOD_TESTS},
    ]
    response = http.post("/v1/evaluate", json={"items": items})
    refused(response, 422, "items.1.tests.function.cases.0.args", "levels deep")


# ------------------------------------------------------------------------- /get_reward


def reward_body(bad_label: Any) -> dict[str, Any]:
    good = {"tests": GOOD_TESTS}
    return {"query": [SQUARE, SQUARE], "labels": [good, bad_label]}


def test_get_reward_bad_label_file_name_is_422_naming_its_index(http: httpx.Client) -> None:
    """Before: 503 with Retry-After for the whole batch, which OpenRLHF retries forever.

    The label is JSON text carrying the escape, so the surrogate only appears once the
    service decodes the label itself."""
    label = '{"tests": ' + command_tests(LONE_NAMED) + "}"
    response = http.post("/get_reward", json=reward_body(label))
    refused(response, 422, "labels[1]", "UTF-8")
    assert "retry-after" not in response.headers


def test_get_reward_label_file_and_directory_is_422_naming_its_index(http: httpx.Client) -> None:
    label = {"tests": json.loads(command_tests(json.dumps({"t": "x", "t/u": "y"})))}
    response = http.post("/get_reward", json=reward_body(label))
    refused(response, 422, "labels[1].tests.command.files", "'t/u'")


def test_get_reward_deeply_nested_label_is_422_naming_its_index(http: httpx.Client) -> None:
    label = {"tests": {**GOOD_TESTS, "cases": [{"args": [nested(150)], "expected": 9}]}}
    response = http.post("/get_reward", json=reward_body(label))
    refused(response, 422, "labels[1].tests.function.cases.0.args", "levels deep")


def test_get_reward_label_nested_past_the_json_parser_is_422(http: httpx.Client) -> None:
    label = '{"tests": ' + "[" * 100_000 + "]" * 100_000 + "}"
    refused(http.post("/get_reward", json=reward_body(label)), 422, "labels[1]", "not JSON")


def test_an_argv_without_a_program_is_422_and_the_session_lives(http: httpx.Client) -> None:
    """Found by the schema fuzzer: ``{"command": [""]}`` was a 503 (the runner could not start
    an empty program name, reported as a lost container)."""
    session = http.post("/v1/sessions", json={}).json()["id"]
    try:
        refused = http.post(f"/v1/sessions/{session}/exec", json={"command": [""]})
        assert refused.status_code == 422, refused.text
        assert "names the program" in refused.text
        ok = http.post(f"/v1/sessions/{session}/exec", json={"command": ["echo", "hi"]})
        assert ok.status_code == 200 and ok.json()["stdout"] == "hi\n", ok.text
    finally:
        http.delete(f"/v1/sessions/{session}")
