#!/bin/sh
# Pulsar's bin/apply-config-from-env.py, for this project's image: BookKeeper keys from the
# environment into the properties files given (bookie/conf_from_env.py, CE1-CE5; docs/
# operations.md §8.1). A shell script under Pulsar's name: the chart calls it by path.
exec "${BK_PYTHON:-python3}" -m bookie.conf_from_env "$@"
