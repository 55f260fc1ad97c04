"""Measurement: the caps doc, the benchmarks, real-model sessions, the price table."""
