// BookKeeper's own Java client for scripts/drill/drill_bookkeeper_recovery.py (issue 35): run
// through the BookKeeper launcher as `bk class scripts/interop/java/RecoveryDrill.java ...`, so
// Java's source launcher compiles it at run time against the launcher's classpath; nothing
// of BookKeeper is shipped or built here.
//
//   write ZK_URI LEDGERS IN_FLIGHT ACK_FILE
//       creates LEDGERS 3/2/2 CRC32C ledgers (custom metadata application=drill) and adds 1 KiB entries to them, at most
//       IN_FLIGHT adds outstanding per ledger, until it is killed. ACK_FILE gets "C <ledger>"
//       once a ledger is created and "A <ledger> <entry>" for each acknowledged add, in the
//       order the client confirmed them; an ack not yet in the file counts as not seen (the
//       drill then checks fewer entries, never more).
//   recover ZK_URI TIMEOUT_S LEDGER...
//       openLedger (BookKeeper's recovery: fence, read past the LAC, write back, close) of
//       each ledger, each bounded by TIMEOUT_S; then reads it whole and checks every payload
//       byte for byte. Prints one line a ledger:
//       "R <ledger> ok <lastEntryId> <ms> <entries read>" or "R <ledger> FAILED <why>".
//   held ZK_URI LEDGER...
//       for each closed ledger, asks every bookie of each entry's write set (the metadata's
//       ensembles, round-robin as BookKeeper places them) for its copy over BookKeeper's
//       protocol and compares the payload byte for byte. Prints
//       "H <ledger> <copies checked> <missing> <differing>", and "W <ledger> <entry>
//       <bookie> <why>" for the first few bad copies.
//   delete ZK_URI LEDGER...
//       deletes each ledger (BookKeeper's deleteLedger: the metadata goes, bookies' GC
//       drops the copies); prints "D <ledger> ok" or "D <ledger> FAILED <why>".
//
// Payloads are a function of (ledger, entry), so the reader needs no copy of what was sent.

import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerEntry;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.proto.BookieProtocol;

public class RecoveryDrill {
    static final byte[] PASSWORD = "drill".getBytes(StandardCharsets.UTF_8);
    static final int ENTRY_SIZE = 1024;
    // Custom metadata as Pulsar's managed ledgers set it; scripts/drill/drill_bookkeeper_client.py
    // writes the same from our client and compares the two ledgers' metadata.
    static final Map<String, byte[]> CUSTOM =
            Map.of("application", "drill".getBytes(StandardCharsets.UTF_8));

    static byte[] payload(long ledger, long entry) {
        ByteBuffer buffer = ByteBuffer.allocate(ENTRY_SIZE);
        buffer.putLong(ledger).putLong(entry);
        for (int i = 16; i < ENTRY_SIZE; i++) {
            buffer.put((byte) (ledger * 131 + entry * 31 + i));
        }
        return buffer.array();
    }

