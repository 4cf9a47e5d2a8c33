// BookKeeper's own Java client for scripts/interop/interop_bookkeeper_topology.py (issue 39): run
// through the BookKeeper launcher as `bk class scripts/interop/java/TopologyCheck.java ...`, so Java's
// source launcher compiles it at run time against the launcher's classpath.
//
// The client places by BookKeeper's RackawareEnsemblePlacementPolicy, resolving each bookie's
// rack with ScriptBasedMapping over SCRIPT (what `bookie cluster topology --script` writes),
// minNumRacksPerWriteQuorum=2 and enforceMinNumRacksPerWriteQuorum=true: it refuses an
// ensemble it cannot spread, and keeps bookies of the default rack out.
//
//   create ZK_URI SCRIPT LEDGERS
//       creates LEDGERS 3/2/2 ledgers, adds 5 entries to each and closes it; prints
//       "L <ledger> <bookie>,<bookie>,<bookie>" (its ensemble) or "L <ledger> FAILED <why>".
//   grade ZK_URI SCRIPT LEDGER...
//       BookKeeper's isEnsembleAdheringToPlacementPolicy of every segment of each ledger;
//       prints "G <ledger> <first entry> <MEETS_STRICT|MEETS_SOFT|FAIL>".
//   resolve SCRIPT ADDRESS...
//       ScriptBasedMapping's answer for each address: "R <address> <network location>".

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.bookkeeper.client.BookKeeper;
import org.apache.bookkeeper.client.EnsemblePlacementPolicy;
import org.apache.bookkeeper.client.LedgerHandle;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.conf.ClientConfiguration;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.net.ScriptBasedMapping;

public class TopologyCheck {
    static final byte[] PASSWORD = "topology".getBytes(StandardCharsets.UTF_8);

    static ClientConfiguration conf(String uri, String script) {
        ClientConfiguration conf = new ClientConfiguration();
        conf.setMetadataServiceUri(uri);
        conf.setAddEntryTimeout(10);
        conf.setReadEntryTimeout(10);
        conf.setZkTimeout(10_000);
        conf.setProperty("ensemblePlacementPolicy",
                "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy");
        conf.setProperty("reppDnsResolverClass", ScriptBasedMapping.class.getName());
        conf.setProperty("networkTopologyScriptFileName", script);
        conf.setProperty("minNumRacksPerWriteQuorum", "2");
        conf.setProperty("enforceMinNumRacksPerWriteQuorum", "true");
        return conf;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 4 && args[0].equals("create")) {
            create(args[1], args[2], Integer.parseInt(args[3]));
        } else if (args.length >= 4 && args[0].equals("grade")) {
            grade(args[1], args[2], Arrays.copyOfRange(args, 3, args.length));
        } else if (args.length >= 3 && args[0].equals("resolve")) {
            ClientConfiguration conf = new ClientConfiguration();
            conf.setProperty("networkTopologyScriptFileName", args[1]);
            ScriptBasedMapping mapping = new ScriptBasedMapping(conf);
            List<String> addresses = Arrays.asList(Arrays.copyOfRange(args, 2, args.length));
            List<String> racks = mapping.resolve(addresses);
            for (int i = 0; i < addresses.size(); i++) {
                System.out.println("R " + addresses.get(i) + " " + racks.get(i));
            }
        } else {
            System.err.println("usage: create ZK_URI SCRIPT LEDGERS | grade ZK_URI SCRIPT "
                    + "LEDGER... | resolve SCRIPT ADDRESS...");
            System.exit(2);
        }
        System.exit(0);
    }

    static void create(String uri, String script, int ledgers) throws Exception {
        BookKeeper bk = new BookKeeper(conf(uri, script));
        for (int l = 0; l < ledgers; l++) {
            try {
                LedgerHandle lh = bk.createLedger(3, 2, 2, BookKeeper.DigestType.CRC32C,
                        PASSWORD);
                for (int e = 0; e < 5; e++) {
                    lh.addEntry(("entry " + e).getBytes(StandardCharsets.UTF_8));
                }
                lh.close();
                StringBuilder line = new StringBuilder("L " + lh.getId() + " ");
                List<BookieId> ensemble = lh.getLedgerMetadata().getAllEnsembles()
                        .firstEntry().getValue();
                for (int i = 0; i < ensemble.size(); i++) {
                    line.append(i == 0 ? "" : ",").append(ensemble.get(i));
                }
                System.out.println(line);
            } catch (Exception e) {
                System.out.println("L -1 FAILED " + e.toString().replace(' ', '_'));
            }
        }
        bk.close();
    }

    static void grade(String uri, String script, String[] ids) throws Exception {
        BookKeeper bk = new BookKeeper(conf(uri, script));
        Method getter = BookKeeper.class.getDeclaredMethod("getPlacementPolicy");
        getter.setAccessible(true);  // package-private in BookKeeper; the policy it placed by
        EnsemblePlacementPolicy policy = (EnsemblePlacementPolicy) getter.invoke(bk);
        for (String id : ids) {
            LedgerMetadata metadata = bk.getLedgerManager()
                    .readLedgerMetadata(Long.parseLong(id)).get().getValue();
            for (Map.Entry<Long, ? extends List<BookieId>> segment
                    : metadata.getAllEnsembles().entrySet()) {
                System.out.println("G " + id + " " + segment.getKey() + " "
                        + policy.isEnsembleAdheringToPlacementPolicy(segment.getValue(),
                                metadata.getWriteQuorumSize(), metadata.getAckQuorumSize()));
            }
        }
        bk.close();
    }
}
