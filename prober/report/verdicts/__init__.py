"""Stage 3: every test judged against the history, with its cause."""
