"""Typed application keys shared by the server's modules."""

from aiohttp import web

from bookie.node import Bookie

BOOKIE = web.AppKey("bookie", Bookie)
