"""mrvl-opt: xDSL's opt driver with the mrvl dialects and passes registered.

mrvl-opt in.mlir -p 'mrvl-cast-fp16,convert-mrvl-to-sched{num-tiles=2}' --print-debuginfo
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from mrvl.errors import MrvlError


class MrvlOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        from mrvl.dialects.mlip import Mlip
        from mrvl.dialects.mrvl import Mrvl
        from mrvl.dialects.sched import Sched

        for dialect in (Mrvl, Sched, Mlip):
            self.ctx.register_dialect(dialect.name, lambda d=dialect: d)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from mrvl.passes import ALL_PASSES

        for name, loader in ALL_PASSES.items():
            self.register_pass(name, loader)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the driver; malformed IR, a failed verifier or a pass error is reported as a
    diagnostic (with its location) and exit status 1, not a Python traceback."""
    try:
        MrvlOptMain(args=argv).run()
    except (ParseError, DiagnosticException, VerifyException, MrvlError) as err:
        print(f"mrvl-opt: error: {err}", file=sys.stderr)
        for note in getattr(err, "__notes__", ()):  # the offending op, marked in context
            print(note, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
