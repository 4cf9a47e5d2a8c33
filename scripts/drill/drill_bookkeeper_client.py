"""Our Python client on Apache BookKeeper's bookies, both ways (issue 55 items 3 and 4): a
real run, not in CI (it needs BookKeeper's launcher), as the other BookKeeper drills.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/drill/drill_bookkeeper_client.py \
        --rounds 4 --seed 1 [--cluster all-bk|mixed|both]

The cluster: ZooKeeper and 4 DbLedgerStorage bookies of BookKeeper's ("all-bk"), or 2 of
theirs beside 2 of ours ("mixed"). Our client speaks BookKeeper's protocol to every bookie
(``BookKeeper.connect(uri, protocol="bk")``). Each round, seeded:

  1. **Ours writes, BookKeeper reads.** Our writer, a child process, writes 3/2/2 ledgers
     (custom metadata application=drill; digest CRC32C, CRC32, MAC and DUMMY, one ledger
     after another) of 1 KiB entries with ``--in-flight`` adds
     outstanding in all, recording each acknowledged add. A fault (none, kill -9 of one
     bookie, of two in turn, of all at once; each restarted on its data), then the writer is
     SIGKILLed with its adds in flight. Our recovery (``open_ledger``: fence, read past the
     LAC, write back, close) closes each ledger; then BookKeeper's Java client
     (scripts/interop/java/RecoveryDrill.java ``recover``) opens each and reads every entry back,
     checking each payload byte for byte, and ``held`` asks every bookie of each write set
     for its copy.
  2. **BookKeeper writes, ours reads.** BookKeeper's Java client writes the same way
     (RecoveryDrill.java ``write``); while it writes, our client tails one ledger (LAC long
     poll) and checks what it reads; the writer is SIGKILLed with adds in flight; our
     recovery closes every ledger and our client reads each back, byte for byte.
  3. **The same metadata.** A ledger of each writer: digest type, E/Qw/Qa, password,
     custom metadata and the protobuf fields set are the same; the closed ledgers' last
     entry and length agree with what was read back.

Checks, each ledger: recovery closed it at or above its last acknowledged entry; every entry
up to the close reads back byte for byte, through the other side's client. Prints one line a
round and a summary line; exit 0 only if every check held. Every process it starts is
stopped by PID; everything lives under --dir.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.drill.drill_bookkeeper_recovery import JAVA, Drill, read_acks, wait_for_acks  # noqa: E402
from scripts.interop.interop_run import Failed, say  # noqa: E402

PASSWORD = b"drill"  # RecoveryDrill.java's
ENTRY_SIZE = 1024
CUSTOM = {"application": "drill"}
_RING = bytes(range(256)) * 6


def payload(ledger: int, entry: int) -> bytes:
    """RecoveryDrill.java's payload(ledger, entry): two longs, then (ledger*131 + entry*31
    + i) as a byte for i in 16..1023."""
    start = (ledger * 131 + entry * 31 + 16) & 0xFF
    return ledger.to_bytes(8, "big", signed=True) + entry.to_bytes(8, "big", signed=True) \
        + _RING[start:start + ENTRY_SIZE - 16]


# -- our writer, a child process SIGKILLed with adds in flight ----------------------------

#: Our writer's digest types, ledger by ledger in turn: every one BookKeeper has. Its Java
#: client (RecoveryDrill.java) opens each with the metadata's own (BookKeeper's
#: enableDigestTypeAutodetection, on by default), so it checks every kind.
DIGESTS = ("crc32c", "crc32", "mac", "dummy")


async def _write_until_killed(uri: str, ledgers: int, in_flight: int, ack_path: str) -> None:
    from api.client import BookKeeper  # noqa: PLC0415

    bk = await BookKeeper.connect(uri, protocol="bk")
    acks = open(ack_path, "a")
    writers = []
    for number in range(ledgers):
        writer = await bk.create_ledger(3, 2, 2, DIGESTS[number % len(DIGESTS)], PASSWORD,
                                        custom_metadata=CUSTOM)
        acks.write(f"C {writer.ledger_id}\n")
        acks.flush()
        writers.append(writer)

    async def flush_often() -> None:  # an ack not yet in the file counts as not seen
        while True:
            await asyncio.sleep(0.002)  # noqa: sleep-ok (the ack file's flush period)
            acks.flush()

    async def one_ledger(writer) -> None:
        window = asyncio.Semaphore(max(1, in_flight // ledgers))

        def done(future, entry: int) -> None:
            window.release()
            if future.exception() is None:
                acks.write(f"A {writer.ledger_id} {future.result()}\n")
            else:
                acks.write(f"E {writer.ledger_id} {entry} {future.exception()!r}\n")

        for entry in range(2**62):
            await window.acquire()
            future = await writer.append_async(payload(writer.ledger_id, entry))
            future.add_done_callback(lambda f, e=entry: done(f, e))

    flusher = asyncio.ensure_future(flush_often())
    await asyncio.gather(*(one_ledger(w) for w in writers))
    flusher.cancel()


# -- our side's checks --------------------------------------------------------------------

async def _recover_and_read(uri: str, ledgers: list[int]) -> dict[int, tuple[int, str]]:
    """Each ledger recovered by our client and read whole: (last entry, problem or "")."""
    from api.client import BookKeeper  # noqa: PLC0415

    found = {}
    async with await BookKeeper.connect(uri, protocol="bk") as bk:
        for ledger in ledgers:
            try:
                reader = await asyncio.wait_for(bk.open_ledger(ledger, PASSWORD), 120)
                last, problem = reader.lac, ""
                expected = 0
                if last >= 0:
                    async for entry in reader.read_range(0, last):
                        if entry.entry_id != expected or \
                                entry.payload != payload(ledger, entry.entry_id):
                            problem = f"entry {entry.entry_id} differs"
                            break
                        expected += 1
                    else:
                        if expected != last + 1:
                            problem = f"read {expected} entries of {last + 1}"
                found[ledger] = (last, problem)
            except Exception as error:  # noqa: BLE001 - reported per ledger, never fatal
                found[ledger] = (-2, f"{type(error).__name__}: {error}")
    return found


async def _tail(uri: str, ledger: int, count: int) -> str:
    """Our client tails a ledger BookKeeper's writer is writing: the first ``count`` entries,
    in order, byte for byte; "" or what went wrong."""
    from api.client import BookKeeper  # noqa: PLC0415

    async with await BookKeeper.connect(uri, protocol="bk") as bk:
        reader = await bk.open_ledger(ledger, PASSWORD, recover=False)
        expected = 0
        async for entry in reader.tail(0):
            if entry.entry_id != expected or entry.payload != payload(ledger, expected):
                return f"tail: entry {entry.entry_id} (expected {expected}) differs"
            expected += 1
            if expected == count:
                return ""
    return f"tail ended at {expected}"


def _fields(data: bytes) -> set[int]:
    """The protobuf field numbers set in a ledger's stored metadata (after its header)."""
    from api.client.metadata_format import HEADER  # noqa: PLC0415
    from google.protobuf.internal import decoder  # noqa: PLC0415

    length, at = decoder._DecodeVarint32(data, len(HEADER))
    end, numbers = at + length, set()
    while at < end:
        key, at = decoder._DecodeVarint32(data, at)
        numbers.add(key >> 3)
        wire = key & 7
        if wire == 0:
            _, at = decoder._DecodeVarint32(data, at)
        elif wire == 2:
            size, at = decoder._DecodeVarint32(data, at)
            at += size
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
    return numbers


