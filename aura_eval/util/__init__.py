"""Shared helpers: sorted atomic JSONL, statistics, samples, prompt files, table files and the rows behind each table cell."""
