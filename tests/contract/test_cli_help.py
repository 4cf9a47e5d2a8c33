"""Every flag and positional of the shell commands has a help text (issue 54). A parser is
added with one line in PARSERS: a name and a function building it without side effects."""

from __future__ import annotations

import argparse
import importlib

import pytest

PARSERS = {
    "bookie ledger": "api.client.cli_parser:build_parser",
    "bookie shell": "bookie.shell:build_parser",
    "bookie cluster": "api.cluster.cli:build_parser",
    "python -m bookie.pipeline": "bookie.pipeline.cli_args:build_parser",
    "bookie": "bookie.cli:build_parser",
}


def _walk(parser: argparse.ArgumentParser, path: str):
    """(where, what) of every argument or subcommand without help. A flag ``--help`` hides
    (``bookie serve``'s less common settings) counts by the help ``--help-all`` shows."""
    held = {id(action): text for holder in parser._actions
            for action, text in getattr(holder, "hidden", ())}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not (helps.get(name) or "").strip():
                    yield path, f"command {name}"
                yield from _walk(sub, f"{path} {name}")
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            text = held.get(id(action), action.help)
            if not (text or "").strip() or text == argparse.SUPPRESS:
                yield path, "/".join(action.option_strings) or action.dest


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_every_argument_has_help(name):
    module, function = PARSERS[name].split(":")
    parser = getattr(importlib.import_module(module), function)()
    missing = [f"{where}: {what}" for where, what in _walk(parser, name)]
    assert not missing, "arguments without help: " + "; ".join(missing)
