"""delete_ledger: deleting a ledger on one bookie, beside the writer and reader that made
and read it (issue 55: delete was only BookieClient.delete_ledger, undocumented).

Order (crash window): the bookie's copy goes first, then the metadata. A crash between the
two leaves metadata naming a ledger the bookie no longer holds, which a second call removes
(the bookie answers NoLedger, taken as done); the other order would leave entries no
metadata names, which nothing would ever reclaim by name.
"""

from __future__ import annotations

from api.client.bookie_client import BookieClient
from api.client.metadata import LedgerMetadataStore
from api.client.retry import _client_for
from bookie.errors import NoLedger


async def delete_ledger(bookie: BookieClient | str, ledger_id: int, *,
                        metadata_store: LedgerMetadataStore | None = None) -> None:
    """Delete ``ledger_id`` on ``bookie`` (a URL or a BookieClient) and, if given, its
    metadata in ``metadata_store``. Deleting a ledger that is already gone is not an error,
    so the call can be repeated after a crash. For a replicated ledger use
    ``BookKeeper.delete_ledger`` (metadata first; each bookie's GC reclaims its copy)."""
    client, owned = _client_for(bookie)
    try:
        try:
            await client.delete_ledger(ledger_id)
        except NoLedger:
            pass
        if metadata_store is not None:
            try:
                metadata = await metadata_store.read(ledger_id)
            except NoLedger:
                return
            await metadata_store.delete(ledger_id, metadata.version)
    finally:
        if owned:
            await client.close()
