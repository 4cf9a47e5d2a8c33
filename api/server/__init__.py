"""The bookie's HTTP server (docs/http-api.md): the aiohttp application (app.py), its routes,
error translation, request-body budget, metrics and OpenAPI document. It serves a
``bookie.node.Bookie`` and imports nothing of api/client or api/cluster."""
