import sys

from .train import main

sys.exit(main(prog="python -m minirl"))
