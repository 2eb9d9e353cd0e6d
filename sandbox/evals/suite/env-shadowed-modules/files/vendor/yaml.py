"""A minimal YAML reader vendored in 2019 for machines without PyYAML.

Only flat `key: value` files are supported.
"""


class YAMLError(Exception):
    pass


def safe_load(stream):
    text = stream.read() if hasattr(stream, "read") else stream
    data = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].rstrip()
        if not line:
            continue
        if line.startswith((" ", "\t", "-")) or ":" not in line:
            raise YAMLError(f"line {number}: only flat 'key: value' lines are supported")
        key, value = line.split(":", 1)
        data[key.strip()] = value.strip()
    return data
