"""``python -m jaxcal.cli``: the ``jaxcal`` console script."""

import sys

from jaxcal.cli._main import main

if __name__ == "__main__":
    sys.exit(main())
