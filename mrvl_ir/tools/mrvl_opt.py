"""mrvl-opt: xDSL's opt driver with the mrvl dialects and passes registered.

mrvl-opt in.mlir -p 'mrvl-cast-fp16,convert-mrvl-to-sched{num-tiles=2}' --print-debuginfo
mrvl-opt --list-mrvl-passes      # mrvl's pipeline, in order, one line per pass

Every failure a user can cause (a missing file, an unknown pass or option, malformed or
elided IR, a failed verifier, a pass error) ends with one `mrvl-opt: error:` line (plus the
offending op in context, when there is one) and exit status 1, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from mrvl.errors import MrvlError


def mrvl_passes_text() -> str:
    """mrvl's default pipeline, stage by stage and in order: each pass, its options, and the
    first line of its docstring."""
    from mrvl.passes import ALL_PASSES, GRAPH_PIPELINE, ISA_PIPELINE, SCHED_PIPELINE

    rows = []
    for stage, names in (
        ("graph (mrvl)", GRAPH_PIPELINE),
        ("schedule (sched)", SCHED_PIPELINE),
        ("ISA (mlip)", ISA_PIPELINE),
    ):
        rows.append((stage, None))
        for name in names:
            cls = ALL_PASSES[name]()
            options = [f.name.replace("_", "-") for f in dataclasses.fields(cls)]
            spelled = name + ("{" + ",".join(f"{o}=..." for o in options) + "}" if options else "")
            doc = sys.modules[cls.__module__].__doc__ or ""
            summary = doc.strip().splitlines()[0].removeprefix(f"{name}:").strip() if doc else ""
            rows.append((spelled, summary))
    width = max(len(spelled) for spelled, summary in rows if summary is not None)
    lines = ["mrvl passes, in the order compile_region runs them:"]
    for spelled, summary in rows:
        lines.append(f"  {spelled}" if summary is None else f"    {spelled:<{width}}  {summary}")
    return "\n".join(lines)


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

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.prog = "mrvl-opt"
        arg_parser.add_argument(
            "--list-mrvl-passes",
            action="store_true",
            help="list mrvl's own pipeline and passes, in order, and exit",
        )
        arg_parser.formatter_class = argparse.RawDescriptionHelpFormatter
        arg_parser.epilog = (
            mrvl_passes_text() + "\n\n(--list-mrvl-passes prints this list alone; the "
            "passes listed under -p above also include all of xDSL's.)\n"
        )

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0):
        from mrvl.printing import check_not_elided

        data = chunk.read()
        check_not_elided(data.decode(errors="replace"), self.get_input_name())
        return super().parse_chunk(io.BytesIO(data), file_extension, start_offset)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the driver; see the module docstring for what becomes an error line."""
    try:
        try:
            driver = MrvlOptMain(
                description="xDSL's opt driver with mrvl's dialects (mrvl, sched, mlip) and "
                "passes; mrvl's pipeline is listed at the end",
                args=argv,
            )
        except ValueError as err:  # xDSL's word for an unknown pass or a bad option value
            _fail(f"pass pipeline: {err}")
        if driver.args.list_mrvl_passes:
            print(mrvl_passes_text())
            return
        driver.run()
    except (ParseError, DiagnosticException, VerifyException, MrvlError) as err:
        _fail(str(err), getattr(err, "__notes__", ()))  # the offending op, marked in context
    except OSError as err:  # the input or output file
        _fail(f"{err.strerror}: '{err.filename}'" if err.filename else str(err))
    except ValueError as err:  # xDSL's word for an unknown file extension
        _fail(str(err))


def _fail(message: str, notes: Sequence[str] = ()) -> None:
    print(f"mrvl-opt: error: {message}", file=sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