    static BookKeeper client(String uri) throws Exception {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(uri);
        conf.setAddEntryTimeout(10);
        conf.setReadEntryTimeout(10);
        conf.setZkTimeout(10_000);
        return new BookKeeper(conf);
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 4 && args[0].equals("write")) {
            write(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), args[4]);
        } else if (args.length >= 4 && args[0].equals("recover")) {
            recover(args[1], Integer.parseInt(args[2]), Arrays.copyOfRange(args, 3, args.length));
        } else if (args.length >= 3 && args[0].equals("delete")) {
            BookKeeper bk = client(args[1]);
            for (String id : Arrays.copyOfRange(args, 2, args.length)) {
                try {
                    bk.deleteLedger(Long.parseLong(id));
                    System.out.println("D " + id + " ok");
                } catch (Exception e) {
                    System.out.println("D " + id + " FAILED " + e.toString().replace(' ', '_'));
                }
            }
        } else if (args.length >= 3 && args[0].equals("held")) {
            held(args[1], Arrays.copyOfRange(args, 2, args.length));
        } else {
            System.err.println("usage: write ZK_URI LEDGERS IN_FLIGHT ACK_FILE | "
                    + "recover ZK_URI TIMEOUT_S LEDGER... | held ZK_URI LEDGER... | delete ZK_URI LEDGER...");
            System.exit(2);
        }
        System.exit(0);
    }

    static final class Acks {
        private final OutputStream out;
        private final StringBuilder pending = new StringBuilder();
        private long lastFlush = System.nanoTime();

        Acks(String path) throws Exception {
            out = new FileOutputStream(path, true);
        }

        synchronized void line(String text, boolean now) {
            pending.append(text).append('\n');
            if (now || pending.length() > 8192 || System.nanoTime() - lastFlush > 2_000_000) {
                flush();
            }
        }

        synchronized void flush() {
            try {
                out.write(pending.toString().getBytes(StandardCharsets.UTF_8));
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            pending.setLength(0);
            lastFlush = System.nanoTime();
        }
    }

    static void write(String uri, int ledgers, int inFlight, String ackFile) throws Exception {
        BookKeeper bk = client(uri);
        Acks acks = new Acks(ackFile);
        List<Thread> writers = new ArrayList<>();
        for (int l = 0; l < ledgers; l++) {
            LedgerHandle lh = bk.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32C, PASSWORD,
                    CUSTOM);
            acks.line("C " + lh.getId(), true);
            Thread writer = new Thread(() -> writeLedger(lh, inFlight, acks));
            writer.setDaemon(true);
            writer.start();
            writers.add(writer);
        }
        while (true) {  // until SIGKILL: the drill kills the writer with adds in flight
            Thread.sleep(5);
            acks.flush();
        }
    }

    static void writeLedger(LedgerHandle lh, int inFlight, Acks acks) {
        Semaphore window = new Semaphore(inFlight);
        long ledger = lh.getId();
        for (long entry = 0; ; entry++) {
            try {
                window.acquire();
            } catch (InterruptedException e) {
                return;
            }
            final long sent = entry;
            lh.asyncAddEntry(payload(ledger, entry), (rc, handle, entryId, ctx) -> {
                window.release();
                if (rc == BKException.Code.OK) {
                    acks.line("A " + ledger + " " + entryId, false);
                } else {
                    acks.line("E " + ledger + " " + sent + " " + BKException.getMessage(rc), true);
                }
            }, null);
        }
    }

    static void recover(String uri, int timeoutS, String[] ids) throws Exception {
        BookKeeper bk = client(uri);
        for (String id : ids) {
            long ledger = Long.parseLong(id);
            long started = System.nanoTime();
            CompletableFuture<LedgerHandle> opened = new CompletableFuture<>();
            bk.asyncOpenLedger(ledger, BookKeeper.DigestType.CRC32C, PASSWORD,
                    (rc, lh, ctx) -> {
                        if (rc == BKException.Code.OK) {
                            opened.complete(lh);
                        } else {
                            opened.completeExceptionally(BKException.create(rc));
                        }
                    }, null);
            LedgerHandle lh;
            try {
                lh = opened.get(timeoutS, TimeUnit.SECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                System.out.println("R " + ledger + " FAILED openLedger did not return in "
                        + timeoutS + " s");
                continue;
            } catch (Exception e) {
                System.out.println("R " + ledger + " FAILED openLedger: " + e.getCause());
                continue;
            }
            long ms = (System.nanoTime() - started) / 1_000_000;
            long last = lh.getLastAddConfirmed();
            String checked;
            try {
                checked = check(lh, ledger, last);
            } catch (Exception e) {  // reported, never fatal: BookKeeper's threads would keep
                checked = "FAILED reading back: " + e;  // a JVM whose main died alive
            }
            System.out.println("R " + ledger + " " + checked.replace(' ', '_') + " " + last
                    + " " + ms + " " + (last + 1));
            System.out.flush();
        }
        System.exit(0);  // without closing: a close must not hang the report
    }

    static String check(LedgerHandle lh, long ledger, long last) throws Exception {
        for (long first = 0; first <= last; first += 1000) {
            Enumeration<LedgerEntry> entries = lh.readEntries(first, Math.min(last, first + 999));
            while (entries.hasMoreElements()) {
                LedgerEntry entry = entries.nextElement();
                if (!Arrays.equals(entry.getEntry(), payload(ledger, entry.getEntryId()))) {
                    return "FAILED entry " + entry.getEntryId() + " differs";
                }
            }
        }
        return "ok";
    }

    static void held(String uri, String[] ids) throws Exception {
        BookKeeper bk = client(uri);
        for (String id : ids) {
            long ledger = Long.parseLong(id);
            LedgerHandle lh = bk.openLedgerNoRecovery(ledger, BookKeeper.DigestType.CRC32C,
                    PASSWORD);
            long last = lh.getLedgerMetadata().getLastEntryId();
            int quorum = lh.getLedgerMetadata().getWriteQuorumSize();
            AtomicLong missing = new AtomicLong(), differing = new AtomicLong();
            Semaphore window = new Semaphore(2000);
            List<Map.Entry<Long, ? extends List<BookieId>>> segments =
                    new ArrayList<>(lh.getLedgerMetadata().getAllEnsembles().entrySet());
            long copies = 0;
            for (int s = 0; s < segments.size(); s++) {
                List<BookieId> ensemble = segments.get(s).getValue();
                long end = s + 1 < segments.size() ? segments.get(s + 1).getKey() - 1 : last;
                for (long entry = segments.get(s).getKey(); entry <= end; entry++) {
                    for (int i = 0; i < quorum; i++) {
                        BookieId bookie = ensemble.get((int) ((entry + i) % ensemble.size()));
                        window.acquire();
                        copies++;
                        bk.getClientCtx().getBookieClient().readEntry(bookie, ledger, entry,
                                (rc, l, e, buffer, ctx) -> {
                                    String why = null;
                                    if (rc != BKException.Code.OK) {
                                        missing.incrementAndGet();
                                        why = BKException.getMessage(rc);
                                    } else {
                                        byte[] body = new byte[ENTRY_SIZE];
                                        buffer.getBytes(buffer.readerIndex()
                                                + buffer.readableBytes() - ENTRY_SIZE, body);
                                        if (!Arrays.equals(body, payload(l, e))) {
                                            differing.incrementAndGet();
                                            why = "payload differs";
                                        }
                                    }
                                    if (why != null && missing.get() + differing.get() <= 5) {
                                        System.out.println("W " + l + " " + e + " " + ctx
                                                + " " + why.replace(' ', '_'));
                                    }
                                    window.release();
                                }, bookie, BookieProtocol.FLAG_NONE);
                    }
                }
            }
            window.acquire(2000);
            window.release(2000);
            System.out.println("H " + ledger + " " + copies + " " + missing.get() + " "
                    + differing.get());
            System.out.flush();
        }
        System.exit(0);
    }
}
