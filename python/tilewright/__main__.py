"""``python -m tilewright``: the command-line tools (tilewright.cli)."""
import sys

from .cli import main

sys.exit(main())
