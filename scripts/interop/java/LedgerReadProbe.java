// Reads ledgers through Apache BookKeeper's own DbLedgerStorage on a stopped bookie's ledger
// dirs (issue 58): what BookKeeper's bookie would serve from them. Run through the launcher:
//   bk class scripts/interop/java/LedgerReadProbe.java DIR1,DIR2,... LEDGER:LAST ...
// DIRs are the configured ledger dirs, in ledgerDirectories' order; stop every bookie on them
// first. No ZooKeeper: GC has no ledger manager, so it collects nothing. Prints, a ledger:
//   "R <ledger> exists=<bool> fenced=<bool|-> entries=<read of 0..LAST> bytes=<sum>" or
//   "R <ledger> missing <why>" at the first entry it cannot read.
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledByteBufAllocator;
import org.apache.bookkeeper.bookie.CheckpointSource;
import org.apache.bookkeeper.bookie.Checkpointer;
import org.apache.bookkeeper.bookie.LedgerDirsManager;
import org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.stats.NullStatsLogger;
import org.apache.bookkeeper.util.DiskChecker;

public class LedgerReadProbe {
    public static void main(String[] args) throws Exception {
        ServerConfiguration conf = new ServerConfiguration();
        conf.setLedgerDirNames(args[0].split(","));
        conf.setAllowLoopback(true);
        conf.setAdvertisedAddress("127.0.0.1");
        conf.setProperty("dbStorage_writeCacheMaxSizeMb", 16);
        conf.setProperty("dbStorage_readAheadCacheMaxSizeMb", 16);
        LedgerDirsManager ldm = new LedgerDirsManager(conf, conf.getLedgerDirs(),
                new DiskChecker(0.99f, 0.98f));
        DbLedgerStorage st = new DbLedgerStorage();
        st.initialize(conf, null, ldm, ldm, NullStatsLogger.INSTANCE,
                UnpooledByteBufAllocator.DEFAULT);
        st.setCheckpointSource(CheckpointSource.DEFAULT);
        st.setCheckpointer(Checkpointer.NULL);
        for (int i = 1; i < args.length; i++) {
            long ledger = Long.parseLong(args[i].split(":")[0]);
            long last = Long.parseLong(args[i].split(":")[1]);
            boolean exists = st.ledgerExists(ledger);
            String fenced = "-";
            long bytes = 0;
            long read = 0;
            try {
                fenced = String.valueOf(st.isFenced(ledger));
                for (long e = 0; e <= last; e++) {
                    ByteBuf entry = st.getEntry(ledger, e);
                    bytes += entry.readableBytes();
                    entry.release();
                    read++;
                }
                System.out.println("R " + ledger + " exists=" + exists + " fenced=" + fenced
                        + " entries=" + read + " bytes=" + bytes);
            } catch (Exception x) {
                System.out.println("R " + ledger + " missing exists=" + exists + " after "
                        + read + " entries: " + x);
            }
        }
        st.shutdown();
    }
}
