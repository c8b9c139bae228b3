"""The pure measurement core: models, header parsing, trackers, statistics, event-log codec.

Nothing here does I/O or reads a clock: time arrives on the samples. The live daemon and
`prober analyze` feed the same trackers, which is why they give the same answers.
"""
