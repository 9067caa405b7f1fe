"""Text for a terminal: what the ``kgmem`` command prints, with control sequences made visible.

Documents, titles, answers and memories are outside text. Printed raw, an ``ESC ]52;`` sequence
in a title writes the reader's clipboard, ``ESC [2J`` clears the screen, a C1 ``CSI`` (U+009B)
does the same on terminals that take 8-bit controls, a carriage return overwrites what the line
showed, and bidirectional overrides reorder it. :func:`printable` writes every such character as
its escape (``\\x1b``, ``\\x9b``, ``\\u202e``), so the text is still all there but nothing in it
reaches the terminal as a command; :func:`echo` is the one print every CLI command uses.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional embeddings, overrides
# and isolates (U+202A-U+202E, U+2066-U+2069) that reorder a line on screen
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every terminal control character (C0 but tab and newline, DEL, C1, bidi
    overrides) written as its visible escape; lone surrogates as ``\\udcxx`` too, so writing the
    result never fails on a UTF-8 terminal."""
    text = _UNSAFE.sub(_escape, text)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def echo(*parts: Any, file: IO[str] | None = None, sep: str = " ") -> None:
    """``print`` for the CLI: the parts joined by ``sep``, made :func:`printable`, one line."""
    print(printable(sep.join(str(p) for p in parts)), file=file if file is not None else sys.stdout)
