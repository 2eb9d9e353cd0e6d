import os


def test_file_exists():
    assert os.path.exists(os.path.join(os.environ["WORK"], "calc.py"))
