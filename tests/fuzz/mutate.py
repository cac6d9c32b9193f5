"""Mutation fuzzing of compiled model binaries: does validation keep every engine safe?

A mutant is a compiled binary with one or two instruction fields (or header words: tile,
signal, waits) changed to a boundary value, with the checksum recomputed (`binary.encode` with
`legal=False`). Each mutant runs on both engines, each in a forked child with an address-space
limit (`resource.setrlimit`) and a timeout. The property (docs/isa.md §2, DESIGN §7): both
engines refuse it with the same one-line `MrvlError`, or both give the same output bytes, in
peak memory within 2x the unmutated program's on that engine (plus a small allowance).

`scripts/mutate_binaries.py` runs the long campaign; `test_mutants.py` a bounded one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import random
import resource
import select
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mrvl import binary
from mrvl.errors import MrvlError
from mrvl.isa import OPCODE_BY_NAME, Instruction, Program
from mrvl.target import get_target

ENGINES = ("interp", "numba")
TIMEOUT_S = 60.0
"""A run longer than this is a hang."""
ADDRESS_SPACE_BYTES = 3 << 30
"""A child may map this much more than the warm parent it was forked from."""
RSS_SLACK_BYTES = 48 << 20
"""Peak RSS growth allowed on top of 2x the unmutated program's (the first touch of a few
buffers: small programs grow by a few MiB only)."""


def boundary_values(program: Program) -> list[int]:
    """0, -1, 2**31 - 1, the sizes of the memories, and +-1 around each."""
    machine = get_target(program.target)
    sizes = [0, 1, 2**31 - 1, -(2**31), machine.ocm_bytes_per_tile, program.ddr_size, 1 << 16]
    values = {v + d for v in sizes for d in (-1, 0, 1)}
    return sorted(v for v in values if -(2**31) <= v < 2**31)


@dataclass(frozen=True)
class Mutation:
    index: int
    """Instruction index."""
    field: str
    """A field name, or `tile`, `signal`, `waits` of the header."""
    element: int | None
    value: int

    def __str__(self) -> str:
        at = "" if self.element is None else f"[{self.element}]"
        return f"#{self.index}.{self.field}{at}={self.value}"


def _fields_of(ins: Instruction) -> list[tuple[str, int | None]]:
    spec = OPCODE_BY_NAME[ins.opcode]
    out: list[tuple[str, int | None]] = [("tile", None), ("signal", None), ("waits", None)]
    for f in spec.fields:
        if f.kind == "f32":
            continue
        out += [(f.name, e) for e in range(f.length)] if f.length > 1 else [(f.name, None)]
    return out


def draw_mutation(program: Program, rng: random.Random, values: list[int]) -> Mutation:
    """A mutation of an instruction chosen by opcode first (so that compute instructions are
    drawn as often as the many DMAs), then a field, then a value: a boundary value, or the
    field's own value +-1 or +-small."""
    by_opcode: dict[str, list[int]] = {}
    for i, ins in enumerate(program.code):
        if ins.opcode != "end":
            by_opcode.setdefault(ins.opcode, []).append(i)
    opcode = rng.choice(sorted(by_opcode))
    index = rng.choice(by_opcode[opcode])
    ins = program.code[index]
    name, element = rng.choice(_fields_of(ins))
    current = _current(ins, name, element)
    if rng.random() < 0.6:
        value = rng.choice(values)
    else:
        value = current + rng.choice((-1, 1, -2, 2, rng.randint(-64, 64), current))
    return Mutation(index, name, element, value)


def _current(ins: Instruction, name: str, element: int | None) -> int:
    if name == "tile":
        return ins.tile
    if name == "signal":
        return ins.signal
    if name == "waits":
        return ins.waits[0] if ins.waits else 0
    value = ins.fields[name]
    return int(value[element] if element is not None else value)


