from pathlib import Path


def test_the_count_of_the_named_level() -> None:
    assert Path("/app/count.txt").read_text().strip() == "3"
