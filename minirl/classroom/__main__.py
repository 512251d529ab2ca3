"""``python -m minirl.classroom``: see :mod:`minirl.classroom.cli`."""
import sys

from .cli import main

sys.exit(main())
