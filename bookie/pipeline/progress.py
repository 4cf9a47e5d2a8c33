"""Progress of a job's Spark stages on stderr: a line as tasks complete, at most one a second.

A daemon thread polls Spark's status tracker (``sc.statusTracker()``), so the jobs stay plain
DataFrame code and no SparkListener (a JVM class) is needed. The job's actions run under a
job group of their own, so the thread finds every stage of the run, even one that started
and ended between two polls, and none of another thread's jobs. Imports no pyspark: it is
handed the session.

    [scrub] 0.8 s: stage 0: 1/2 tasks
    [scrub] 1.1 s: stage 0: 2/2 tasks

Lines come at most every ``interval_s``; one more, the final counts, when the run ends.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time

INTERVAL_S = 1.0
POLL_S = 0.2
#: How long the end waits for Spark's status store to record the last task ends (its
#: listener runs behind the scheduler): the final line should say 2/2, not 1/2.
SETTLE_S = 2.0
_DONE = ("SUCCEEDED", "FAILED")
_GROUP_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
_runs = itertools.count()


class StageProgress:
    """``with StageProgress(spark, "scrub"):`` around a job's actions, on their thread."""

    def __init__(self, spark, label: str, stream=None, enabled: bool = True,
                 interval_s: float = INTERVAL_S, poll_s: float = POLL_S,
                 clock=time.monotonic) -> None:
        self._context = spark.sparkContext
        self._label = label
        self._stream = stream
        self._enabled = enabled
        self._interval_s, self._poll_s, self._clock = interval_s, poll_s, clock
        self._group = f"bookie-pipeline-{label}-{next(_runs)}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._printed: dict[int, tuple[int, int]] = {}
        self._started = self._last_line = 0.0
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> "StageProgress":
        if self._enabled:
            self._saved = {key: self._context.getLocalProperty(key) for key in _GROUP_KEYS}
            self._context.setJobGroup(self._group, f"bookie.pipeline {self._label}")
            self._tracker = self._context.statusTracker()
            self._started = self._clock()
            self._last_line = self._started - self._interval_s
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if not self._enabled:
            return
        self._stop.set()
        self._thread.join()
        for key, value in self._saved.items():  # later jobs of this thread are not ours
            self._context.setLocalProperty(key, value)
        try:
            self._settle()
            self._emit(force=True)
        except Exception:  # noqa: BLE001 (a progress line must never fail the job)
            pass

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                self._emit(force=False)
            except Exception:  # noqa: BLE001 (as above; the job goes on without lines)
                return

    def _settle(self) -> None:
        deadline = self._clock() + SETTLE_S
        while self._clock() < deadline:
            jobs = [self._tracker.getJobInfo(job_id)
                    for job_id in self._tracker.getJobIdsForGroup(self._group)]
            if all(job is None or job.status in _DONE for job in jobs):
                return
            time.sleep(0.02)  # polling the status store with a deadline, not a sync sleep

    def _emit(self, force: bool) -> None:
        now = self._clock()
        if not force and now - self._last_line < self._interval_s:
            return
        changed = {stage: counts for stage, counts in self._stages().items()
                   if self._printed.get(stage) != counts}
        if not changed:
            return
        parts = ", ".join(f"stage {stage}: {done}/{total} tasks"
                          for stage, (done, total) in sorted(changed.items()))
        print(f"[{self._label}] {now - self._started:.1f} s: {parts}",
              file=self._stream or sys.stderr, flush=True)
        self._printed.update(changed)
        self._last_line = now

    def _stages(self) -> dict[int, tuple[int, int]]:
        """(completed, total) tasks of each stage of the run that has begun. A stage with no
        task begun is pending, or skipped (its shuffle output reused): not shown."""
        tracker = self._tracker
        stages = {}
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job is not None else ()):
                info = tracker.getStageInfo(stage_id)
                if info is None:
                    continue
                begun = (info.numCompletedTasks + info.numActiveTasks
                         + info.numFailedTasks)
                if begun or stage_id in self._printed:
                    stages[stage_id] = (info.numCompletedTasks, info.numTasks)
        return stages
