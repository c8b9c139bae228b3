"""Stage 4: junit.xml and report.html written, the run told in words."""
