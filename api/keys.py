"""Typed application keys shared by the server's modules."""

from aiohttp import web
from prometheus_client import CollectorRegistry

from bookie.node import Bookie

BOOKIE = web.AppKey("bookie", Bookie)
REGISTRY = web.AppKey("metrics_registry", CollectorRegistry)
