#!/usr/bin/env bash
# Every pipeline job through spark-submit against a Spark standalone master and worker on
# 127.0.0.1, checked like the tests check them (tests/pipeline/cluster_check.py).
#
#   bash scripts/demo/spark_cluster_demo.sh [--local-venv]
#
# 1. generates a small data dir with known damage, a live-ledger list and an index export
#    with two planted mismatches (python -m tests.pipeline.datagen);
# 2. ships the executors' Python with venv-pack + --archives (docs/pipeline.md): a fresh
#    venv with `pip install .` (venv-pack refuses editable installs) and the native deps.
#    --local-venv skips that and points the executors at this checkout's .venv and source,
#    which works only because the worker runs on this machine;
# 3. starts a master and a worker (bin/spark-class of the pyspark package: its sbin has no
#    start-master.sh), on 127.0.0.1 only, on free ports;
# 4. runs scrub, usage, export and index-check with spark-submit bookie/pipeline/__main__.py,
#    checks each exit code and result;
# 5. stops the worker and the master by PID (also on failure, via trap).
# Bounded: every wait has a deadline, and the whole run is killed after DEMO_TIMEOUT_S.
set -euo pipefail
DEMO_TIMEOUT_S=${DEMO_TIMEOUT_S:-900}
if [[ -z "${DEMO_UNDER_TIMEOUT:-}" ]]; then
    # The whole run is bounded; TERM at the deadline reaches the trap below.
    DEMO_UNDER_TIMEOUT=1 exec timeout --kill-after=60 "$DEMO_TIMEOUT_S" bash "$0" "$@"
fi
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
USE_VENV_PACK=1
[[ "${1:-}" == "--local-venv" ]] && USE_VENV_PACK=0

SPARK_HOME=$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_NO_DAEMONIZE=1
WORK=$(mktemp -d /tmp/spark-cluster-demo.XXXXXX)
PIDS=()

cleanup() {
    local status=$?
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    [[ $status -eq 0 ]] && rm -rf "$WORK" || echo "kept $WORK for inspection"
    exit $status
}
trap cleanup EXIT
trap 'echo "demo: stopped (timeout or signal)" >&2; exit 143' TERM INT

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            echo "demo: $what not ready after the deadline" >&2
            return 1
        fi
        sleep 0.5
    done
}

echo "== data: $WORK"
"$PY" -m tests.pipeline.datagen "$WORK"

# --local-venv: this checkout on the executors' PYTHONPATH (its .venv need not install it).
ARCHIVE_ARGS=(--conf "spark.executorEnv.PYTHONPATH=$ROOT")
EXECUTOR_PY=$PY
if ((USE_VENV_PACK)); then
    echo "== venv-pack: executors' Python environment"
    python_base=$("$PY" -c 'import sys; print(sys.base_prefix)')/bin/python3
    "$python_base" -m venv "$WORK/packenv"
    # pyspark itself is not packed: executors put Spark's own pyspark.zip on PYTHONPATH.
    "$WORK/packenv/bin/pip" install -q venv-pack 'pandas<3' 'pyarrow>=18' numpy
    "$WORK/packenv/bin/pip" install -q "$ROOT"
    "$WORK/packenv/bin/venv-pack" -q -p "$WORK/packenv" -o "$WORK/env.tar.gz"
    ls -l "$WORK/env.tar.gz"
    ARCHIVE_ARGS=(--archives "$WORK/env.tar.gz#env" --conf spark.pyspark.python=./env/bin/python)
    EXECUTOR_PY=./env/bin/python
    # Python Data Sources are planned by a Python process on the driver, started with the
    # same spark.pyspark.python: in client mode ./env must exist in the driver's cwd too.
    mkdir "$WORK/env"
    tar -xzf "$WORK/env.tar.gz" -C "$WORK/env"
fi

MASTER_PORT=$(free_port)
MASTER_UI=$(free_port)
WORKER_UI=$(free_port)
MASTER=spark://127.0.0.1:$MASTER_PORT
echo "== master $MASTER, worker 2 cores"
"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 \
    --port "$MASTER_PORT" --webui-port "$MASTER_UI" >"$WORK/master.log" 2>&1 &
PIDS+=($!)
master_json() {
    "$PY" -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
        "http://127.0.0.1:$MASTER_UI/json/"
}
wait_for 120 "master" master_json
"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "$MASTER" \
    --host 127.0.0.1 --cores 2 --memory 2g --webui-port "$WORKER_UI" \
    --work-dir "$WORK/worker" >"$WORK/worker.log" 2>&1 &
PIDS+=($!)
alive_worker() { master_json | grep -q '"aliveworkers" *: *1'; }
wait_for 120 "worker" alive_worker

submit() {  # submit JOB EXPECTED_EXIT ARGS...
    local job=$1 expected=$2 status=0
    shift 2
    echo "== spark-submit $job"
    (cd "$WORK" && PYSPARK_PYTHON=$EXECUTOR_PY PYSPARK_DRIVER_PYTHON=$PY PYTHONPATH=$ROOT \
        timeout 600 "$SPARK_HOME/bin/spark-submit" --master "$MASTER" \
        --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
        --conf spark.ui.enabled=false --conf spark.pyspark.driver.python="$PY" \
        --conf spark.executor.memory=1g "${ARCHIVE_ARGS[@]}" \
        "$ROOT/bookie/pipeline/__main__.py" "$job" "$WORK/data" --json "$@") \
        >"$WORK/$job.json" 2>"$WORK/$job.log" || status=$?
    if [[ $status -ne $expected ]]; then
        echo "demo: $job exited $status, expected $expected; see $WORK/$job.log" >&2
        tail -20 "$WORK/$job.log" >&2
        return 1
    fi
    "$PY" -m tests.pipeline.cluster_check "$job" "$WORK" "$WORK/$job.json"
}

started=$SECONDS
submit scrub 1 --out "$WORK/out"
submit usage 0 --out "$WORK/out" --live-ledgers "$WORK/live.txt"
submit export 0 --out "$WORK/out"
submit index-check 1 --index "$WORK/index.jsonl"
shipped=$([[ $USE_VENV_PACK == 1 ]] && echo "venv-pack archive" || echo "local .venv")
echo "== all jobs passed on the standalone cluster in $((SECONDS - started)) s" \
     "(executors' Python: $shipped)"
