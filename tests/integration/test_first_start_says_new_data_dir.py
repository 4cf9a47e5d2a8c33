"""A fresh data dir is not a problem: its first start says "new data dir" once, at INFO, and
warns about no missing lastMark (it used to warn twice that it was replaying every journal)."""

from __future__ import annotations

import logging

from tests.support.servers import running_bookie


async def test_a_fresh_data_dir_is_announced_once_at_info(bookie_config, caplog):
    caplog.set_level(logging.INFO, logger="bookie")
    async with running_bookie(bookie_config):
        pass
    said = [r for r in caplog.records if "lastMark" in r.getMessage()]
    assert [(r.levelname, "new data dir" in r.getMessage()) for r in said] == [("INFO", True)]
    caplog.clear()
    async with running_bookie(bookie_config):  # the second start has a lastMark
        pass
    assert not [r for r in caplog.records if "lastMark" in r.getMessage()
                and r.levelno >= logging.WARNING]
