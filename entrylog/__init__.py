"""BKLO entry logs (docs/formats.md §5). Synchronous; no asyncio."""
