"""What every client process of a run shares: the password, the timeouts, the errors a
client may end with in a faulty cluster (not violations by themselves)."""

from __future__ import annotations

import asyncio

from api.client.metadata import MetadataError
from bookie.errors import BookieError

PASSWORD = b"sim"
#: The intruder's (intruder.py): any other password gives another master key.
WRONG_PASSWORD = b"not-sim"
#: The client's timeouts in the simulation (virtual seconds): shorter than the defaults so
#: that the plan's pauses (up to 4 s) outlast them.
TIMEOUTS = dict(add_timeout_s=1.0, read_timeout_s=1.0, speculative_read_s=0.2)
#: MetadataError: ZkUnavailable past ZK5's bound, or an uncertain write (metadata.py SM4-6).
CLIENT_ERRORS = (BookieError, OSError, asyncio.TimeoutError, LookupError, MetadataError)
