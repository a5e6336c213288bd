"""``python -m judgecal``."""

from judgecal.cli import main

main()
