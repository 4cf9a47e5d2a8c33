#!/usr/bin/env bash
# Set up a fresh machine and run every test: the README's second command, and what CI runs.
#
#   bash scripts/test.sh [pytest args...]
#
# The tests run real components, never fakes: Java 17 (Spark, for the pipeline's tests),
# Debian's `zookeeper` (the cluster tests start a real ZooKeeper server), `promtool` and
# `prometheus` from Debian's `prometheus` (checks the shipped alert rules; runs the Pulsar
# chart's dashboards against real bookies) and `ldb` and `sst_dump` from Debian's
# `rocksdb-tools` (an older RocksDB than ours reads our index, as BookKeeper's must: issue 37,
# docs/formats.md §7). Each is installed with apt-get when
# missing; without root (or without apt-get) the script prints the exact command and exits 3
# before running anything, rather than letting tests fail one by one. Then it makes the venv
# (.venv), installs the project with its test and pipeline extras, and runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
java_major() { java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
    missing+=(openjdk-17-jre-headless)
fi
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || missing+=(prometheus)
{ command -v ldb && command -v sst_dump; } >/dev/null 2>&1 || missing+=(rocksdb-tools)

if [ ${#missing[@]} -gt 0 ]; then
    install="apt-get update -q && apt-get install -y -q --no-install-recommends ${missing[*]}"
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "scripts/test.sh: the tests need ${missing[*]}; install them as root with:" >&2
        echo "    $install" >&2
        exit 3
    fi
    echo "== installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
        # A release without openjdk-17 (newer Debian) has 21, which Spark 4 also runs on.
        alternative=("${missing[@]/openjdk-17-jre-headless/openjdk-21-jre-headless}")
        apt-get install -y -q --no-install-recommends "${alternative[@]}"
    fi
fi
echo "== python: $(python3 --version), cores: $(nproc)"
echo "== java: $(java -version 2>&1 | head -1)"
echo "== zookeeper: $(ls /usr/share/java/zookeeper.jar)"
echo "== promtool: $(promtool --version 2>&1 | head -1)"
echo "== ldb: $(ldb --version 2>&1 | head -1)"

python3 -m venv .venv
.venv/bin/pip install -q -e '.[test,pipeline]'
exec .venv/bin/python -m pytest "$@"
