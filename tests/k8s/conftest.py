from tests.support.fixtures import certs, tls_server, token_file

__all__ = ["certs", "tls_server", "token_file"]
