"""Turn event logs into decisions: summaries, JUnit verdicts, thresholds, recommendations, HTML.

Everything here reads files other tools wrote and replays them through the same core trackers
as the daemon, so `prober analyze` and the live daemon give the same answer. Bad input raises
`BadInput` with one line naming the file and the problem; the command layer prints it.
"""
