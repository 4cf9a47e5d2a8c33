"""HTTP: server and clients. The only aiohttp importer (DESIGN.md §5)."""
