"""Evaluation: the one scorer, run reports, `toolkit eval` and `toolkit compare`."""
