"""The second kind of stream: watches. Its kind (`kind`: client-go's reflector loop per LB x
protocol, and the heartbeat writer) and its part of the pipeline (`feed`). It imports
nothing of the request kind (an import-linter independence contract)."""
