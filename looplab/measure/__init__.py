"""Measurement: the caps doc, the benchmarks, real-model sessions, the price table, the release check.

`looplab caps` and `looplab bench` run the first two; `python -m looplab.measure COMMAND` runs the rest.
"""
