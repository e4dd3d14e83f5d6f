"""Evaluation: the action-only subset, rollouts, the judge panel and its labels, judge reliability, human validation."""
