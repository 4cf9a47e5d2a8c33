"""BKLG journal files (docs/formats.md §3). Synchronous; no asyncio."""
