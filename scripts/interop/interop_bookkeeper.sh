#!/usr/bin/env bash
# Apache BookKeeper's own tools against this project's bookies (issue 28; a real run, not CI).
#   BOOKKEEPER_LAUNCHER=/opt/bookkeeper/bin/bookkeeper scripts/interop/interop_bookkeeper.sh [--steps 1,3] [--tls]
# The launcher is BookKeeper's: a `bk` wrapper (`bk class NAME` runs a class) or a distribution's bin/bookkeeper.
# Steps and checks (and --tls, mutual TLS on every bookie): scripts/interop/interop_bookkeeper.py's docstring.
# Exit 0 when every check passed.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
exec "$python" "$here/scripts/interop/interop_bookkeeper.py" "$@"
