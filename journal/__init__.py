"""BKLG journal files (FORMATS.md §3). Synchronous; no asyncio."""
