"""The CLI's face (issue 54): per-job help, the hint without pyspark, progress, rates."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import pytest

from bookie.pipeline.__main__ import main
from bookie.pipeline.cli_args import JOBS, build_parser
from bookie.pipeline.progress import StageProgress
from bookie.pipeline.report import significant, with_rates

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Runs the module as ``python -m`` does, in a process where ``import pyspark`` fails.
WITHOUT_PYSPARK = ("import runpy, sys; sys.modules['pyspark'] = None; "
                   "sys.argv[0] = 'bookie.pipeline'; "
                   "runpy.run_module('bookie.pipeline', run_name='__main__', alter_sys=True)")


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_each_jobs_help_lists_its_own_options_in_plain_text(capsys):
    subparsers = next(action for action in build_parser()._actions
                      if isinstance(action, argparse._SubParsersAction))
    flags = {name: {flag for action in parser._actions for flag in action.option_strings}
             for name, parser in subparsers.choices.items()}
    for name, parser in subparsers.choices.items():
        for action in parser._actions:
            assert action.help, f"{name} {action.option_strings or action.dest}: no help"
        text = _help([name, "--help"], capsys)
        assert "``" not in text
        for flag in flags[name]:
            assert flag in text
        others = set().union(*(f for job, f in flags.items() if job != name)) - flags[name]
        assert not [flag for flag in others if f" {flag} " in text or f"[{flag}" in text]
    assert "--journals" in flags["scrub"] and "--journals" not in flags["usage"]
    assert "--minor" in flags["usage"] and "--minor" not in flags["scrub"]


def test_top_level_help_lists_every_job_on_one_line(capsys):
    lines = _help(["--help"], capsys).splitlines()
    assert not [line for line in lines if "``" in line]
    for name, (summary, _) in JOBS.items():
        assert f"    {name}  " in "\n".join(lines)
        assert [line for line in lines if line.split()[:1] == [name] and summary in line]


def _without_pyspark(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_PYSPARK, *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_without_pyspark_a_run_ends_with_the_install_hint(tmp_path):
    ran = _without_pyspark("scrub", str(tmp_path))
    assert ran.returncode == 2, ran.stderr
    assert ran.stderr == "bookie.pipeline needs PySpark: pip install -e '.[pipeline]'\n"
    assert ran.stdout == ""
    # --help needs no Spark at all.
    helped = _without_pyspark("scrub", "--help")
    assert helped.returncode == 0 and "--journals" in helped.stdout


def test_rates_keep_three_significant_digits_and_never_read_zero():
    assert significant(0.012345) == 0.0123
    assert significant(12.345) == 12.3
    assert significant(1234.5) == 1234
    summary = with_rates("scrub", {"bytes": 2 << 20, "entries": 3}, 1000.0)
    assert summary["mibPerSecond"] == 0.002 and summary["entriesPerSecond"] == 0.003
    assert with_rates("usage", {"logs": 4}, 2.0)["logsPerSecond"] == 2


class _Lines:
    """A stream that keeps each line with the time it was written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> None:
        if text.strip():
            self.lines.append((time.monotonic(), text.strip()))

    def flush(self) -> None:
        pass


def test_progress_reports_stages_as_tasks_complete_at_most_once_a_second(spark):
    stream = _Lines()
    with StageProgress(spark, "work", stream=stream):
        # A workload of 8 tasks of ~0.4 s on local[2]: about 1.6 s of completions.
        spark.sparkContext.parallelize(range(8), 8).map(
            lambda x: time.sleep(0.4) or x).collect()  # noqa: sleep-ok (the work, not a wait)
    texts = [text for _, text in stream.lines]
    assert len(texts) >= 2, texts
    assert all(text.startswith("[work] ") and " tasks" in text for text in texts)
    assert texts[-1].endswith("8/8 tasks"), texts
    times = [at for at, _ in stream.lines[:-1]]  # the last line comes when the run ends
    assert all(b - a >= 0.95 for a, b in zip(times, times[1:])), stream.lines


def test_the_cli_prints_final_progress_entries_and_rates(spark, damaged_dir, capsys):
    assert main(["scrub", damaged_dir.root, "--master", "local[2]", "--json"]) == 1
    captured = capsys.readouterr()
    progress = [line for line in captured.err.splitlines() if line.startswith("[scrub] ")]
    assert progress, captured.err
    done, total = progress[-1].rsplit(": ", 1)[1].split()[0].split("/")
    assert done == total and int(total) > 0
    summary = json.loads(captured.out)["summary"]
    entries = sum(len(log.entries) for log in damaged_dir.logs)
    assert summary["entries"] == entries
    assert summary["entriesPerSecond"] > 0 and summary["mibPerSecond"] > 0
    assert main(["scrub", damaged_dir.root, "--master", "local[2]", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert "[scrub]" not in captured.err
    assert f"  entries: {entries}\n" in captured.out
    assert "  mibPerSecond: 0\n" not in captured.out
