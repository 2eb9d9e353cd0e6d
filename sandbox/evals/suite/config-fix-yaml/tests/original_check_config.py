"""Check the service configuration before a deploy: python3 app/check_config.py FILE."""

from __future__ import annotations

import sys

import yaml


class StrictLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys instead of keeping the last one."""


def _mapping(loader: StrictLoader, node: yaml.MappingNode) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check(config: object) -> list[str]:
    if not isinstance(config, dict):
        return ["the file must be a mapping"]
    problems = []
    expected = {"service", "database", "allowed_hosts", "features"}
    if set(config) != expected:
        problems.append(f"top-level keys must be exactly {sorted(expected)}")
    service = config.get("service") or {}
    if not isinstance(service.get("name"), str) or not service.get("name"):
        problems.append("service.name must be a non-empty string")
    if not is_int(service.get("port")) or not 1 <= service["port"] <= 65535:
        problems.append("service.port must be an integer from 1 to 65535")
    if not is_int(service.get("workers")) or not 1 <= service["workers"] <= 64:
        problems.append("service.workers must be an integer from 1 to 64")
    if not isinstance(service.get("debug"), bool):
        problems.append("service.debug must be true or false")
    database = config.get("database") or {}
    url = database.get("url")
    if not isinstance(url, str) or not url.startswith("postgres://"):
        problems.append("database.url must be a postgres:// URL")
    if not is_int(database.get("pool_size")) or database["pool_size"] < 1:
        problems.append("database.pool_size must be a positive integer")
    timeout = database.get("timeout_s")
    if not (is_int(timeout) or isinstance(timeout, float)) or timeout <= 0:
        problems.append("database.timeout_s must be a positive number of seconds")
    hosts = config.get("allowed_hosts")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        problems.append("allowed_hosts must be a non-empty list of host names")
    features = config.get("features")
    if not isinstance(features, dict) or not all(
        isinstance(k, str) and isinstance(v, bool) for k, v in features.items()
    ):
        problems.append("features must map feature names to true or false")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_config.py FILE", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as handle:
            config = yaml.load(handle, Loader=StrictLoader)
    except (OSError, yaml.YAMLError) as exc:
        print(f"cannot load {argv[1]}: {exc}", file=sys.stderr)
        return 1
    problems = check(config)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    if problems:
        return 1
    print("config OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
