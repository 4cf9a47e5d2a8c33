"""Fixtures for the ``bookie shell`` tests: a data dir written by real bookies (made once per
session, copied for each test that changes it)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.shell.shell_support import make_bookie_data_dir


@pytest.fixture(scope="session")
def bookie_data_dir_master(tmp_path_factory) -> str:
    """Generated once; never modified (tests copy it)."""
    path = os.path.join(str(tmp_path_factory.mktemp("shell-master")), "data")
    make_bookie_data_dir(path)
    return path


@pytest.fixture
def bookie_data_dir(bookie_data_dir_master, tmp_path) -> str:
    """A private copy of the generated data dir, free to damage."""
    path = os.path.join(str(tmp_path), "data")
    shutil.copytree(bookie_data_dir_master, path)
    return path
