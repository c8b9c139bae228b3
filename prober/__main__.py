import sys

from prober.cli import main

sys.exit(main())
