"""``python -m judgecal``."""

from judgecal.entry import main

main()
