"""Defaults that the jobs and the CLI share, importable without pyspark: the CLI parses
(and answers ``--help``) before it imports Spark."""

#: BookKeeper's defaults: minorCompactionThreshold 0.2, majorCompactionThreshold 0.8.
MINOR_THRESHOLD = 0.2
MAJOR_THRESHOLD = 0.8
