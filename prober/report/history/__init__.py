"""Beside the stages: the runs' history (thresholds, regression, warehouse rows), which
the verdicts judge against."""
