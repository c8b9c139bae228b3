"""Settings and fixtures every test shares: the test TLS server, its certificates and a
token file (`tests/support/fixtures.py`), and how Hypothesis draws.

Hypothesis draws its examples from a fixed seed unless HYPOTHESIS_PROFILE=explore: `make test`
must give the same verdict on every run of the same tree, and twice a CI run failed on an
example no earlier run had drawn. `make fuzz` explores with fresh random examples, many more
of them; what it finds becomes an example test beside the property.
"""

from __future__ import annotations

import os

from hypothesis import settings

from tests.support.fixtures import certs, tls_server, token_file
from tests.support.logcapture import log_output

__all__ = ["certs", "log_output", "tls_server", "token_file"]

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", max_examples=2000, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
