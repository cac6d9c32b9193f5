"""Printing IR for people: large constants elided, as MLIR's
`--mlir-elide-elementsattrs-if-larger` does.

A region's weights make one line of megabytes in every stage. The eliding printer writes a
constant with more than `elide_larger_than` elements as MLIR writes an elided one,
`dense_resource<__elided__> : tensor<...>`: the type stays, the values go. Such text is for
reading only; `check_not_elided` (which `mrvl-opt` runs on its input) rejects it with a clear
message instead of a confusing verifier error later.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp
from xdsl.ir import Attribute
from xdsl.printer import Printer

from mrvl.errors import MrvlError

ELIDED = "dense_resource<__elided__>"
"""How an elided constant prints (MLIR's spelling)."""

DEFAULT_ELIDE_LARGER_THAN = 16
"""`mrvlc`'s default: constants with more elements are elided in `--emit` and `--dump-dir`."""


class ElidedIRError(MrvlError):
    """Text with elided constants was given where full IR is needed."""


@dataclass(eq=False, repr=False)
class ElidingPrinter(Printer):
    """xDSL's printer, writing dense constants above `elide_larger_than` elements as elided."""

    elide_larger_than: int | None = None
    elided: int = 0
    """How many constants this printer has elided."""

    def print_attribute(self, attribute: Attribute) -> None:
        if (
            self.elide_larger_than is not None
            and isinstance(attribute, DenseIntOrFPElementsAttr)
            and math.prod(attribute.get_type().get_shape()) > self.elide_larger_than
        ):
            self.elided += 1
            self.print_string(f"{ELIDED} : ")
            self.print_attribute(attribute.get_type())
            return
        super().print_attribute(attribute)


def print_ir(module: ModuleOp, debuginfo: bool = True, elide_larger_than: int | None = None) -> str:
    """The module as text, with locations; constants above `elide_larger_than` elided, and
    then a first comment line says so."""
    out = io.StringIO()
    printer = ElidingPrinter(
        stream=out, print_debuginfo=debuginfo, elide_larger_than=elide_larger_than
    )
    printer.print_op(module)
    out.write("\n")
    if not printer.elided:
        return out.getvalue()
    return (
        f"// {printer.elided} constants of more than {elide_larger_than} elements elided: "
        f"for reading only (`mrvlc --full-constants` prints them)\n" + out.getvalue()
    )


def check_not_elided(text: str, source: str = "<input>") -> None:
    """Raise `ElidedIRError` naming the first line of `text` with an elided constant."""
    match = re.search(re.escape(ELIDED), text)
    if match is None:
        return
    line = text.count("\n", 0, match.start()) + 1
    raise ElidedIRError(
        f"{source}:{line}: this IR was printed with its large constants elided "
        f"({ELIDED}) and cannot be compiled; print it with `mrvlc --full-constants`"
    )
