// BookKeeper's own Java client for scripts/drill/drill_bookkeeper_migration.py (issue 35): run
// through the BookKeeper launcher as `bk class scripts/interop/java/MigrationDrill.java ...` (Java's
// source launcher compiles it at run time against the launcher's classpath).
//
//   write ZK_URI STREAMS IN_FLIGHT ENTRIES_PER_LEDGER RATE ACK_FILE STOP_FILE
//       STREAMS writers, each a chain of 3/2/2 CRC32C ledgers of 1 KiB entries, as a Pulsar
//       topic rolls its ledgers, each at most RATE adds a second (Guava's RateLimiter, on
//       BookKeeper's classpath): ENTRIES_PER_LEDGER adds, close, next ledger (at once after
//       a failed add too). ACK_FILE gets "A <ledger> <entry>" per acknowledged add and
//       "E <ledger> <entry> <why>" per failed one; ACK_FILE.ledgers gets "C <stream>
//       <ledger>" on create and "Z <ledger> <lastEntryId>" once it is closed (or "F <ledger>
//       <why>" if the close failed). When STOP_FILE exists, each writer closes its ledger
//       and ends.
//   tail ZK_URI ACK_FILE STOP_FILE OUT_FILE
//       (reads ACK_FILE.ledgers) one reader a stream, as a Pulsar consumer tails a topic: each ledger of the stream in
//       turn, opened without recovery, read in order as its LAC moves, until it is closed
//       and read to its last entry. OUT_FILE gets "T <ledger> <entries read>" per ledger
//       read whole, "X <ledger> <why>" for an entry out of order, twice, or not as written.
//       Ends when STOP_FILE exists and every stream's last ledger was read whole.
//
// Payloads are a function of (ledger, entry): payload() is RecoveryDrill.java's, repeated
// because Java's source launcher compiles one file a program, and it must stay the same:
// the migration drill checks these ledgers' copies with `RecoveryDrill held`.

import java.io.FileOutputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import com.google.common.util.concurrent.RateLimiter;
import org.apache.bookkeeper.client.BKException;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerEntries;
import org.apache.bookkeeper.client.api.LedgerEntry;
import org.apache.bookkeeper.client.api.ReadHandle;
import org.apache.bookkeeper.conf.ClientConfiguration;

public class MigrationDrill {
    static final byte[] PASSWORD = "drill".getBytes(StandardCharsets.UTF_8);
    static final int ENTRY_SIZE = 1024;

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

    static final class Lines {
        private final OutputStream out;

        Lines(String path) throws Exception {
            out = new FileOutputStream(path, true);
        }

