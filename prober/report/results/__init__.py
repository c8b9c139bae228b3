"""Stage 2: what a run measured: its summary and its sections, its watch streams."""
