"""``updatecookie``: BookKeeper's command on this bookie's own cookie, in its data dirs
(``current/VERSION``) and in ZooKeeper (BookieShell's UpdateCookieCmd, AdminCommand), with
its flags: exactly one of ``-bookieId hostname|ip``, ``-list``, ``-delete [force]``,
``-expandstorage``. Settings and exit codes: bookie/shell/bk_settings.py (BS1-BS3).

Invariants:
    UC1. ``-bookieId`` moves the cookie from the id its data dirs' cookie names to the id the
         settings give now (a changed ``host``/advertisedAddress): the new cookie is written
         (dirs, then ZooKeeper) before the old one is deleted, so a failure half-way leaves
         a cookie a bookie can start with. ``hostname`` wants the new host to be a name,
         ``ip`` an address, as BookKeeper checks useHostNameAsBookieID against the flag.
    UC2. ``-delete`` without ``force`` asks before each deletion, as BookKeeper does.
    UC3. ``-expandstorage`` is refused (255): the bookie refuses a changed number of dirs
         at start (bookie/identity.py ID1), so a cookie with more dirs would not start it.
"""

from __future__ import annotations

import argparse
import ipaddress
import os

from api.client.metadata_format import MetadataFormatError, decode_cookie, encode_cookie
from api.cluster.zookeeper import ZkCookies
from bookie.disk import OsDisk, atomic_replace
from bookie.shell.bk_settings import add, bookie_id, confirm, failure, metadata_uri, settings
from bookie.shell.cookie import zookeeper
from bookie.shell.output import EXIT_OK, Output

COOKIE_FILE = "VERSION"  # api/cluster/member.py's name (BookKeeper's) in each current/


def register(commands, common: argparse.ArgumentParser) -> None:
    parser = add(commands, "updatecookie", update_cookie,
                 "change, list or delete this bookie's cookie (BookKeeper's name)",
                 "Exactly one of: -bookieId hostname|ip (move the cookie to the bookie id "
                 "the settings give now), -list (the cookie files and ZooKeeper's), -delete "
                 "[force] (delete them; asks unless force), -expandstorage (refused).")
    one = parser.add_mutually_exclusive_group(required=True)
    one.add_argument("-b", "-bookieId", "--bookieId", dest="bookie_id_kind",
                     choices=("hostname", "ip"), help="the kind of id the settings give")
    one.add_argument("-e", "-expandstorage", "--expandstorage", dest="expand",
                     action="store_true", help="refused here (UC3)")
    one.add_argument("-l", "-list", "--list", dest="list", action="store_true",
                     help="list the cookie files and ZooKeeper's cookie")
    one.add_argument("-d", "-delete", "--delete", dest="delete", nargs="?", const="",
                     choices=("", "force"), help="delete them ('force': without asking)")
    parser.add_argument("-f", "-force", "--force", dest="force", action="store_true",
                        help="with -delete: without asking (as '-delete force')")


def _cookie_files(config) -> list[str]:
    return [os.path.join(d, COOKIE_FILE)
            for d in config.journal_dirs_current + config.ledger_dirs_current
            if os.path.exists(os.path.join(d, COOKIE_FILE))]


def update_cookie(args: argparse.Namespace, out: Output) -> int:
    config = settings(args)
    if args.expand:  # UC3
        return failure("-expandstorage: this bookie refuses a changed number of journal or "
                       "ledger dirs at start, so there is no storage to expand into")
    if args.bookie_id_kind:
        return _move(config, args.bookie_id_kind, out)
    me, files = bookie_id(config), _cookie_files(config)
    delete = args.delete is not None
    force = args.force or args.delete == "force"
    if not files:
        out.text(f"No local cookies for Bookie: {me}")
    elif not delete:
        out.text(f"Listing local Cookie Files of Bookie: {me}")
        for path in files:
            out.emit({"type": "cookieFile", "path": os.path.realpath(path)},
                     os.path.realpath(path))
    elif force or confirm("Are you sure you want to delete Cookies locally?"):  # UC2
        for path in files:
            os.unlink(path)
        out.text(f"Deleted Local Cookies of Bookie: {me}")
    else:
        out.text(f"Skipping deleting local Cookies of Bookie: {me}")
    with zookeeper(metadata_uri(config)) as (client, root):
        cookies = ZkCookies(client, root)
        if cookies.read(me) is None:
            out.text(f"No cookie for {me} in metadata store")
        elif not delete:
            out.emit({"type": "cookie", "path": f"{root}/cookies/{me}"},
                     f"Cookie of Bookie {me} in metadata store: {root}/cookies/{me}")
        elif force or confirm("Are you sure you want to delete Cookies from metadata store?"):
            cookies.delete(me)
            out.text(f"Deleted Cookie from metadata store for Bookie: {me}")
        else:
            out.text(f"Skipping deleting cookie from metadata store for Bookie: {me}")
    return EXIT_OK


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _move(config, kind: str, out: Output) -> int:
    """UC1."""
    new = bookie_id(config)
    if _is_address(new.rpartition(":")[0]) != (kind == "ip"):
        wanted = "false" if kind == "ip" else "true"
        return failure(f"Expects configuration useHostNameAsBookieID={wanted} as the option "
                       f"value: the settings give bookie id {new}")
    files = _cookie_files(config)
    if not files:
        return failure("no cookie in the data dirs: the bookie never started on them")
    with open(files[0], "rb") as handle:
        try:
            local = decode_cookie(handle.read())
        except MetadataFormatError as exc:
            return failure(f"{files[0]} is not a bookie cookie: {exc}")
    old = local["bookieHost"]
    if old == new:
        return failure(f"Either cookie already updated with UseHostNameAsBookieID="
                       f"{'true' if kind == 'hostname' else 'false'} or no cookie exists! "
                       f"(the data dirs' cookie names {new} already)")
    with zookeeper(metadata_uri(config)) as (client, root):
        cookies = ZkCookies(client, root)
        found = cookies.read(old)
        if found is None:
            return failure(f"no cookie of bookie {old} in ZooKeeper to move to {new}")
        theirs = decode_cookie(found[0])
        data = encode_cookie(new, theirs["journalDir"], theirs["ledgerDirs"],
                             theirs["instanceId"], theirs.get("indexDirs"))
        disk = OsDisk()
        for path in files:
            atomic_replace(disk, path, data)
        out.text(f"Updated cookie file present in {', '.join(files)}")
        if cookies.read(new) is None:
            cookies.create(new, data)
        cookies.delete(old)
    out.emit({"type": "cookieMoved", "from": old, "to": new},
             f"moved the cookie of bookie {old} to {new}")
    return EXIT_OK
