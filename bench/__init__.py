"""Benchmarks run side by side with the libraries users would pick instead."""
