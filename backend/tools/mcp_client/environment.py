"""A stdio MCP server's environment: fixed by us, with the admin's secrets by safe names.

A secret becomes an environment variable of the program. Its name must be UPPER_SNAKE
and must not be one that changes how a program finds or loads code (`PYTHONPATH`,
`LD_PRELOAD`, `NODE_OPTIONS`, …), where it writes (`HOME`, `TMPDIR`) or how a shell
reads its start-up (`BASH_ENV`, `ENV`, `IFS`): with those, an admin's token would run
code of its choosing as the server's user. The names are checked when an admin gives
them and again each time the program starts (rows stored before the rule are held to it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

SECRET_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
PROGRAM_PATH = "/usr/local/bin:/usr/bin:/bin"
# The SDK adds these of the server's own environment; the program is started without them.
INHERITED = ("LOGNAME", "SHELL", "TERM", "USER")

# Names that load code, choose where it comes from or where the program writes.
_REFUSED_NAMES = frozenset(
    {
        "PATH", "HOME", "TMPDIR", "TMP", "TEMP", "LANG", "LANGUAGE", "IFS", "SHELL",
        "BASH_ENV", "ENV", "CDPATH", "PS4", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE",
        "PROMPT_COMMAND", "PERL5LIB", "PERL5OPT", "PERLLIB", "PERL5DB", "RUBYOPT",
        "RUBYLIB", "CLASSPATH", "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "GCONV_PATH",
        "LOCPATH", "NLSPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "OPENSSL_CONF",
        "OPENSSL_MODULES", "OPENSSL_ENGINES", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "VIRTUAL_ENV", "TZDIR", "TERMINFO", "LOGNAME", "USER", "TERM", "GOFLAGS",
        "GOPATH", "GOROOT", "GOENV", "GOTOOLCHAIN", "GOPROXY", "TCLLIBPATH", "RUSTC",
        "RUSTC_WRAPPER", "RUSTFLAGS", "RUSTDOCFLAGS",
    }
)  # fmt: skip
_REFUSED_PREFIXES = (
    "PYTHON", "LD_", "DYLD_", "NODE_", "NPM_CONFIG_", "PERL", "RUBY", "GEM_", "BUNDLE_",
    "JAVA_", "JDK_", "LC_", "XDG_", "GCONV_", "MALLOC_", "GLIBC_", "BASH_", "GIT_",
    "UV_", "PIP_", "CONDA_", "LUA_", "DENO_", "BUN_", "ELECTRON_", "GIO_", "GTK_", "QT_",
    "R_", "TCL_", "TK_", "CARGO_", "RUSTUP_",
)  # fmt: skip


def refused_secret_name(name: str) -> str | None:
    """Why `name` may not be a stdio server's environment variable, or None if it may."""
    if not SECRET_NAME.match(name):
        return (
            f"the secret name {name!r} is not allowed for a stdio server: its environment "
            "variables are UPPER_SNAKE (A-Z, 0-9, _), starting with a letter"
        )
    if name in _REFUSED_NAMES or name.startswith(_REFUSED_PREFIXES):
        return (
            f"the secret name {name!r} is not allowed for a stdio server: the server sets "
            "it, or it changes how a program loads code or where it writes"
        )
    return None


class RefusedSecret(ValueError):
    """A stored secret's name that the rule refuses; the message names it."""


def program_environment(secrets: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """The program's whole environment, besides `INHERITED` (which the start removes):
    a fixed PATH, HOME and TMPDIR in its scratch folder, LANG, and the secrets."""
    for name in secrets:
        why = refused_secret_name(name)
        if why is not None:
            raise RefusedSecret(f"{why}; an admin must remove it")
    fixed = {"PATH": PROGRAM_PATH, "HOME": str(scratch), "TMPDIR": str(scratch)}
    return {**secrets, **fixed, "LANG": "C.UTF-8"}
