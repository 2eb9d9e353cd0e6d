"""lib/slug.js against its README, judged outside the process that runs it.

The agent's JavaScript runs in a node process of its own (``driver.js``), which
only answers calls; the expected slugs are literals here or come from
``reference.js``, run in another node process that never loads the workspace.
Exiting early or printing "ok" in the agent's code proves nothing.
"""

import json
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def node(script, jobs=None):
    done = subprocess.run(
        ["node", str(HERE / script)],
        input=json.dumps(jobs if jobs is not None else []),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def slugs(*calls):
    """slugify(*call) for each call, in the agent's node process."""
    return node("driver.js", [{"slugify": list(call)} for call in calls])["results"]


def unique(taken, *calls):
    """uniqueSlug over one shared Set: (the slugs returned, the Set afterwards)."""
    job = {"unique": {"taken": list(taken), "calls": [list(call) for call in calls]}}
    result = node("driver.js", [job])["results"][0]
    return result["slugs"], result["taken"]


def test_the_module_is_the_workspace_copy():
    assert node("driver.js")["resolved"] is True


# The visible suite (test/slug.test.js in the workspace).


def test_lower_cases_and_joins_words():
    assert slugs(["Hello World"]) == ["hello-world"]


def test_drops_accents_and_reads_ampersand_as_and():
    assert slugs(["  Crème Brûlée & Café!  "]) == ["creme-brulee-and-cafe"]


def test_custom_separator():
    assert slugs(["Hello World", {"separator": "_"}]) == ["hello_world"]


def test_max_length_never_leaves_a_separator_at_the_end():
    assert slugs(["The quick brown fox", {"maxLength": 10}]) == ["the-quick"]


def test_unique_slug_counts_from_2():
    assert unique([], ["Post"], ["Post"], ["post!"]) == (
        ["post", "post-2", "post-3"],
        ["post", "post-2", "post-3"],
    )


# The hidden cases.


def test_accents_compatibility_forms_and_symbols():
    cases = {
        "Ärger über Öl": "arger-uber-ol",
        "São Paulo": "sao-paulo",
        "\ufb01le \uff21\uff22\uff23": "file-abc",  # a ligature, full-width letters
        "Rock&Roll": "rock-and-roll",
        "--Hello--": "hello",
        "!!!": "",
        "C++ 2023: what's new?": "c-2023-what-s-new",
    }
    assert slugs(*([title] for title in cases)) == list(cases.values())


def test_separators_that_are_special_in_regular_expressions():
    assert slugs(
        ["Hello, World. Again", {"separator": "."}],
        ["...dots...", {"separator": "."}],
        [" a b ", {"separator": "+"}],
        ["a b c", {"separator": "::"}],
    ) == ["hello.world.again", "dots", "a+b", "a::b::c"]


def test_max_length_cuts_and_trims():
    assert slugs(
        ["hello world", {"maxLength": 5}],
        ["hello world", {"maxLength": 6}],
        ["hello world", {"maxLength": 7}],
        ["hello world", {"maxLength": 0}],
        ["  Hi  ", {"maxLength": 50}],
        ["a_b_c", {"separator": "_", "maxLength": 2}],
    ) == ["hello", "hello", "hello-w", "", "hi", "a"]


def test_unique_slug_skips_taken_slugs_and_uses_the_separator():
    assert unique(["post", "post-2"], ["Post"], ["Post"]) == (
        ["post-3", "post-4"],
        ["post", "post-2", "post-3", "post-4"],
    )
    assert unique([], ["A b", {"separator": "_"}], ["a-B", {"separator": "_"}], ["Fresh"]) == (
        ["a_b", "a_b_2", "fresh"],
        ["a_b", "a_b_2", "fresh"],
    )


def test_random_titles_match_the_documented_rules():
    cases = node("reference.js")
    assert len(cases) == 500
    got = slugs(*([title, options] for title, options, _ in cases))
    wrong = [
        (title, options, want, have)
        for (title, options, want), have in zip(cases, got, strict=True)
        if want != have
    ]
    assert not wrong, wrong[:5]
