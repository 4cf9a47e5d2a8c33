"""BKLO entry logs (FORMATS.md §5). Synchronous; no asyncio."""
