"""bk_server.conf's bookie identity, as BookKeeper's ``BookieImpl.getBookieId`` forms it:
``bookieId`` when set; else ``<address>:<bookiePort>``, the address being
``advertisedAddress`` when set, else, with ``useHostNameAsBookieID=true``, this host's
canonical name (cut at its first dot with ``useShortHostName=true``). The result is the
``bookie_id`` setting (bookie/settings.py). Without any of these keys the id stays ours,
``host:port`` (an existing bookie keeps the id its cookie in ZooKeeper has).

In a Pulsar helm chart pod the canonical name is the pod's stable DNS name (the first name
of its /etc/hosts line, ``<pod>.<service>.<namespace>.svc.cluster.local``), so a pod keeps its
id, and its cookie, across restarts and rescheduling, as a BookKeeper bookie does."""

from __future__ import annotations

import ipaddress
import re
import socket

from bookie.bkconf_keys import _bool, _int

#: BookKeeper's BookieId.validateBookieId: these characters, and never "readonly".
_VALID_ID = re.compile(r"[a-zA-Z0-9:._\-]+")
_BOOKIE_PORT = 3181  # BookKeeper's default bookiePort


def canonical_hostname() -> str:
    """This host's canonical name, as Java's getCanonicalHostName gives it: the resolver's
    canonical name of the hostname (AI_CANONNAME), or the hostname itself."""
    name = socket.gethostname()
    try:
        for *_, canonical, _ in socket.getaddrinfo(name, None, flags=socket.AI_CANONNAME):
            if canonical:
                return canonical
    except OSError:
        pass
    return name


def valid_bookie_id(text: str) -> bool:
    return bool(_VALID_ID.fullmatch(text)) and text.lower() != "readonly"


def _flag(conf, key: str) -> bool:
    if key not in conf.props or not conf.props[key].value.strip():
        return False
    try:
        return _bool(conf.props[key].value)
    except ValueError as exc:
        raise conf.fail(key, str(exc)) from None


def apply(conf, hostname=canonical_hostname) -> None:
    custom = conf.props["bookieId"].value.strip() if "bookieId" in conf.props else ""
    use_hostname, short = _flag(conf, "useHostNameAsBookieID"), _flag(conf, "useShortHostName")
    advertised = conf.props["advertisedAddress"].value.strip() \
        if "advertisedAddress" in conf.props else ""
    if custom:
        if not valid_bookie_id(custom):
            raise conf.fail("bookieId", "not a bookie id: letters, digits and :._- only, "
                                        "and not 'readonly' (BookKeeper's rule)")
        conf.set("bookie_id", custom, "bookieId")
        for key in ("useHostNameAsBookieID", "useShortHostName"):
            if _flag(conf, key):
                conf.note("ignored", key, "bookieId is set and wins, as in BookKeeper")
        return
    if "bookieId" in conf.props:
        conf.note("ignored", "bookieId", "empty: BookKeeper reads it as unset")
    if not use_hostname:
        for key in ("useHostNameAsBookieID", "useShortHostName"):
            if key in conf.props:
                conf.note("ignored", key, "useHostNameAsBookieID is not true: the id is "
                                          "host:port (bookie_id unset)")
        return
    port = _int(conf.props["bookiePort"].value) if "bookiePort" in conf.props and \
        conf.props["bookiePort"].value.strip() else _BOOKIE_PORT
    if advertised:
        address, keys = advertised, ("advertisedAddress", "bookiePort")
        conf.note("checked", "useHostNameAsBookieID", "advertisedAddress is set and wins, "
                                                      "as in BookKeeper")
    else:
        address, keys = hostname(), ("useHostNameAsBookieID", "bookiePort")
        if short:
            address = address.split(".", 1)[0]
            keys = (*keys, "useShortHostName")
        elif "useShortHostName" in conf.props:
            conf.note("ignored", "useShortHostName", "false: the full canonical name")
    conf.set("bookie_id", f"{address}:{port}", *keys)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_identity(host: str, bookie_id: str | None) -> str | None:
    """allowLoopback=false's check, as BookKeeper's: the address the bookie is known by
    (``bookie_id``'s host, resolved, else the listened ``host``) must not be a loopback one.
    Returns what is loopback (for the refusal), or None."""
    if bookie_id:
        name = bookie_id.rsplit(":", 1)[0]
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(name, None)}
        except OSError:
            return None  # a name that does not resolve here: BookKeeper's own error later
        looped = sorted(a for a in addresses if _is_loopback(a))
        return f"bookie id {bookie_id} ({name} is {', '.join(looped)})" if looped else None
    if host == "localhost" or _is_loopback(host):
        return f"host {host}"
    return None


#: Listening on these means every interface: no address a client could connect to.
WILDCARDS = ("", "0.0.0.0", "::")


def default_address() -> str:
    """This host's address, as BookKeeper's DNS.getDefaultIP gives it for the default
    interface: the hostname's address, else the hostname."""
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError:
        return name


def registered_bookie_id(bookie_id: str | None, host: str, port: int) -> str:
    """The id a cluster bookie registers, and keeps its cookie, under: ``bookie_id`` when
    set; else ``host:port``, with a wildcard host (every interface) replaced by this host's
    address as BookKeeper does (api/cluster/member.py; bookie/shell/bk_settings.py BS3)."""
    if bookie_id:
        return bookie_id
    return f"{default_address() if host in WILDCARDS else host}:{port}"
