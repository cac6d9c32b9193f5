"""mrvl-opt: xDSL's opt driver with the mrvl dialects and passes registered.

mrvl-opt in.mlir -p 'mrvl-cast-fp16,convert-mrvl-to-sched{num-tiles=2}' --print-debuginfo
mrvl-opt --list-mrvl-passes      # mrvl's pipeline, in order, one line per pass

Every failure a user can cause (a missing file, an unknown pass or option, malformed or
elided IR, a failed verifier, a pass error) ends with one `mrvl-opt: error:` line (plus the
offending op in context, when there is one) and exit status 1, never a traceback. So does any
other exception inside mrvl-opt (a MemoryError, a RecursionError on deep nesting, a
struct.error): its line names the input file and the pass that was running, or parsing.
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
        format_help = arg_parser.format_help

        def format_help_with_passes() -> str:
            # The list imports every pass (TVM with the int8 ones): only --help pays for it.
            arg_parser.epilog = (
                mrvl_passes_text() + "\n\n(--list-mrvl-passes prints this list alone; the "
                "passes listed under -p above also include all of xDSL's.)\n"
            )
            return format_help()

        arg_parser.format_help = format_help_with_passes

    stage = "parsing"
    """What the driver is doing, for the error line of an unexpected exception."""

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0):
        from mrvl.dialects.dense_size import oversized_dense
        from mrvl.printing import check_not_elided

        data = chunk.read()
        text = data.decode(errors="replace")
        check_not_elided(text, self.get_input_name())
        if (huge := oversized_dense(text)) is not None:
            raise MrvlError(f"{self.get_input_name()}: {huge}")
        self.stage = "parsing"
        return super().parse_chunk(io.BytesIO(data), file_extension, start_offset)

    def setup_pipeline(self) -> None:
        super().setup_pipeline()
        verify_between = self.pipeline.callback

        def callback(previous, module, next_pass) -> None:
            after = f" after pass {previous.name}" if previous is not None else ""
            self.stage = f"verifying the IR{after}"
            verify_between(previous, module, next_pass)
            if next_pass is not None:
                self.stage = f"pass {next_pass.name}"

        self.pipeline = dataclasses.replace(self.pipeline, callback=callback)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the driver; see the module docstring for what becomes an error line."""
    driver = None
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
        notes = getattr(err, "__notes__", ())  # the offending op, marked in context
        if notes or isinstance(err, (ParseError, MrvlError)) or driver is None:
            _fail(str(err), notes)
        # a verifier that failed outside any op (an attribute built while parsing)
        _fail(f"{driver.get_input_name()}: while {driver.stage}: {err}")
    except OSError as err:  # the input or output file
        _fail(f"{err.strerror}: '{err.filename}'" if err.filename else str(err))
    except ValueError as err:  # an unknown file extension; a value out of its type's range
        where = f"{driver.get_input_name()}: while {driver.stage}: " if driver else ""
        _fail(f"{where}{err}")
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as err:  # noqa: BLE001 - anything else is still one error line
        where = driver.get_input_name() if driver is not None else "mrvl-opt"
        stage = driver.stage if driver is not None else "starting"
        detail = {RecursionError: "the IR is nested too deeply", MemoryError: "out of memory"}
        what = detail.get(type(err)) or f"{type(err).__name__}: {err}"
        _fail(f"{where}: while {stage}: {what}")


def _fail(message: str, notes: Sequence[str] = ()) -> None:
    print(f"mrvl-opt: error: {message}", file=sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
