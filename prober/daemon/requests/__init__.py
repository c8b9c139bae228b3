"""The first kind of stream: requests. Its kind (`kind`), its part of the pipeline
(`samples`), its ticks (`scheduler`, `pacer`), its witness bursts (`bursts`) and the direct
path's `/readyz` (`readyz`). It imports nothing of the watch kind (an import-linter
independence contract)."""
