"""Audit-log tailing and summarising: the server-side witness of late requests.

`summary.summarize` reads kube-apiserver audit logs (rotated, gzipped) and groups the requests
flagged late in graceful termination; `follow.Follower` follows a live log directory with the
same counting; `commands` holds the work behind `prober audit summarize|follow`.
"""
