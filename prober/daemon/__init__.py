"""The long-running prober: supervised tasks, scheduler, pipeline, metrics, HTTP endpoints,
event-log writer, logging. `main.run` is what `prober run` calls."""
