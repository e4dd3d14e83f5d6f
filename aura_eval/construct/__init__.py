"""Benchmark construction: seeds, step tags and prefixes, variations, pairs and the release."""
