// What Apache BookKeeper's DbLedgerStorage makes of a `ledgers` RocksDB index (issue 58): run through
// the BookKeeper launcher as `bk class scripts/interop/java/LedgersIndexProbe.java BASE [ACTION...]`,
// so Java's source launcher compiles it against the launcher's classpath. BASE is the dir that holds
// `ledgers/` (a ledger or index dir's `current/`). Stop every bookie on BASE first: this opens the
// database read-write, as a bookie does.
//
// It prints, one line each:
//   RAW <key hex> <value hex>   every key and value, through BookKeeper's KeyValueStorageRocksDB
//   PARSE <ledger> ok|ERROR <why>   LedgerData.parseFrom of each key BookKeeper would load (id >= 0)
//   LOAD <n>                    ledgers LedgerMetadataIndex's constructor loaded
//   L <ledger> exists=.. fenced=.. limbo=.. masterKey=<hex> explicitLac=<hex|->
//                               each ledger of getActiveLedgersInRange(0, MAX): what GC scans
//   FLAGS <int>                 getStorageStateFlags (key -0xeefd)
// then applies each ACTION through LedgerMetadataIndex, flushes as a checkpoint does
// (flush, removeDeletedLedgers), closes, and prints the RAW lines again:
//   touch:L      setMasterKey(L, its stored key): what every new write handle does (LedgerDescriptor)
//   fence:L      setFenced(L)
//   create:L:HEX setMasterKey(L, key) of a ledger not in the index: a first add
//   delete:L     delete(L): what GC's garbage cleaner does (deleteLedger)

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map.Entry;
import org.apache.bookkeeper.bookie.storage.ldb.KeyValueStorage;
import org.apache.bookkeeper.bookie.storage.ldb.KeyValueStorageFactory;
import org.apache.bookkeeper.bookie.storage.ldb.KeyValueStorageRocksDB;
import org.apache.bookkeeper.bookie.storage.ldb.LedgerData;
import org.apache.bookkeeper.bookie.storage.ldb.LedgerMetadataIndex;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.stats.NullStatsLogger;

public class LedgersIndexProbe {
    private static final HexFormat HEX = HexFormat.of();
    private static final KeyValueStorageFactory FACTORY =
            (base, sub, type, conf) -> new KeyValueStorageRocksDB(base, sub, type, conf);

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: LedgersIndexProbe BASE [touch:L|fence:L|create:L:HEX|delete:L ...]");
            System.exit(2);
        }
        String base = args[0];
        ServerConfiguration conf = new ServerConfiguration();
        raw(conf, base);
        LedgerMetadataIndex index = new LedgerMetadataIndex(conf, FACTORY, base, NullStatsLogger.INSTANCE);
        List<Long> ids = new ArrayList<>();
        index.getActiveLedgersInRange(0, Long.MAX_VALUE).forEach(ids::add);
        ids.sort(null);
        System.out.println("LOAD " + ids.size());
        for (long id : ids) {
            System.out.println(describe(id, index.get(id)));
        }
        Method flags = LedgerMetadataIndex.class.getDeclaredMethod("getStorageStateFlags");
        flags.setAccessible(true);
        System.out.println("FLAGS " + flags.invoke(index));
        if (args.length == 1) {
            index.close();
            return;
        }
        for (int i = 1; i < args.length; i++) {
            String[] action = args[i].split(":");
            long id = Long.parseLong(action[1]);
            switch (action[0]) {
                case "touch" -> index.setMasterKey(id, index.get(id).getMasterKey());
                case "fence" -> System.out.println("FENCE " + id + " changed=" + index.setFenced(id));
                case "create" -> index.setMasterKey(id, HEX.parseHex(action[2]));
                case "delete" -> index.delete(id);
                default -> throw new IllegalArgumentException("unknown action " + args[i]);
            }
            System.out.println("DID " + args[i]);
        }
        index.flush();
        index.removeDeletedLedgers();
        index.close();
        System.out.println("AFTER");
        raw(conf, base);
    }

    private static void raw(ServerConfiguration conf, String base) throws Exception {
        KeyValueStorage db = FACTORY.newKeyValueStorage(base, "ledgers",
                KeyValueStorageFactory.DbConfigType.LedgerMetadata, conf);
        try (KeyValueStorage.CloseableIterator<Entry<byte[], byte[]>> it = db.iterator()) {
            while (it.hasNext()) {
                Entry<byte[], byte[]> e = it.next();
                System.out.println("RAW " + HEX.formatHex(e.getKey()) + " " + HEX.formatHex(e.getValue()));
                if (e.getKey().length < 8) {
                    // LedgerMetadataIndex reads 8 bytes of every key (ArrayUtil.getLong), unchecked.
                    System.out.println("SHORTKEY " + HEX.formatHex(e.getKey()));
                    continue;
                }
                long id = java.nio.ByteBuffer.wrap(e.getKey()).getLong();
                if (id < 0) {
                    continue;
                }
                try {
                    LedgerData data = new LedgerData();
                    data.parseFrom(e.getValue());
                    System.out.println("PARSE " + id + " ok " + describe(id, data));
                } catch (RuntimeException error) {
                    System.out.println("PARSE " + id + " ERROR " + error);
                }
            }
        } finally {
            db.close();
        }
    }

    private static String describe(long id, LedgerData d) {
        return "L " + id + " exists=" + d.isExists() + " fenced=" + d.isFenced() + " limbo="
                + (d.hasLimbo() ? d.isLimbo() : "-") + " masterKey=" + HEX.formatHex(d.getMasterKey())
                + " explicitLac=" + (d.hasExplicitLac() ? HEX.formatHex(d.getExplicitLac()) : "-");
    }
}
