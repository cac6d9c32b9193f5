"""Dense literals too large to parse, found from their type alone (issue 19).

xDSL expands a splat (`dense<1.0> : tensor<100000x100000xf32>`) to every element while it
parses it, so a huge one is a MemoryError before any verifier could look at its size. The
`mrvl.constant` parser and `mrvl-opt` ask `oversized_dense` first.
"""

from __future__ import annotations

import re
from math import prod

MAX_DENSE_BYTES = 1 << 31
"""No dense literal is larger (every target's DDR is smaller): refused before it is parsed."""

_DENSE_LITERAL = re.compile(r"dense<[^>]*>\s*:\s*tensor<((?:\d+x)+)[a-z]*?(\d+)>")


def oversized_dense(text: str, pos: int | None = None) -> str | None:
    """Why the dense literal at `pos` of `text` (or the first one anywhere, with None) is too
    large to parse, or None. Read from its type alone: xDSL would expand a splat to every
    element before anything could check its size (a MemoryError, issue 19)."""
    matches = (
        [_DENSE_LITERAL.match(text, pos)] if pos is not None else _DENSE_LITERAL.finditer(text)
    )
    for m in matches:
        if m is None:
            continue
        count = prod(int(d) for d in m.group(1).split("x") if d)
        nbytes = count * ((int(m.group(2)) + 7) // 8)
        if nbytes > MAX_DENSE_BYTES:
            line = text.count("\n", 0, m.start()) + 1
            return (
                f"line {line}: a dense literal of {count} elements ({nbytes} bytes) is larger "
                f"than any target's DDR; mrvl refuses it before parsing"
            )
    return None
