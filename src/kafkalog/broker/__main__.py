"""``python -m kafkalog.broker``: the same as ``kafkalog broker``."""

import sys

from . import main

sys.exit(main())
