// BookKeeper's own Java client for scripts/bench/bench_bookkeeper_reads.py (issue 41): run through
// the BookKeeper launcher as `bk class scripts/interop/java/ReadBench.java ...`, so Java's source
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
//   latency ZK_URI COUNT V2
//       one add at a time (BenchBookie's latency phase, through the ledger API): 1,000 adds
//       to warm up, then COUNT adds, each waited for. Prints "L <p50> <p99> <p99.9> <mean>"
//       in microseconds.
//   tail ZK_URI RATE SECONDS
//       a writer adds RATE entries a second for SECONDS; a tailing reader of its own client
//       (another connection, as a consumer is another process) follows it with
//       readLastAddConfirmedAndEntry: long-poll LAC with the entry piggybacked (v3, where
//       BookKeeper's long poll lives), then readEntries up to the LAC it learnt. Each entry's
//       delay runs from its add's call to its read's return. Prints
//       "T <entries> <p50> <p99> <p99.9> <p50> <p99> <p99.9>" in microseconds: every entry,
//       then the entries after the first second (the clients' warm-up).
//   pace ZK_URI RATE SECONDS [LEDGER]
//       a writer at RATE adds a second (v2) for SECONDS, each add's latency counted from the
//       moment it was due (no coordinated omission); with LEDGER, a catch-up reader of that
//       ledger (batch reads over v2) runs meanwhile, from its start, and the writer stops
//       when the reader is done (SECONDS is then a bound). Prints
//       "P <adds> <p50> <p99> <p99.9> <reads> <read ms>" (microseconds; reads 0 without LEDGER).
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
            long cpuBegun = processCpuNanos();
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
            long cpuMs = (processCpuNanos() - cpuBegun) / 1_000_000;
            lh.close();
            System.out.println("R " + read + " " + ms + " " + bytes + " " + cpuMs);
        }
    }

    /** This JVM's CPU time, every thread's (GC and JIT too): pinned to one core, its
     * share of the read loop's time says whether the client is the limit. */
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean)
                java.lang.management.ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    static long[] percentiles(long[] values, int count) {
        long[] sorted = Arrays.copyOf(values, count);
        Arrays.sort(sorted);
        double[] at = {0.5, 0.99, 0.999};
        long[] out = new long[at.length];
        for (int i = 0; i < at.length; i++) {
            out[i] = count == 0 ? 0 : sorted[(int) Math.min(count - 1, Math.floor(at[i] * count))];
        }
        return out;
    }

    static void latency(String[] a) throws Exception {
        int count = Integer.parseInt(a[2]);
        try (BookKeeper bk = new BookKeeper(conf(a[1], a[3].equals("1"), 0))) {
            LedgerHandle lh = bk.createLedger(1, 1, 1, BookKeeper.DigestType.CRC32, PASSWORD);
            byte[] data = new byte[ENTRY_SIZE];
            for (int i = 0; i < 1000; i++) {
                lh.addEntry(data);
            }
            long[] took = new long[count];
            long sum = 0;
            for (int i = 0; i < count; i++) {
                long begun = System.nanoTime();
                lh.addEntry(data);
                took[i] = (System.nanoTime() - begun) / 1000;
                sum += took[i];
            }
            lh.close();
            long[] p = percentiles(took, count);
            System.out.println("L " + p[0] + " " + p[1] + " " + p[2] + " " + (sum / count));
        }
    }

    /** Adds at ``rate`` a second for ``seconds``; each add's latency from when it was due. */
    static long[] paced(LedgerHandle lh, int rate, int seconds, long[] calledAt,
                        java.util.concurrent.atomic.AtomicBoolean stop) throws Exception {
        int total = rate * seconds;
        long[] took = new long[total];
        byte[] data = new byte[ENTRY_SIZE];
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(total);
        AtomicReference<String> failed = new AtomicReference<>();
        long start = System.nanoTime();
        int issued = 0;
        for (int i = 0; i < total && failed.get() == null && !(stop != null && stop.get()); i++) {
            issued++;
            long due = start + (long) i * 1_000_000_000L / rate;
            while (System.nanoTime() < due) {
                java.util.concurrent.locks.LockSupport.parkNanos(Math.min(due - System.nanoTime(), 200_000));
            }
            final int n = i;
            if (calledAt != null) {
                calledAt[i] = System.nanoTime();
            }
            lh.asyncAddEntry(data, (rc, handle, entryId, ctx) -> {
                took[n] = (System.nanoTime() - due) / 1000;
                if (rc != BKException.Code.OK) {
                    failed.compareAndSet(null, "add " + entryId + ": " + BKException.getMessage(rc));
                }
                done.countDown();
            }, null);
        }
        for (int i = issued; i < total; i++) {
            done.countDown();  // never issued: the reader was done first
        }
        done.await();
        if (failed.get() != null) {
            throw new IllegalStateException(failed.get());
        }
        return Arrays.copyOf(took, issued);
    }

    static void tail(String[] a) throws Exception {
        int rate = Integer.parseInt(a[2]);
        int seconds = Integer.parseInt(a[3]);
        int total = rate * seconds;
        long[] calledAt = new long[total];
        long[] delay = new long[total];
        try (BookKeeper writerBk = new BookKeeper(conf(a[1], false, 0));
             BookKeeper readerBk = new BookKeeper(conf(a[1], false, 0))) {
            LedgerHandle lh = writerBk.createLedger(1, 1, 1, BookKeeper.DigestType.CRC32, PASSWORD);
            LedgerHandle tail = readerBk.openLedgerNoRecovery(lh.getId(), BookKeeper.DigestType.CRC32, PASSWORD);
            AtomicInteger seen = new AtomicInteger();
            AtomicReference<Exception> readFailed = new AtomicReference<>();
            Thread reader = new Thread(() -> {
                try {
                    long next = 0;
                    while (next < total - 1) {  // the last entry is never confirmed by a later one
                        org.apache.bookkeeper.client.api.LastConfirmedAndEntry got;
                        try {
                            got = tail.readLastAddConfirmedAndEntryAsync(next, 1000, false).get();
                        } catch (java.util.concurrent.ExecutionException e) {
                            if (!(e.getCause() instanceof BKException.BKNoSuchLedgerExistsException)) {
                                throw e;
                            }
                            // No entry has reached the bookie yet: it knows no such ledger
                            // (ours and BookKeeper's alike). Ask again, as a consumer does.
                            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
                            continue;
                        }
                        if (got.hasEntry()) {
                            delay[(int) next] = (System.nanoTime() - calledAt[(int) next]) / 1000;
                            next++;
                        }
                        long lac = Math.min(got.getLastAddConfirmed(), total - 1);
                        if (lac >= next) {
                            Enumeration<LedgerEntry> rest = tail.readEntries(next, lac);
                            long now = System.nanoTime();
                            while (rest.hasMoreElements()) {
                                LedgerEntry e = rest.nextElement();
                                delay[(int) e.getEntryId()] = (now - calledAt[(int) e.getEntryId()]) / 1000;
                                e.getEntryBuffer().release();
                            }
                            next = lac + 1;
                        }
                        got.close();  // and its entry
                    }
                    seen.set((int) next);
                } catch (Exception e) {
                    readFailed.set(e);
                }
            });
            reader.start();
            paced(lh, rate, seconds, calledAt, null);
            lh.close();  // the close's LAC lets the reader see the last entries
            reader.join();
            if (readFailed.get() != null) {
                throw readFailed.get();
            }
            long[] p = percentiles(delay, seen.get());
            // The same without the first second: the clients' warm-up (JIT, connections)
            // falls in it whichever bookie they talk to.
            int from = Math.min(rate, seen.get());
            long[] steady = percentiles(Arrays.copyOfRange(delay, from, seen.get()), seen.get() - from);
            System.out.println("T " + seen.get() + " " + p[0] + " " + p[1] + " " + p[2] + " "
                               + steady[0] + " " + steady[1] + " " + steady[2]);
        }
    }

    static void pace(String[] a) throws Exception {
        int rate = Integer.parseInt(a[2]);
        int seconds = Integer.parseInt(a[3]);
        long[] reads = {0, 0};
        java.util.concurrent.atomic.AtomicBoolean readerDone = new java.util.concurrent.atomic.AtomicBoolean();
        AtomicReference<Exception> readFailed = new AtomicReference<>();
        try (BookKeeper bk = new BookKeeper(conf(a[1], true, 0));
             BookKeeper readerBk = new BookKeeper(conf(a[1], true, 0))) {
            Thread reader = null;
            if (a.length > 4) {
                long ledger = Long.parseLong(a[4]);
                reader = new Thread(() -> {
                    try {
                        LedgerHandle rh = readerBk.openLedgerNoRecovery(ledger, BookKeeper.DigestType.CRC32, PASSWORD);
                        long last = rh.getLastAddConfirmed();
                        long begun = System.nanoTime();
                        long next = 0;
                        while (next <= last) {
                            Enumeration<LedgerEntry> got = rh.batchReadEntries(next, BATCH, -1);
                            while (got.hasMoreElements()) {
                                got.nextElement().getEntryBuffer().release();
                                next++;
                            }
                        }
                        reads[0] = next;
                        reads[1] = (System.nanoTime() - begun) / 1_000_000;
                    } catch (Exception e) {
                        readFailed.set(e);
                    } finally {
                        readerDone.set(true);
                    }
                });
            }
            LedgerHandle lh = bk.createLedger(1, 1, 1, BookKeeper.DigestType.CRC32, PASSWORD);
            if (reader != null) {
                reader.start();
            }
            long[] took = paced(lh, rate, seconds, null, reader == null ? null : readerDone);
            lh.close();
            if (reader != null) {
                reader.join();
            }
            if (readFailed.get() != null) {
                throw readFailed.get();
            }
            long[] p = percentiles(took, took.length);
            System.out.println("P " + took.length + " " + p[0] + " " + p[1] + " " + p[2] + " "
                    + reads[0] + " " + reads[1]);
        }
    }

    public static void main(String[] args) throws Exception {
        try {
            run(args);
        } catch (Exception e) {
            // BookKeeper's exceptions carry no stack trace, which the source launcher
            // cannot print: say what failed here.
            System.out.println("E " + e);
            for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                System.out.println("E caused by " + c);
            }
            System.exit(1);
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        switch (args[0]) {
            case "write" -> write(args);
            case "read" -> read(args);
            case "latency" -> latency(args);
            case "tail" -> tail(args);
            case "pace" -> pace(args);
            default -> throw new IllegalArgumentException("write | read | latency | tail | pace, not " + args[0]);
        }
    }
}