async def _metadata(uri: str, ledger: int) -> tuple[object, set[int]]:
    from api.client.metadata_paths import ledger_path  # noqa: PLC0415
    from api.client.zookeeper import ZkMetadataStore  # noqa: PLC0415

    store = ZkMetadataStore(uri).start()
    try:
        metadata = await store.read(ledger)
        raw, _ = await asyncio.to_thread(store.client.get, ledger_path(store.root, ledger))
        return metadata, _fields(raw)
    finally:
        await store.close()


def same_metadata(uri: str, ours: int, theirs: int) -> str:
    """"" when a ledger our client wrote and one BookKeeper's wrote carry the same metadata
    but for what differs by nature (ids, bookies, times, where each ended)."""
    (a, fields_a), (b, fields_b) = (asyncio.run(_metadata(uri, ours)),
                                    asyncio.run(_metadata(uri, theirs)))
    shape = lambda m: (m.digest_type, m.ensemble_size, m.write_quorum, m.ack_quorum,  # noqa
                       m.state, m.password, m.custom, len(m.ensembles[0][1]))
    if shape(a) != shape(b):
        return f"metadata differs: ours {shape(a)} BookKeeper's {shape(b)}"
    if fields_a != fields_b:
        return (f"protobuf fields: ours sets {sorted(fields_a - fields_b)} that BookKeeper's "
                f"does not, BookKeeper's {sorted(fields_b - fields_a)}")
    return ""


# -- a round ------------------------------------------------------------------------------

