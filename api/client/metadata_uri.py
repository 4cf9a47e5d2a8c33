"""A ZooKeeper metadata service URI -> (hosts, ledgers root) (pure; docs/cluster.md §1).

The forms an operator of BookKeeper 4.18 or Pulsar writes for a ZooKeeper-backed cluster:

    zk://h1:2181[,h2:2181]/ledgers                  BookKeeper (ZKMetadataDriverBase)
    zk+hierarchical://...  zk+null://...            the same, naming the ledger layout
    metadata-store:zk:h1:2181[,h2:2181]/ledgers     Pulsar's driver (AbstractMetadataDriver)

BookKeeper takes the driver from the scheme's part before ``+`` and the ledger manager from
the part after it: ``hierarchical`` is the layout this project writes and reads
(HierarchicalLedgerManagerFactory, api/client/zookeeper.py LAYOUT); ``null`` or nothing means
"the one the cluster's LAYOUT znode names", which for a cluster of ours is the same. Its
other layouts (``flat``, ``longhierarchical``, ``ms``) put ledger znodes elsewhere, so they
are refused rather than misread. Hosts may be separated by ``;`` as well as ``,``, as both
BookKeeper and Pulsar allow (a ``,`` list is awkward in some config files).

Invariants:
    MU1. A URI is accepted only in a form BookKeeper 4.18's ZooKeeper driver or Pulsar's
         driver accepts, and read as the same hosts and ledgers root they resolve; anything
         else raises ValueError naming the forms that are accepted.
    MU2. For ``metadata-store:zk:`` the ledgers root is /ledgers: Pulsar's driver takes the
         root from java.net.URI's path, which an opaque URI (no ``//``) does not have, and
         falls back to /ledgers (the rest goes to its ZooKeeper store as it stands). So only an
         empty path or /ledgers is accepted there: with another one the root we would take
         from the path is not the one Pulsar's driver takes.
"""

from __future__ import annotations

import urllib.parse

DEFAULT_ROOT = "/ledgers"
#: BookKeeper's ledger manager names (the scheme's part after ``+``) that mean our layout.
OUR_LAYOUTS = ("hierarchical", "null")
#: Its other ledger managers: a cluster laid out by one of them is not one we can read.
OTHER_LAYOUTS = ("flat", "longhierarchical", "ms")
PULSAR_PREFIX = "metadata-store:"
FORMS = ("zk://HOST:PORT[,HOST:PORT]/ROOT (or zk+hierarchical://, zk+null://) or "
         "metadata-store:zk:HOST:PORT[,HOST:PORT]/ledgers")


def is_zookeeper(uri: str) -> bool:
    """Whether ``uri`` is meant for a ZooKeeper metadata service (a zk scheme, or Pulsar's
    metadata-store: one): such a URI goes to parse_uri, which accepts it or says why not."""
    scheme = uri.split(":", 1)[0].lower() if ":" in uri else ""
    return scheme == PULSAR_PREFIX[:-1] or scheme.split("+", 1)[0] == "zk"


def parse_uri(uri: str) -> tuple[str, str]:
    """(hosts ``h1:p1,h2:p2``, ledgers root) of a ZooKeeper metadata service URI (MU1)."""
    if uri[:len(PULSAR_PREFIX)].lower() == PULSAR_PREFIX:
        return _pulsar(uri, uri[len(PULSAR_PREFIX):])
    parsed = urllib.parse.urlsplit(uri)
    driver, _, layout = parsed.scheme.partition("+")
    if driver != "zk":
        raise ValueError(f"metadata service URI {uri!r}: not a ZooKeeper one; use {FORMS}")
    if layout in OTHER_LAYOUTS:
        raise ValueError(f"metadata service URI {uri!r}: zk+{layout} names BookKeeper's "
                         f"{layout} ledger layout; this project reads and writes the "
                         f"hierarchical one only (zk://, zk+hierarchical://, zk+null://)")
    if layout and layout not in OUR_LAYOUTS:
        raise ValueError(f"metadata service URI {uri!r}: unknown ledger layout {layout!r} "
                         f"(BookKeeper knows hierarchical, null, flat, longhierarchical, ms)")
    if not parsed.netloc or parsed.query or parsed.fragment:
        raise ValueError(f"metadata service URI {uri!r}: use {FORMS}")
    return _hosts(uri, parsed.netloc), parsed.path.rstrip("/") or DEFAULT_ROOT


def _pulsar(uri: str, store_url: str) -> tuple[str, str]:
    kind, _, rest = store_url.partition(":")
    if kind.lower() != "zk" or rest.startswith("//"):
        raise ValueError(f"metadata service URI {uri!r}: of Pulsar's metadata stores only "
                         f"ZooKeeper's is supported, as metadata-store:zk:HOST:PORT/ledgers")
    if "?" in rest or "#" in rest:
        raise ValueError(f"metadata service URI {uri!r}: metadata store parameters (?...) "
                         f"are not supported")
    hosts, slash, path = rest.partition("/")
    if slash and path.rstrip("/") not in ("", DEFAULT_ROOT[1:]):  # MU2
        raise ValueError(f"metadata service URI {uri!r}: Pulsar's driver takes "
                         f"{DEFAULT_ROOT} as the ledgers root of a metadata-store:zk: URI, "
                         f"not its path; for another root write zk://{hosts}/{path}")
    return _hosts(uri, hosts), DEFAULT_ROOT


def _hosts(uri: str, hosts: str) -> str:
    found = [host for host in hosts.replace(";", ",").split(",") if host]
    if not found or any(":" in host and not host.rpartition(":")[2].isdigit()
                        for host in found):  # a port, where one is given, is a number
        raise ValueError(f"metadata service URI {uri!r}: no host:port list; use {FORMS}")
    return ",".join(found)
