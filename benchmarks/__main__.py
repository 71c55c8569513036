"""``python -m benchmarks [--quick] [--only NAME] [--tools LIST] [--out FILE]``"""

import sys

from .runner import main

sys.exit(main())
