"""The ``judgecal`` commands, one module per command or command group (``judgecal.cli`` builds
the root group from them and holds the entry point); :mod:`judgecal._cli.common` holds what
several commands share: the consoles, the context object, JSON output and shared options."""
