"""RocksDB ledger indexes (FORMATS.md §7)."""
