"""Typed application keys shared by the server's modules."""

from aiohttp import web
from prometheus_client import CollectorRegistry

from api.server.body_budget import BodyBudget
from api.server.refusals import RefusalLog
from bookie.node import Bookie

BOOKIE = web.AppKey("bookie", Bookie)
REGISTRY = web.AppKey("metrics_registry", CollectorRegistry)
BODY_BUDGET = web.AppKey("body_budget", BodyBudget)
REFUSALS = web.AppKey("refusals", RefusalLog)
