"""Stage 1: the logs read and each run replayed through the core trackers."""
