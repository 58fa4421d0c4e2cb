"""``python -m iket_cli``."""

from iket_cli.cli import main

main()
