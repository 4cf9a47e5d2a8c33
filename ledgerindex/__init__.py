"""RocksDB ledger indexes (docs/formats.md §7)."""
