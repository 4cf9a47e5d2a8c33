// BookKeeper's own Java client for scripts/bench_bookkeeper_reads.py (issue 41): run through
// the BookKeeper launcher as `bk class scripts/java/ReadBench.java ...`, so Java's source
// launcher compiles it at run time against the launcher's classpath; nothing of BookKeeper
// is shipped or built here. The same client measures our bookie and BookKeeper's.
//
//   write ZK_URI ENTRIES ENSEMBLE WRITE_QUORUM ACK_QUORUM IN_FLIGHT V2
//       creates one CRC32 ledger (password "benchPasswd", as BookKeeper's benchmarks) and adds
//       ENTRIES 1 KiB entries, at most IN_FLIGHT outstanding, then closes it. Prints
//       "W <ledger> <entries> <ms>".
//   read ZK_URI LEDGER MODE V2 THROTTLE
//       BenchReadThroughputLatency's read loop (openLedgerNoRecovery, then up to the LAC):
//       MODE "batch" asks batchReadEntries(next, 1000, -1) (BP-62, v2 only in BookKeeper's
//       client), MODE "single" readEntries(next, next + 99,999): one request an entry, at most
//       THROTTLE a second (ClientConfiguration's throttle; BookKeeper's default of 5,000 would
//       measure the client, not the bookie). Prints "R <entries> <ms> <bytes>".
//
// Only the read loop is timed, as BenchReadThroughputLatency times it: not the JVM's start,
// not the ZooKeeper session, not the ledger's open.

import java.util.Arrays;
import java.util.Enumeration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.nio.charset.StandardCharsets;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class ReadBench {
    static final byte[] PASSWORD = "benchPasswd".getBytes(StandardCharsets.UTF_8);
    static final int ENTRY_SIZE = 1024;
    static final int BATCH = 1000;
    static final long SINGLE_SPAN = 100_000;

    static ClientConfiguration conf(String uri, boolean v2, int throttle) {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(uri);
        conf.setUseV2WireProtocol(v2);
        conf.setThrottleValue(throttle);
        conf.setAddEntryTimeout(60);
        conf.setReadEntryTimeout(60);
        conf.setZkTimeout(10_000);
        return conf;
    }

    static void write(String[] a) throws Exception {
        long entries = Long.parseLong(a[2]);
        int inFlight = Integer.parseInt(a[6]);
        try (BookKeeper bk = new BookKeeper(conf(a[1], a[7].equals("1"), 0))) {
            LedgerHandle lh = bk.createLedger(Integer.parseInt(a[3]), Integer.parseInt(a[4]),
                    Integer.parseInt(a[5]), BookKeeper.DigestType.CRC32, PASSWORD);
            byte[] data = new byte[ENTRY_SIZE];
            Arrays.fill(data, (byte) 'x');
            Semaphore window = new Semaphore(inFlight);
            AtomicReference<String> failed = new AtomicReference<>();
            long begun = System.nanoTime();
            for (long e = 0; e < entries && failed.get() == null; e++) {
                window.acquire();
                lh.asyncAddEntry(data, (rc, handle, entryId, ctx) -> {
                    if (rc != BKException.Code.OK) {
                        failed.compareAndSet(null, "add " + entryId + ": " + BKException.getMessage(rc));
                    }
                    window.release();
                }, null);
            }
            window.acquire(inFlight);
            long ms = (System.nanoTime() - begun) / 1_000_000;
            if (failed.get() != null) {
                throw new IllegalStateException(failed.get());
            }
            lh.close();
            System.out.println("W " + lh.getId() + " " + entries + " " + ms);
        }
    }

    static void read(String[] a) throws Exception {
        long ledger = Long.parseLong(a[2]);
        boolean batch = a[3].equals("batch");
        try (BookKeeper bk = new BookKeeper(conf(a[1], a[4].equals("1"), Integer.parseInt(a[5])))) {
            LedgerHandle lh = bk.openLedgerNoRecovery(ledger, BookKeeper.DigestType.CRC32, PASSWORD);
            long last = lh.getLastAddConfirmed();
            long next = 0;
            long read = 0;
            long bytes = 0;
            long begun = System.nanoTime();
            while (next <= last) {
                Enumeration<LedgerEntry> got = batch
                        ? lh.batchReadEntries(next, BATCH, -1)
                        : lh.readEntries(next, Math.min(last, next + SINGLE_SPAN - 1));
                while (got.hasMoreElements()) {
                    LedgerEntry entry = got.nextElement();
                    if (entry.getEntryId() != next) {
                        throw new IllegalStateException("entry " + entry.getEntryId() + " where "
                                + next + " was due");
                    }
                    bytes += entry.getLength();
                    entry.getEntryBuffer().release();
                    next++;
                    read++;
                }
            }
            long ms = (System.nanoTime() - begun) / 1_000_000;
            lh.close();
            System.out.println("R " + read + " " + ms + " " + bytes);
        }
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "write" -> write(args);
            case "read" -> read(args);
            default -> throw new IllegalArgumentException("write | read, not " + args[0]);
        }
        System.exit(0);
    }
}
