"""notes-svc: a small read-only notes API.

GET /health answers {"status": "ok", "notes": N}; GET /notes/<id> answers the
note. Configured by an INI file (--config, default service.ini); relative
paths in it are relative to the file's directory.
"""

import argparse
import configparser
import json
import logging
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

log = logging.getLogger("notes-svc")


def make_handler(notes: dict[str, dict]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.reply(200, {"status": "ok", "notes": len(notes)})
            elif self.path.startswith("/notes/") and self.path[7:] in notes:
                self.reply(200, notes[self.path[7:]])
            else:
                self.reply(404, {"error": "not found"})

        def reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            log.info("GET %s %d", self.path, status)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", default="service.ini")
    config_path = Path(parser.parse_args().config).resolve()
    config = configparser.ConfigParser()
    if not config.read(config_path):
        sys.exit(f"notes-svc: cannot read {config_path}")
    base = config_path.parent

    logging.basicConfig(
        filename=base / config.get("log", "file"),
        format=config.get("log", "format"),
        level=logging.INFO,
    )
    notes = json.loads((base / config.get("storage", "notes")).read_text())
    pidfile = base / config.get("server", "pidfile")
    pidfile.write_text(f"{os.getpid()}\n")
    address = (config.get("server", "host"), config.getint("server", "port"))
    server = ThreadingHTTPServer(address, make_handler(notes))
    log.info("listening on %s:%d with %d notes", *address, len(notes))
    server.serve_forever()


if __name__ == "__main__":
    main()
