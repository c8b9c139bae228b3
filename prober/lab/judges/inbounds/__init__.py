"""The lab's judge of what the product shows: every estimate an output of a run prints, held
within the bound it prints with it, read back as a reader sees it (`text`: the printed
tables, `page`: report.html, `outputs`: every file, `run`: a lab run's, its own with them).
These read the product's outputs with the product's own words; they are oracles, so they
live with the lab's judges, not in the product that writes the outputs."""
