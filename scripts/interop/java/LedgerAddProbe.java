// One add and one read handle through Apache BookKeeper's own HandleFactoryImpl and DbLedgerStorage,
// on a ledger dir (issue 58): what BookKeeper's bookie does with a ledger as our `ledgers` index
// left it (docs/design-notes/ledgers-index-for-bookkeeper.md). Run through the launcher:
//   bk class scripts/interop/java/LedgerAddProbe.java LEDGER_DIR LEDGER MASTER_KEY_HEX
// LEDGER_DIR is the configured dir (its `current/` holds `ledgers/`); stop every bookie on it first.
// No ZooKeeper: GC has no ledger manager, so it collects nothing. It adds entry 0 of LEDGER with
// MASTER_KEY_HEX (getHandle, as a client's add), flushes as a checkpoint does, and prints
// ledgerExists before and after, the stored entry's size, and whether a read handle opens
// (getReadOnlyHandle, as every read does) or fails with NoLedgerException.
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import org.apache.bookkeeper.bookie.CheckpointSource;
import org.apache.bookkeeper.bookie.Checkpointer;
import org.apache.bookkeeper.bookie.LedgerDirsManager;
import org.apache.bookkeeper.bookie.LedgerStorage;
import org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.stats.NullStatsLogger;
import org.apache.bookkeeper.util.DiskChecker;

public class LedgerAddProbe {
    public static void main(String[] args) throws Exception {
        String dir = args[0];
        long ledger = Long.parseLong(args[1]);
        byte[] key = java.util.HexFormat.of().parseHex(args[2]);
        ServerConfiguration conf = new ServerConfiguration();
        conf.setLedgerDirNames(new String[] {dir});
        conf.setAllowLoopback(true);
        conf.setAdvertisedAddress("127.0.0.1");
        conf.setProperty("dbStorage_writeCacheMaxSizeMb", 16);
        conf.setProperty("dbStorage_readAheadCacheMaxSizeMb", 16);
        LedgerDirsManager ldm = new LedgerDirsManager(conf, conf.getLedgerDirs(), new DiskChecker(0.99f, 0.98f));
        DbLedgerStorage st = new DbLedgerStorage();
        st.initialize(conf, null, ldm, ldm, NullStatsLogger.INSTANCE, UnpooledByteBufAllocator.DEFAULT);
        st.setCheckpointSource(CheckpointSource.DEFAULT);
        st.setCheckpointer(Checkpointer.NULL);
        System.out.println("ledgerExists before=" + st.ledgerExists(ledger));
        Class<?> hf = Class.forName("org.apache.bookkeeper.bookie.HandleFactoryImpl");
        Constructor<?> c = hf.getDeclaredConstructor(LedgerStorage.class);
        c.setAccessible(true);
        Object handles = c.newInstance(st);
        Method getHandle = hf.getDeclaredMethod("getHandle", long.class, byte[].class, boolean.class);
        getHandle.setAccessible(true);
        Object handle = getHandle.invoke(handles, ledger, key, false);
        Method add = Class.forName("org.apache.bookkeeper.bookie.LedgerDescriptor")
                .getDeclaredMethod("addEntry", ByteBuf.class);
        add.setAccessible(true);
        ByteBuf e = Unpooled.buffer();
        e.writeLong(ledger).writeLong(0).writeLong(-1).writeBytes("payload".getBytes());
        System.out.println("addEntry returned " + add.invoke(handle, e));
        st.flush();
        System.out.println("ledgerExists after add+flush=" + st.ledgerExists(ledger));
        System.out.println("entry in storage: " + st.getEntry(ledger, 0).readableBytes() + " bytes");
        Method ro = hf.getDeclaredMethod("getReadOnlyHandle", long.class);
        ro.setAccessible(true);
        try {
            ro.invoke(handles, ledger);
            System.out.println("read handle: opened");
        } catch (java.lang.reflect.InvocationTargetException x) {
            System.out.println("read handle: " + x.getCause());
        }
        st.shutdown();
    }
}
