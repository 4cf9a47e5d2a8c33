// BookKeeper's own Java client for scripts/interop/make_bk_dir_fixtures.py (issue 58 item 2):
// writes the ledgers of tests/data/bk_dirs/ to a DbLedgerStorage bookie of BookKeeper. Run
// through the launcher as `bk class scripts/interop/java/FixtureWriter.java ...` (Java's
// source launcher compiles it against the launcher's classpath).
//
//   checkpointed ZK_URI
//       before the bookie is stopped cleanly (its write cache flushed to entry logs and
//       indexes): "closed" (40 entries, closed), "fenced" (30 entries, then opened with
//       recovery by a second client: fenced and closed), "lac" (20 entries with explicit
//       LAC every second, left open), "deleted" (10 entries, closed, deleteLedger).
//   journal ZK_URI
//       before the bookie is killed -9, so these live only in its journal: "journal" (25
//       entries with explicit LAC, left open), "journal-fenced" (15 entries, then fenced by
//       recovery).
// Every ledger is 1/1/1 CRC32C with password "fixture"; prints "L <role> <ledger> <last
// entry written>" a ledger, and "LAC <ledger> <explicit LAC sent>" once the explicit LAC has
// had time to reach the bookie (3 intervals). Payloads: RecoveryDrill's function of (ledger,
// entry), 1 KiB (tests/support/bk_dir_fixtures.py computes the same).

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class FixtureWriter {
    static final byte[] PASSWORD = "fixture".getBytes(StandardCharsets.UTF_8);
    static final int ENTRY_SIZE = 1024;

    static byte[] payload(long ledger, long entry) {
        ByteBuffer buffer = ByteBuffer.allocate(ENTRY_SIZE);
        buffer.putLong(ledger).putLong(entry);
        for (int i = 16; i < ENTRY_SIZE; i++) {
            buffer.put((byte) (ledger * 131 + entry * 31 + i));
        }
        return buffer.array();
    }

    static BookKeeper client(String uri, int explicitLacMs) throws Exception {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(uri);
        conf.setZkTimeout(10_000);
        conf.setExplictLacInterval(explicitLacMs); // sic: BookKeeper's spelling; milliseconds
        return new BookKeeper(conf);
    }

    static LedgerHandle write(BookKeeper bk, String role, int entries) throws Exception {
        LedgerHandle ledger = bk.createLedger(1, 1, 1, BookKeeper.DigestType.CRC32C, PASSWORD);
        for (int e = 0; e < entries; e++) {
            ledger.addEntry(payload(ledger.getId(), e));
        }
        System.out.println("L " + role + " " + ledger.getId() + " " + (entries - 1));
        return ledger;
    }

    static void fence(String uri, long id) throws Exception {
        try (BookKeeper other = client(uri, 0)) {
            other.openLedger(id, BookKeeper.DigestType.CRC32C, PASSWORD).close();
        }
    }

    public static void main(String[] args) throws Exception {
        String uri = args[1];
        try (BookKeeper bk = client(uri, 0); BookKeeper lacs = client(uri, 1000)) {
            if (args[0].equals("checkpointed")) {
                write(bk, "closed", 40).close();
                LedgerHandle fenced = write(bk, "fenced", 30);
                fence(uri, fenced.getId());
                LedgerHandle lac = write(lacs, "lac", 20);
                LedgerHandle deleted = write(bk, "deleted", 10);
                deleted.close();
                bk.deleteLedger(deleted.getId());
                Thread.sleep(3_000); // three explicit-LAC intervals: the bookie has it
                System.out.println("LAC " + lac.getId() + " " + lac.getLastAddConfirmed());
            } else {
                LedgerHandle journal = write(lacs, "journal", 25);
                LedgerHandle fenced = write(bk, "journal-fenced", 15);
                fence(uri, fenced.getId());
                Thread.sleep(3_000);
                System.out.println("LAC " + journal.getId() + " " + journal.getLastAddConfirmed());
            }
            System.out.flush();
            if (args[0].equals("journal")) {
                // The bookie is killed -9 while this client still holds the ledger open.
                Thread.sleep(600_000);
            }
        }
    }
}
