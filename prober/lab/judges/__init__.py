"""Each judge holds one part of what the daemon measured against the truth: bounds, watches,
restarts, node losses, answered requests, pod logs, the printed and written outputs. Judges
read the infrastructure's truth and the scenarios' records; they start nothing."""
