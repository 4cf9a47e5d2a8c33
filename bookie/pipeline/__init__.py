"""The PySpark pipeline over a bookie's files (DESIGN.md §8). Importing this package imports
nothing: pyspark and pyarrow load only with its modules, and only here (DESIGN.md §5)."""