def java_recover(drill: Drill, uri: str, ledgers: list[int]) -> dict[int, list[str]]:
    out = subprocess.run([drill.launcher, "class", JAVA, "recover", uri, "60",
                          *map(str, ledgers)], cwd=drill.dir, capture_output=True, text=True,
                         timeout=60 * len(ledgers) + 300)
    return {int(line.split()[1]): line.split()[2:] for line in out.stdout.splitlines()
            if line.startswith("R ")}


def java_held(drill: Drill, uri: str, ledgers: list[int]) -> list[str]:
    out = subprocess.run([drill.launcher, "class", JAVA, "held", uri, *map(str, ledgers)],
                         cwd=drill.dir, capture_output=True, text=True, timeout=600)
    bad = [line for line in out.stdout.splitlines()
           if line.startswith("H ") and line.split()[3:5] != ["0", "0"]]
    return bad + ([] if "H " in out.stdout else [f"held: no answer {out.stderr[-300:]!r}"])


def wait_serving(bookies: list[dict], timeout_s: float = 90) -> None:
    """Each bookie answers GET_BOOKIE_INFO on its BookKeeper port. After a kill -9 its old
    registration stays in ZooKeeper until the session expires, so being registered says
    nothing about a restarted bookie (round 0 of seed 7 found our recovery, run the moment
    registrations were back, refused by bookies still starting)."""
    from api.client import BkBookieClient  # noqa: PLC0415

    async def served(port: int) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            client = BkBookieClient(f"127.0.0.1:{port}", connect_timeout_s=2,
                                    request_timeout_s=2)
            try:
                await client.info()
                return
            except (OSError, asyncio.TimeoutError):
                if time.monotonic() > deadline:
                    raise Failed(f"bookie on port {port} not serving after {timeout_s} s")
                await asyncio.sleep(0.2)  # noqa: sleep-ok (bounded poll of a restart)
            finally:
                await client.close()

    async def every() -> None:
        await asyncio.gather(*(served(b.get("rpc") or int(b["id"].rsplit(":", 1)[1]))
                               for b in bookies))
    asyncio.run(every())


def fault(drill: Drill, bookies: list[dict], rng: random.Random, uri: str, ids) -> str:
    """kill -9 of no bookie, of one, of two in turn (each back on its data before the next
    goes), or of all at once; any kind of bookie on a mixed cluster."""
    kind = rng.choice(("none", "kill1", "kill2", "killall"))
    if kind == "killall":
        for bookie in bookies:
            drill.kill9(bookie)
        for bookie in bookies:
            drill.restart(bookie)
        drill.wait_registered(uri, ids)
        wait_serving(bookies)
        return kind
    victims = {"none": [], "kill1": [rng.choice(bookies)],
               "kill2": rng.sample(bookies, 2)}[kind]
    for victim in victims:
        drill.kill9(victim)
        time.sleep(rng.uniform(0.2, 1.0))  # noqa: sleep-ok (the fault's seeded length)
        drill.restart(victim)
        drill.wait_registered(uri, ids)
        wait_serving([victim])
    return kind


