"""pravega-ray's benchmarks, run from the repository root as ``python -m benchmarks.<name>``
(``make bench`` and the other ``bench-*`` targets; docs/benchmarks.md). What they share is in
:mod:`benchmarks.common`. Importing any of these modules starts nothing."""
