"""Client processes on one loop: every task a process creates is tagged with its name, so a
process death is the cancellation of exactly its tasks (its appends, its writer's batches
and ensemble changes, its recovery's fences and reads), never the network's or a bookie's.

Tasks inherit the creator's context (contextvars), so the tag follows ``create_task``,
``gather`` and ``wait_for`` into the client code without touching it. Network deliveries and
bookie group commits run in an empty context: they belong to no process.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools

PROCESS: contextvars.ContextVar[str | None] = contextvars.ContextVar("sim_process",
                                                                     default=None)


class Processes:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tasks: dict[str, list[asyncio.Task]] = {}
        self._seq = itertools.count()
        loop.set_task_factory(self._factory)

    def _factory(self, loop, coro, context=None):
        task = asyncio.Task(coro, loop=loop, context=context)
        name = context.get(PROCESS) if context is not None else PROCESS.get()
        if name is not None:
            self.tasks.setdefault(name, []).append(task)  # creation order: deterministic
        return task

    def spawn(self, name: str, coroutine) -> asyncio.Task:
        context = contextvars.copy_context()
        context.run(PROCESS.set, name)
        return self.loop.create_task(coroutine, context=context)

    def kill(self, name: str) -> int:
        """Cancel every live task of the process, in creation order; how many there were."""
        live = [t for t in self.tasks.get(name, ()) if not t.done()]
        for task in live:
            task.cancel()
        return len(live)


def detached(coroutine) -> asyncio.Task:
    """A task of no process (the network's, a bookie's)."""
    return asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())