def apply(program: Program, mutations: list[Mutation]) -> Program:
    """A copy of `program` with the mutations made."""
    code = list(program.code)
    for m in mutations:
        ins = code[m.index]
        if m.field == "tile":
            ins = dataclasses.replace(ins, tile=m.value)
        elif m.field == "signal":
            ins = dataclasses.replace(ins, signal=m.value)
        elif m.field == "waits":
            waits = (m.value, *ins.waits[1:]) if ins.waits else (m.value,)
            ins = dataclasses.replace(ins, waits=waits)
        else:
            fields = dict(ins.fields)
            if m.element is None:
                fields[m.field] = m.value
            else:
                items = list(fields[m.field])
                items[m.element] = m.value
                fields[m.field] = tuple(items)
            ins = dataclasses.replace(ins, fields=fields)
        code[m.index] = ins
    return dataclasses.replace(program, code=code)


def mutants(
    seed: bytes, rng: random.Random, count: int, two_field_share: float = 0.5
) -> Iterator[tuple[str, bytes]]:
    """`count` encodable mutants of the binary `seed`: (description, bytes). A value that the
    binary format cannot carry (a tile above 255, a negative token) is drawn again."""
    program = binary.decode(seed)
    values = boundary_values(program)
    made = 0
    while made < count:
        changes = [draw_mutation(program, rng, values)]
        if rng.random() < two_field_share:
            changes.append(draw_mutation(program, rng, values))
        try:
            data = binary.encode(apply(program, changes), legal=False)
        except binary.BinaryFormatError:
            continue
        made += 1
        yield " ".join(map(str, changes)), data


# ------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    kind: str
    """`ok` (outputs in `detail` as a sha256), `error` (the one-line message), `dirty` (an
    error that is not one clean line: a traceback or a non-mrvl exception), `hang`, `crash`."""
    detail: str
    rss_growth: int
    """Peak RSS of the child above its RSS when forked, in bytes."""
    seconds: float


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _child(data: bytes, inputs: list[np.ndarray], engine: str | None) -> Outcome:
    """One run of `data` on `engine`, or with None its validation alone (`ok` when valid)."""
    import warnings

    from mrvl.sim import prepare, run

    start = _rss_bytes()
    began = time.perf_counter()
    try:
        if engine is None:
            prepare(data)
            return Outcome("ok", "valid", 0, time.perf_counter() - began)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs = run(data, inputs, engine=engine)
        digest = hashlib.sha256(b"".join(np.ascontiguousarray(o).tobytes() for o in outputs))
        kind, detail = "ok", digest.hexdigest()
    except MrvlError as e:
        message = str(e)
        kind, detail = ("error" if "\n" not in message else "dirty"), message
    except BaseException as e:  # noqa: BLE001 - the finding itself
        kind, detail = "dirty", f"{type(e).__name__}: {e}"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return Outcome(kind, detail, max(0, peak - start), time.perf_counter() - began)


def run_isolated(
    data: bytes, inputs: list[np.ndarray], engine: str | None, timeout: float = TIMEOUT_S
) -> Outcome:
    """Run `data` on `engine` (None: validate it only) in a forked child limited to ADDRESS_SPACE_BYTES more address
    space than this process and `timeout` seconds. Forking keeps the parent's warm Numba
    kernels, so a run costs milliseconds of set-up, not an import."""
    read_fd, write_fd = os.pipe()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        try:
            limit = _vm_bytes() + ADDRESS_SPACE_BYTES
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            outcome = _child(data, inputs, engine)
            payload = pickle.dumps(outcome)
        except BaseException as e:  # noqa: BLE001
            payload = pickle.dumps(Outcome("crash", f"{type(e).__name__}: {e}", 0, 0.0))
        with os.fdopen(write_fd, "wb") as w:
            w.write(payload)
        os._exit(0)
    os.close(write_fd)
    chunks = []
    deadline = began + timeout
    with os.fdopen(read_fd, "rb") as r:
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return Outcome("hang", f"no result in {timeout:.0f} s", 0, timeout)
            ready, _, _ = select.select([r], [], [], left)
            if ready:
                chunk = os.read(r.fileno(), 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return Outcome("crash", f"child died (wait status {status})", 0, 0.0)
    return pickle.loads(b"".join(chunks))


@dataclass(frozen=True)
class Verdict:
    description: str
    outcomes: dict[str, Outcome]
    problem: str | None
    """None when the property holds, else what broke it."""


def judge(description: str, outcomes: dict[str, Outcome], baseline: dict[str, int]) -> Verdict:
    """The property over one mutant's outcomes on every engine; `baseline` is the unmutated
    program's RSS growth per engine."""
    problem = None
    kinds = {o.kind for o in outcomes.values()}
    bad = kinds & {"dirty", "hang", "crash"}
    if bad:
        engine, o = next((e, o) for e, o in outcomes.items() if o.kind in bad)
        problem = f"{o.kind} on {engine}: {o.detail.splitlines()[-1] if o.detail else ''}"
    elif len(kinds) > 1 or len({o.detail for o in outcomes.values()}) > 1:
        shown = "; ".join(f"{e}: {o.kind} {o.detail[:100]}" for e, o in outcomes.items())
        problem = f"engines disagree: {shown}"
    else:
        for engine, o in outcomes.items():
            allowed = 2 * baseline[engine] + RSS_SLACK_BYTES
            if o.rss_growth > allowed:
                problem = f"peak RSS on {engine} grew {o.rss_growth >> 20} MiB (> {allowed >> 20})"
                break
    return Verdict(description, outcomes, problem)


def program_inputs(data: bytes, seed: int = 0) -> list[np.ndarray]:
    program = binary.decode(data)
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(e.shape).astype(np.float32) for e in program.inputs]


