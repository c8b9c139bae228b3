"""What every command shares, written once: exit codes, logging set-up, the status/metrics
HTTP server, the clock, value parsers for flags and config, event-log segment files.

A layer of its own just above `prober.core` (import-linter keeps it there), so that a fix
made here reaches the daemon, the lab, the reports and the audit commands alike.
"""
