"""Beside the stages: origin's files, so that CI's tools read the prober's results."""