def warm(data: bytes) -> None:
    """Compile the Numba kernels in this process before forking (each child would otherwise
    compile or load them itself)."""
    from mrvl.sim import run

    run(data, program_inputs(data), engine="numba")


def baseline_growth(data: bytes, inputs: list[np.ndarray]) -> dict[str, int]:
    outcomes = {e: run_isolated(data, inputs, e) for e in ENGINES}
    for engine, o in outcomes.items():
        if o.kind != "ok":
            raise RuntimeError(f"the unmutated program fails on {engine}: {o.detail}")
    return {e: o.rss_growth for e, o in outcomes.items()}


def judged_runs(mutant: bytes, inputs: list[np.ndarray], timeout: float) -> dict[str, Outcome]:
    """The outcome on each engine. Every engine runs the same validation first (`sim.run`), so
    a mutant that a child's validation refuses with one clean line is refused alike by both
    and is run no further; any other is run on each engine in its own child."""
    checked = run_isolated(mutant, inputs, None, timeout)
    if checked.kind == "error":
        return dict.fromkeys(ENGINES, checked)
    return {e: run_isolated(mutant, inputs, e, timeout) for e in ENGINES}


def compiled_regions(model, num_tiles: int, mcpu: str = "cn10ka") -> list[tuple[str, bytes]]:
    """(symbol, binary) of every MLIP region of an ONNX model."""
    from tvm import relax

    import mrvl
    from mrvl.compiler import compile_region

    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(model), mcpu=mcpu, num_tiles=num_tiles)
    regions = []
    for gv, func in mod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) and func.attrs else {}
        if str(attrs.get("Codegen", "")) != "mrvl":
            continue
        func = func.with_attr("global_symbol", gv.name_hint)
        region = compile_region(func, mcpu=mcpu, num_tiles=num_tiles)
        regions.append((region.symbol, region.binary))
    return regions


def campaign(
    seeds: list[tuple[str, bytes]],
    count: int,
    rng: random.Random,
    log=None,
    timeout: float = TIMEOUT_S,
) -> list[Verdict]:
    """`count` mutants of `seeds` ((name, binary)), taken from each seed in turn (so that a
    campaign stopped early has covered every seed alike), each judged on both engines;
    `log(verdict, seed_name, mutant)` is called after each."""
    prepared = []
    for name, data in seeds:
        inputs = program_inputs(data)
        warm(data)
        prepared.append((name, inputs, baseline_growth(data, inputs), mutants(data, rng, count)))
    verdicts = []
    for k in range(count):
        name, inputs, baseline, source = prepared[k % len(prepared)]
        description, mutant = next(source)
        verdict = judge(description, judged_runs(mutant, inputs, timeout), baseline)
        verdicts.append(verdict)
        if log is not None:
            log(verdict, name, mutant)
    return verdicts
