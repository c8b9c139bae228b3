"""The long-running prober: supervised tasks, scheduler, pipeline, metrics, HTTP endpoints,
event-log writer, logging. `commands.run_command` is what `prober run` calls; it runs
`app.Daemon.run` (docs/ARCHITECTURE.md, section 2)."""
