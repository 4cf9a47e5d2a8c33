"""BookKeeper's cookie commands, under its names and flags (tools/cli/commands/cookie/):
``cookie_create``, ``cookie_delete``, ``cookie_get``, ``cookie_update``, ``cookie_generate``.
Each names the bookie as its one argument (``HOST:PORT``); the ZooKeeper comes from the
settings (bookie/shell/bk_settings.py). Exit 0, or 255 as BookKeeper's (BS2).

Invariants:
    CC1. ``cookie_get`` prints the znode's text as stored, between BookKeeper's ``---``
         lines: a cookie is BookKeeper's text format (docs/cluster.md §2), so what its shell
         prints for the same znode is the same.
    CC2. ``cookie_create`` never replaces a cookie, ``cookie_update`` never creates one.
"""

from __future__ import annotations

import argparse

from api.client.metadata_format import MetadataFormatError, decode_cookie, encode_cookie
from api.cluster.zookeeper import ZkCookies, cluster_instance_id
from bookie.shell.bk_settings import add, failure, metadata_uri, settings
from bookie.shell.cookie import zookeeper
from bookie.shell.output import EXIT_OK, Output


def register(commands, common: argparse.ArgumentParser) -> None:
    for name, handler, text, more in (
            ("cookie_create", create, "Create a cookie for a given bookie",
             "Upload -cf FILE as the bookie's cookie in ZooKeeper; exit 255 if it has one."),
            ("cookie_delete", delete, "Delete a cookie for a given bookie",
             "Delete the bookie's cookie in ZooKeeper (it then starts on the dirs it has, as "
             "a new member); exit 255 if it has none."),
            ("cookie_get", get, "Retrieve a cookie for a given bookie",
             "Print the bookie's cookie in ZooKeeper between BookKeeper's --- lines; exit 255 "
             "if it has none."),
            ("cookie_update", update, "Update a cookie for a given bookie",
             "Replace the bookie's cookie in ZooKeeper with -cf FILE; exit 255 if it has "
             "none."),
            ("cookie_generate", generate, "Generate a cookie for a given bookie",
             "Write a cookie for the bookie and dirs given to -o FILE, with the cluster's "
             "instance id from ZooKeeper unless -i gives one.")):
        parser = add(commands, name, handler, f"{text} (BookKeeper's name)", f"{text}. {more}")
        parser.add_argument("bookie_id", metavar="<bookie-id>", help="HOST:PORT")
        if name in ("cookie_create", "cookie_update"):
            parser.add_argument("-cf", "--cookie-file", dest="cookie_file", required=True,
                                help="the file to be uploaded as cookie")
        if name == "cookie_generate":
            parser.add_argument("-j", "--journal-dirs", dest="journal_dirs", required=True,
                                help="the bookie's journal dirs, comma-separated")
            parser.add_argument("-l", "--ledger-dirs", dest="ledger_dirs", required=True,
                                help="the bookie's ledger dirs, comma-separated")
            parser.add_argument("-ix", "--index-dirs", dest="index_dirs",
                                help="BookKeeper's separate index dirs, comma-separated")
            parser.add_argument("-i", "--instance-id", dest="instance_id",
                                help="the cluster's instance id (default: ZooKeeper's)")
            parser.add_argument("-o", "--output-file", dest="output_file", required=True,
                                help="where to write the cookie")


def _bookie_id(args: argparse.Namespace) -> str:
    host, _, port = args.bookie_id.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"Invalid bookie id '{args.bookie_id}'. Bookie id should be in the "
                         f"format of '<hostname>:<port>'")
    return args.bookie_id


def _cookie_file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ValueError(f"Cookie file '{path}' doesn't exist.") from None
    try:
        decode_cookie(data)
    except MetadataFormatError as exc:  # a bookie would refuse it at its next start
        raise ValueError(f"{path} is not a bookie cookie: {exc}") from None
    return data


def create(args: argparse.Namespace, out: Output) -> int:
    me, data = _bookie_id(args), _cookie_file(args.cookie_file)
    with zookeeper(metadata_uri(settings(args, zookeeper_only=True))) as (client, root):
        cookies = ZkCookies(client, root)
        if cookies.read(me) is not None:  # CC2
            return failure(f"Cookie already exist for bookie '{me}'")
        cookies.create(me, data)
    out.emit({"type": "cookieCreated", "bookieId": me}, f"Created the cookie of bookie '{me}'")
    return EXIT_OK


def delete(args: argparse.Namespace, out: Output) -> int:
    me = _bookie_id(args)
    with zookeeper(metadata_uri(settings(args, zookeeper_only=True))) as (client, root):
        if not ZkCookies(client, root).delete(me):
            return failure(f"Cookie not found for bookie '{me}'")
    out.emit({"type": "cookieDeleted", "bookieId": me},
             f"Removed cookie from {root}/cookies for bookie {me}.")
    return EXIT_OK


def get(args: argparse.Namespace, out: Output) -> int:
    me = _bookie_id(args)
    with zookeeper(metadata_uri(settings(args, zookeeper_only=True))) as (client, root):
        found = ZkCookies(client, root).read(me)
    if found is None:
        return failure(f"Cookie not found for bookie '{me}'")
    text = found[0].decode("utf-8", "replace")
    out.emit({"type": "cookie", "bookieId": me, "cookie": text, "version": found[1]},
             f"Cookie for bookie '{me}' is:\n---\n{text}\n---")  # CC1
    return EXIT_OK


def update(args: argparse.Namespace, out: Output) -> int:
    me, data = _bookie_id(args), _cookie_file(args.cookie_file)
    with zookeeper(metadata_uri(settings(args, zookeeper_only=True))) as (client, root):
        cookies = ZkCookies(client, root)
        found = cookies.read(me)
        if found is None:  # CC2
            return failure(f"Cookie not found for bookie '{me}' to update")
        cookies.replace(me, data, found[1])
    out.emit({"type": "cookieUpdated", "bookieId": me}, f"Updated the cookie of bookie '{me}'")
    return EXIT_OK


def generate(args: argparse.Namespace, out: Output) -> int:
    me = _bookie_id(args)
    instance = args.instance_id
    if instance is None:
        with zookeeper(metadata_uri(settings(args, zookeeper_only=True))) as (client, root):
            instance = cluster_instance_id(client, root)
    index = args.index_dirs.split(",") if args.index_dirs else None
    data = encode_cookie(me, args.journal_dirs, args.ledger_dirs.split(","), instance, index)
    with open(args.output_file, "wb") as handle:
        handle.write(data)
    out.emit({"type": "cookieGenerated", "bookieId": me, "file": args.output_file},
             f"Successfully saved the generated cookie to {args.output_file}")
    return EXIT_OK