def one_round(drill: Drill, args, uri: str, bookies: list[dict], ids, rng: random.Random,
              number: int) -> tuple[str, int, list[str], int | None, int | None]:
    problems: list[str] = []
    # 1. ours writes (killed), ours recovers, BookKeeper reads every entry and every copy.
    acks = os.path.join(drill.dir, f"ours-acks-{number}.txt")
    with open(os.path.join(drill.dir, f"ours-writer-{number}.log"), "wb") as log:
        writer = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--as-writer",
                                   uri, str(args.ledgers), str(args.in_flight), acks],
                                  cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_acks(acks, args.ledgers, rng.randrange(500, 2_000), 120)
        kind = fault(drill, bookies, rng, uri, ids)
        time.sleep(rng.uniform(0.0, 1.0))  # noqa: sleep-ok (seeded: adds pile up again)
    finally:
        writer.send_signal(signal.SIGKILL)  # adds in flight, by design
        writer.wait()
    created, acked, errors = read_acks(acks)
    if kind == "none":  # with bookies killed, a writer may fail (NotEnoughBookies while
        # all are down); what must hold is every acknowledged add, checked below
        problems += [f"our writer: {e}" for e in errors[:3]]
    ours = asyncio.run(_recover_and_read(uri, created))
    theirs_read = java_recover(drill, uri, created)
    for ledger in created:
        last, problem = ours[ledger]
        if problem:
            problems.append(f"ours {ledger}: our recovery: {problem}")
        elif last < acked.get(ledger, -1):
            problems.append(f"ours {ledger}: closed at {last} below acked {acked[ledger]}")
        got = theirs_read.get(ledger)
        if got is None or got[0] != "ok" or int(got[1]) != last:
            problems.append(f"ours {ledger}: BookKeeper's read {got} (ours closed at {last})")
    problems += java_held(drill, uri, created)
    total = sum(acked.get(ledger, -1) + 1 for ledger in created)

    # 2. BookKeeper writes (killed) while ours tails; ours recovers and reads every entry.
    back = os.path.join(drill.dir, f"bk-acks-{number}.txt")
    with open(os.path.join(drill.dir, f"bk-writer-{number}.log"), "wb") as log:
        java_writer = drill.java("write", uri, str(args.ledgers),
                                 str(max(1, args.in_flight // args.ledgers)), back,
                                 stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_acks(back, args.ledgers, 200, 120)
        tailed = asyncio.run(asyncio.wait_for(_tail(uri, read_acks(back)[0][0], 2_000), 120))
        if tailed:
            problems.append(f"BookKeeper's: {tailed}")
    finally:
        java_writer.send_signal(signal.SIGKILL)
        java_writer.wait()
    written, back_acked, errors = read_acks(back)
    recovered = asyncio.run(_recover_and_read(uri, written))
    for ledger in written:
        last, problem = recovered[ledger]
        if problem:
            problems.append(f"BookKeeper's {ledger}: our recovery: {problem}")
        elif last < back_acked.get(ledger, -1):
            problems.append(f"BookKeeper's {ledger}: ours closed it at {last}, below acked "
                            f"{back_acked[ledger]}")
    total += sum(back_acked.get(ledger, -1) + 1 for ledger in written)
    return kind, total, problems, created[0] if created else None, \
        written[0] if written else None


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-writer":
        uri, ledgers, in_flight, acks = sys.argv[2:6]
        asyncio.run(_write_until_killed(uri, int(ledgers), int(in_flight), acks))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cluster", choices=("all-bk", "mixed", "both"), default="both")
    parser.add_argument("--ledgers", type=int, default=4, help="ledgers a writer a round")
    parser.add_argument("--in-flight", type=int, default=1_000,
                        help="adds outstanding, all ledgers of a writer together")
    parser.add_argument("--dir", default=None, help="work dir (default: a new temp dir)")
    args = parser.parse_args()
    launcher = os.environ.get("BOOKKEEPER_LAUNCHER")
    if not launcher:
        parser.error("set BOOKKEEPER_LAUNCHER to BookKeeper's bk launcher")
    failed = 0
    for cluster in (("all-bk", "mixed") if args.cluster == "both" else (args.cluster,)):
        failed += run_cluster(launcher, cluster, args)
    return 1 if failed else 0


def run_cluster(launcher: str, cluster: str, args) -> int:
    workdir = args.dir or tempfile.mkdtemp(prefix=f"bkclient-{cluster}-")
    drill = Drill(launcher, os.path.join(workdir, cluster), 0)
    os.makedirs(drill.dir, exist_ok=True)
    rng = random.Random(f"{args.seed}-{cluster}")
    rounds = acked = lost = 0
    metadata_problem = "not compared"
    try:
        uri = drill.start_zookeeper("zk")
        drill.bk("shell", "-conf", drill.shell_conf(uri), "initnewcluster")  # a fresh tree
        kinds = 4 if cluster == "all-bk" else 2
        theirs = [drill.start_theirs(f"bk{i}", uri, storage="db") for i in range(kinds)]
        ours = [drill.start_ours(f"ours{i}", uri) for i in range(4 - kinds)]
        ids = [b["id"] for b in theirs + ours]
        drill.wait_registered(uri, ids)
        for number in range(args.rounds):
            kind, count, problems, mine, theirs_ledger = one_round(
                drill, args, uri, theirs + ours, ids, rng, number)
            rounds += 1
            acked += count
            lost += len(problems)
            if number == 0 and mine is not None and theirs_ledger is not None:
                metadata_problem = same_metadata(uri, mine, theirs_ledger) or "same"
            say(f"{cluster} round {number}: fault={kind} acked={count} "
                f"{'OK' if not problems else 'FAILED: ' + '; '.join(problems[:4])}")
    except Failed as error:
        lost += 1
        say(f"{cluster}: FAILED {error}")
    finally:
        drill.stop_all()
    ok = lost == 0 and metadata_problem == "same"
    say(f"{cluster}: rounds={rounds} acked={acked} problems={lost} seed={args.seed} "
        f"metadata={metadata_problem} -> {'OK' if ok else 'FAILED'}")
    if ok and args.dir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
