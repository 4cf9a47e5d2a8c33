"""The listener's certificate reloaded on SIGHUP and, with ``tls_refresh_interval_s``, when
its files change (BookKeeper's tlsCertFilesRefreshDurationSeconds): cert-manager and the
kubelet rotate a mounted secret in place and send no signal.

Invariants:
    TR1. One reload path: SIGHUP and the poll both load through ``reload`` (api/tls.py
         TL2), so new handshakes of the HTTPS listener, the admin API and START_TLS on
         bookie_port (api/server/bk_tls.py TS5) all get the new chain, open connections
         keep theirs, and a chain that does not load leaves the old one serving.
    TR2. A change is a change of the bytes: the poll hashes what tls_cert_file and
         tls_key_file hold (opened through their symlinks, so the kubelet's rename of
         ``..data`` is one change of both), and loads the very bytes it hashed. Times and
         inodes are not asked: a copy that keeps the mtime (cp -p, tar) still counts, a
         touch does not reload. Only the digest is kept, never the key itself (TL3).
    TR3. A state of the files is tried once: a chain that does not load (a half-written
         file, the new certificate beside the old key between two renames) is logged
         once, and the poll tries again only when the bytes change again. SIGHUP always
         tries, whatever the poll saw.
    TR4. The files are read off the loop (a stalled mount stalls the poll, not the
         bookie); the live context is changed on the loop, as SIGHUP does.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl

from api.tls import TlsSetupError, read_chain, reload_server_context

log = logging.getLogger("bookie.tls")


def _digest(chain: tuple[bytes, bytes]) -> bytes:
    cert, key = chain
    return hashlib.sha256(len(cert).to_bytes(8, "big") + cert + key).digest()


class CertificateReloader:
    """The listener's context (None: plain HTTP) and the files it was loaded from."""

    def __init__(self, context: ssl.SSLContext | None, cert_file: str | None,
                 key_file: str | None, key_password: str | None = None) -> None:
        self.context = context
        self.cert_file, self.key_file, self._password = cert_file, key_file, key_password
        self._seen: bytes | str | None = None   # TR3: the digest (or error) last tried

    def remember_current(self) -> None:
        """Take the files' state as the one loaded; called before the context is built,
        so a change in between is reloaded once more rather than missed."""
        if self.cert_file is not None:
            self._seen = self._state()[0]

    def reload(self, why: str = "SIGHUP") -> bool:
        """Load the files again (TR1); False, logged, when they do not load."""
        if self.context is None:
            log.info("%s: no TLS configured, nothing to reload", why)
            return False
        state, chain = self._state()
        return self._load(why, state, chain)

    def _state(self) -> tuple[bytes | str, tuple[bytes, bytes] | TlsSetupError]:
        try:
            chain = read_chain(self.cert_file, self.key_file)
        except TlsSetupError as exc:
            return str(exc), exc
        return _digest(chain), chain

    def _load(self, why: str, state, chain) -> bool:
        self._seen = state
        try:
            if isinstance(chain, TlsSetupError):
                raise chain
            reload_server_context(self.context, self.cert_file, self.key_file,
                                  self._password, chain)
        except (TlsSetupError, OSError) as exc:  # OSError: no memfd; the poll must go on
            log.error("%s: certificate not reloaded, the old one stays: %s", why, exc)
            return False
        log.info("%s: certificate %s reloaded; new connections use it", why, self.cert_file)
        return True

    async def watch(self, interval_s: float) -> None:
        """Every ``interval_s``, reload when the files' bytes changed (TR2, TR3); returns at
        once when the poll is off (0) or there is no TLS."""
        if self.context is None or interval_s <= 0:
            return
        if self._seen is None:
            self.remember_current()
        while True:
            await asyncio.sleep(interval_s)
            state, chain = await asyncio.to_thread(self._state)  # TR4
            if state != self._seen:
                self._load(f"{self.cert_file} changed", state, chain)
