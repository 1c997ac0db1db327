"""Benchmarks and reports: tables, JSON and plots over many runs."""
