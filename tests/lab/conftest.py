"""The fake apiservers' fixtures (`tests.support.apiservers`), for every test here."""

from tests.support.apiservers import base_options, certs, etcd, start_server, token_file

__all__ = ["base_options", "certs", "etcd", "start_server", "token_file"]