        synchronized void line(String text) {
            try {
                out.write((text + "\n").getBytes(StandardCharsets.UTF_8));
                out.flush();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 8 && args[0].equals("write")) {
            write(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]),
                    Long.parseLong(args[4]), Double.parseDouble(args[5]), args[6],
                    Paths.get(args[7]));
        } else if (args.length == 5 && args[0].equals("tail")) {
            tail(args[1], Paths.get(args[2] + ".ledgers"), Paths.get(args[3]), args[4]);
        } else {
            System.err.println("usage: write ZK_URI STREAMS IN_FLIGHT ENTRIES_PER_LEDGER "
                    + "RATE ACK_FILE STOP_FILE | tail ZK_URI ACK_FILE STOP_FILE OUT_FILE");
            System.exit(2);
        }
        System.exit(0);
    }

    static void write(String uri, int streams, int inFlight, long perLedger, double rate,
                      String ackFile, Path stop) throws Exception {
        BookKeeper bk = client(uri);
        Lines acks = new Lines(ackFile);
        Lines ledgers = new Lines(ackFile + ".ledgers");
        List<Thread> writers = new ArrayList<>();
        for (int s = 0; s < streams; s++) {
            final int stream = s;
            Thread writer = new Thread(() -> {
                try {
                    writeStream(bk, stream, inFlight, perLedger, rate, acks, ledgers, stop);
                } catch (Exception e) {
                    acks.line("E -1 -1 stream_" + stream + "_died:" + e.toString().replace(' ', '_'));
                }
            });
            writer.start();
            writers.add(writer);
        }
        for (Thread writer : writers) {
            writer.join();
        }
    }

    static void writeStream(BookKeeper bk, int stream, int inFlight, long perLedger,
                            double rate, Lines acks, Lines ledgers, Path stop)
            throws Exception {
        RateLimiter limiter = RateLimiter.create(rate);
        while (!Files.exists(stop)) {
            LedgerHandle lh = bk.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32C, PASSWORD);
            long ledger = lh.getId();
            ledgers.line("C " + stream + " " + ledger);
            Semaphore window = new Semaphore(inFlight);
            boolean[] failed = {false};
            for (long entry = 0; entry < perLedger && !failed[0] && !Files.exists(stop); entry++) {
                window.acquire();
                limiter.acquire();
                final long sent = entry;
                lh.asyncAddEntry(payload(ledger, entry), (rc, handle, entryId, ctx) -> {
                    if (rc == BKException.Code.OK) {
                        acks.line("A " + ledger + " " + entryId);
                    } else {
                        failed[0] = true;
                        acks.line("E " + ledger + " " + sent + " "
                                + BKException.getMessage(rc).replace(' ', '_'));
                    }
                    window.release();
                }, null);
            }
            window.acquire(inFlight);  // every add answered before the close
            try {
                lh.close();
                ledgers.line("Z " + ledger + " " + lh.getLastAddConfirmed());
            } catch (BKException e) {  // fenced by someone's recovery: its close stands
                ledgers.line("F " + ledger + " " + e.getMessage().replace(' ', '_'));
            }
        }
    }

    static void tail(String uri, Path ackFile, Path stop, String outFile) throws Exception {
        BookKeeper bk = client(uri);
        Lines out = new Lines(outFile);
        Map<Integer, Integer> done = new HashMap<>();  // stream -> ledgers read whole
        Map<Integer, Thread> readers = new HashMap<>();
        while (true) {
            Map<Integer, List<Long>> chains = chains(ackFile);
            for (int stream : chains.keySet()) {
                if (!readers.containsKey(stream)) {
                    Thread reader = new Thread(() -> tailStream(bk, stream, ackFile, stop, out));
                    reader.start();
                    readers.put(stream, reader);
                }
            }
            if (Files.exists(stop) && !readers.isEmpty()) {
                break;
            }
            Thread.sleep(100);
        }
        for (Thread reader : readers.values()) {
            reader.join();
        }
    }

    static Map<Integer, List<Long>> chains(Path ackFile) throws Exception {
        Map<Integer, List<Long>> chains = new HashMap<>();
        if (!Files.exists(ackFile)) {
            return chains;
        }
        for (String line : Files.readAllLines(ackFile)) {
            String[] parts = line.split(" ");
            if (parts.length == 3 && parts[0].equals("C")) {
                chains.computeIfAbsent(Integer.parseInt(parts[1]), k -> new ArrayList<>())
                        .add(Long.parseLong(parts[2]));
            }
        }
        return chains;
    }

    static boolean writerDone(Path ackFile, long ledger) throws Exception {
        String closed = "Z " + ledger + " ";
        String failed = "F " + ledger + " ";
        for (String line : Files.readAllLines(ackFile)) {
            if (line.startsWith(closed) || line.startsWith(failed)) {
                return true;
            }
        }
        return false;
    }

    static void tailStream(BookKeeper bk, int stream, Path ackFile, Path stop, Lines out) {
        int position = 0;
        try {
            while (true) {
                List<Long> chain = chains(ackFile).get(stream);
                if (position < chain.size()) {
                    tailLedger(bk, chain.get(position), ackFile, out);
                    position++;
                } else if (Files.exists(stop) && writerDoneAll(ackFile, chain)) {
                    return;
                } else {
                    Thread.sleep(50);
                }
            }
        } catch (Exception e) {
            out.line("X -1 stream_" + stream + "_reader_died:" + e.toString().replace(' ', '_'));
        }
    }

    static boolean writerDoneAll(Path ackFile, List<Long> chain) throws Exception {
        return writerDone(ackFile, chain.get(chain.size() - 1));
    }

    static void tailLedger(BookKeeper bk, long ledger, Path ackFile, Lines out) throws Exception {
        ReadHandle rh = bk.newOpenLedgerOp().withLedgerId(ledger).withRecovery(false)
                .withPassword(PASSWORD).withDigestType(org.apache.bookkeeper.client.api.DigestType.CRC32C)
                .execute().get(60, TimeUnit.SECONDS);
        long next = 0;
        while (true) {
            boolean closed = rh.isClosed();
            long last = closed ? rh.getLastAddConfirmed() : rh.readLastAddConfirmed();
            if (next <= last) {
                try (LedgerEntries entries = rh.read(next, Math.min(last, next + 499))) {
                    for (LedgerEntry entry : entries) {
                        if (entry.getEntryId() != next) {
                            out.line("X " + ledger + " got_" + entry.getEntryId() + "_expected_" + next);
                            return;
                        }
                        if (!Arrays.equals(entry.getEntryBytes(), payload(ledger, next))) {
                            out.line("X " + ledger + " entry_" + next + "_differs");
                            return;
                        }
                        next++;
                    }
                }
            } else if (closed) {
                out.line("T " + ledger + " " + next);
                rh.closeAsync();
                return;
            } else if (writerDone(ackFile, ledger)) {
                // the close is written; this handle learns it from the metadata (its watch)
                // or, failing that, a new one does
                Thread.sleep(50);
                if (!rh.isClosed()) {
                    rh.closeAsync();
                    rh = bk.newOpenLedgerOp().withLedgerId(ledger).withRecovery(false)
                            .withPassword(PASSWORD)
                            .withDigestType(org.apache.bookkeeper.client.api.DigestType.CRC32C)
                            .execute().get(60, TimeUnit.SECONDS);
                }
            } else {
                Thread.sleep(20);
            }
        }
    }
}
