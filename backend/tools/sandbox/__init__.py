"""The OS sandbox that LLM-written code runs in."""

from backend.tools.sandbox.availability import SandboxStatus, resolve_sandbox

__all__ = ["SandboxStatus", "resolve_sandbox"]
