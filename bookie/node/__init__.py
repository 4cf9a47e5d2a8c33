"""The bookie node: storage, journal and checkpoints composed; the only asyncio bridge.

One job per module (docs/design.md §4): ``bookie.py`` the facade and lifecycle, ``writes.py``
and ``reads.py`` the ledger operations, ``lac_waiters.py`` the LAC long polls,
``journal_bridge.py`` records in and completions out, ``gc_driver.py`` garbage collection
runs, ``disk_watch.py`` disk usage and the operator flag, ``runtime.py`` per-ledger runtime.
The state machine is ``bookie/state.py``; the JSON of ``/v1/bookie/info`` is ``api/``'s.
"""

from bookie.node.bookie import Bookie
from bookie.node.reads import READ_BATCH_BYTES_MAX
from bookie.node.runtime import LedgerRuntime
from bookie.node.writes import NOT_NOW, SANITY_KEY, SANITY_LEDGER_ID, check_storable
from bookie.state import BookieState

__all__ = ["Bookie", "BookieState", "LedgerRuntime", "NOT_NOW", "READ_BATCH_BYTES_MAX",
           "SANITY_KEY", "SANITY_LEDGER_ID", "check_storable"]
