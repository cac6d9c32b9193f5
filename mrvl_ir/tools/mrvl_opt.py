"""mrvl-opt: xDSL's opt driver with the mrvl dialects and passes registered.

    mrvl-opt in.mlir -p 'mrvl-cast-fp16,convert-mrvl-to-sched{num-tiles=2}' --print-debuginfo
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain


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
    MrvlOptMain(args=argv).run()


if __name__ == "__main__":
    main()
