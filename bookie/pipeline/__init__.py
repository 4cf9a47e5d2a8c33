"""The PySpark pipeline over a bookie's files (docs/design.md §8). Importing this package imports
nothing: pyspark and pyarrow load only with its modules, and only here (docs/design.md §5)."""
