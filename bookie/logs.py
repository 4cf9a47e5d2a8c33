"""The daemon's log lines on stderr: ``log_format`` text or JSON (one object a line), at
``log_level``. Every line a running bookie writes for people goes through here, so that
``--log-format json`` is JSON from the first line to the last."""

from __future__ import annotations

import json
import logging
import sys


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def setup_logging(config) -> None:
    """The root logger's one handler, from ``config.log_format`` and ``config.log_level``."""
    handler = logging.StreamHandler(sys.stderr)
    if config.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.log_level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
