"""How a command ends: its exit codes, and the user error that ends it with EXIT_USAGE.

Light on purpose (no import beyond the standard library): the command line reads these before
it knows which command runs, and a command that measures nothing must start fast."""

from __future__ import annotations

__all__ = ["EXIT_FAIL_FINDING", "EXIT_OK", "EXIT_RUN_ERROR", "EXIT_USAGE", "ConfigError"]

EXIT_OK = 0
"""No ``fail`` finding."""
EXIT_FAIL_FINDING = 1
"""Some ``fail`` finding."""
EXIT_USAGE = 2
"""Bad usage or configuration: nothing ran."""
EXIT_RUN_ERROR = 3
"""The run failed or was interrupted; what finished is kept."""


class ConfigError(ValueError):
    """A user mistake in the suite, a config file or an override."""
