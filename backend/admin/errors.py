"""The one failure the admin commands report: a line for the operator, never a traceback."""

from __future__ import annotations


class AdminError(Exception):
    """Why a backup or a restore cannot go on, in words an operator can act on."""
