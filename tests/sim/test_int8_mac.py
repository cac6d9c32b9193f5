"""The Numba engine's int8 block `qmac_tile` (sim/engines/numba/int8_mac.py) gives the exact
int32 sums (modulo 2^32) on each of its paths, all built and run on this machine: the VNNI
ones where the CPU has them, AVX2's, and the generic one every other target compiles, which
the engine never takes here. And the path is chosen from the CPU's features as LLVM names them."""

from __future__ import annotations

import llvmlite.binding
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from mrvl.sim.engines.numba.int8_mac import (
    QMAC_CHANNELS,
    QMAC_GROUP,
    QMAC_PATH,
    QMAC_PATHS,
    QMAC_PIXELS,
    QMAC_TILES,
    QMAC_WINDOWS,
    cpu_features,
    qmac_path,
)

HOST = llvmlite.binding.get_host_cpu_features()


def _runner(tile):
    @njit(cache=False)
    def run(x, bases, taps, groups, w, w_off, starts, starts_at, out, out_at):
        tile(x, bases, taps, taps.size, groups, w, w_off, starts, starts_at, out, out_at)

    return run


def _runnable(path: str) -> bool:
    """Whether this CPU executes `path`'s instructions."""
    if path == "avx512vnni":
        return bool(HOST.get("avx512vnni") and HOST.get("avx512bw"))
    if path == "avxvnni":
        return bool(HOST.get("avxvnni") or (HOST.get("avx512vnni") and HOST.get("avx512vl")))
    if path == "avx2":
        return bool(HOST.get("avx2"))
    return True


RUNNERS = {path: _runner(tile) for path, tile in QMAC_TILES.items()}


def _expected(x, bases, taps, groups, w, w_off, first):
    """The block's int32 sums from `first` by numpy in int64, wrapped."""
    weights = w[w_off:].astype(np.int64)
    sums = np.tile(first, (QMAC_PIXELS, 1))
    for p in range(QMAC_PIXELS):
        for s, tap in enumerate(taps):
            at = int(bases[p] + tap)
            inputs = x[at : at + groups * QMAC_GROUP].astype(np.int64).reshape(groups, QMAC_GROUP)
            block = weights[s * groups * QMAC_CHANNELS * QMAC_GROUP :]
            block = block[: groups * QMAC_CHANNELS * QMAC_GROUP]
            sums[p] += np.einsum("ge,gce->c", inputs, block.reshape(groups, QMAC_CHANNELS, 4))
    return sums.astype(np.uint32).view(np.int32)  # modulo 2^32


@pytest.mark.parametrize("path", QMAC_PATHS)
@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    segments=st.integers(1, 4),
    groups=st.integers(1, 40),
    extreme=st.sampled_from(["random", "max", "min"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_each_qmac_path_gives_the_exact_int32_sums(path, segments, groups, extreme, seed):
    """Bytes 0-255 times weights -128..127 at random offsets, or all at the extremes (255 x
    -128 and 255 x 127, the largest products), over enough groups that the sums leave int16,
    from random int32 starts; every path equals numpy's sums modulo 2^32."""
    if not _runnable(path):
        pytest.skip(f"this CPU has no {path}")
    rng = np.random.default_rng(seed)
    span = segments * groups * QMAC_GROUP
    taps = rng.integers(0, span // QMAC_GROUP + 1, segments).astype(np.int64) * QMAC_GROUP
    bases = rng.integers(0, 64, QMAC_PIXELS).astype(np.int64) * QMAC_GROUP
    reach = int(bases.max() + taps.max() + groups * QMAC_GROUP)  # every read inside x
    x = rng.integers(0, 256, reach).astype(QMAC_WINDOWS[path])
    w_off = int(rng.integers(0, 64))
    w = rng.integers(-128, 128, w_off + segments * groups * QMAC_CHANNELS * QMAC_GROUP)
    w = w.astype(np.int8)
    if extreme != "random":
        x[:] = 255
        w[:] = -128 if extreme == "min" else 127
    out_at = rng.permutation(QMAC_PIXELS).astype(np.int64) * QMAC_CHANNELS
    out = np.full(QMAC_PIXELS * QMAC_CHANNELS, 7, np.int32)
    starts_at = int(rng.integers(0, 16))
    starts = rng.integers(-(2**31), 2**31, starts_at + QMAC_CHANNELS).astype(np.int32)
    RUNNERS[path](x, bases, taps, groups, w, w_off, starts, starts_at, out, out_at)
    first = starts[starts_at : starts_at + QMAC_CHANNELS].astype(np.int64)
    expected = _expected(x, bases, taps, groups, w, w_off, first)
    got = out.reshape(QMAC_PIXELS, QMAC_CHANNELS)[out_at // QMAC_CHANNELS]
    np.testing.assert_array_equal(got, expected)


def test_a_large_sum_wraps_modulo_2_32_on_every_path():
    """255 x 127 over 2^16 + 1 groups of four passes 2^31: each path wraps as int32 addition
    does (VPDPBUSD, not the saturating VPDPBUSDS)."""
    groups = (1 << 16) + 1
    x = np.full(groups * QMAC_GROUP + 4 * 64, 255, np.uint8)
    w = np.full(groups * QMAC_CHANNELS * QMAC_GROUP, 127, np.int8)
    bases = np.zeros(QMAC_PIXELS, np.int64)
    out_at = np.arange(QMAC_PIXELS, dtype=np.int64) * QMAC_CHANNELS
    taps = np.zeros(1, np.int64)
    exact = groups * QMAC_GROUP * 255 * 127
    assert exact > 2**31 - 1
    wrapped = np.array([exact]).astype(np.uint32).view(np.int32)[0]
    for path, run in RUNNERS.items():
        if not _runnable(path):
            continue
        out = np.zeros(QMAC_PIXELS * QMAC_CHANNELS, np.int32)
        window = x.astype(QMAC_WINDOWS[path])
        run(window, bases, taps, groups, w, 0, np.zeros(QMAC_CHANNELS, np.int32), 0, out, out_at)
        assert (out == wrapped).all(), path


@pytest.mark.parametrize(
    "features, path",
    [
        ("+avx2,+avx512f,+avx512bw,+avx512vl,+avx512vnni,+avxvnni", "avx512vnni"),
        ("+avx2,+avx512f,+avx512bw,-avx512vnni,+avxvnni", "avxvnni"),
        ("+avx2,+avx512f,+avx512vl,+avx512vnni,-avx512bw", "avxvnni"),
        ("+avx2,+avx512f,+avx512bw,-avx512vnni,-avxvnni", "avx2"),
        ("+avx2,+fma,-avx512f,-avxvnni", "avx2"),
        ("+sse4.2,-avx,-avx2", "generic"),
        ("+neon,+dotprod", "generic"),
        ("", "generic"),
    ],
)
def test_the_path_follows_the_cpu_features(features, path):
    assert qmac_path(features) == path


def test_this_machine_takes_the_path_of_its_own_features():
    assert QMAC_PATH == qmac_path(cpu_features())
    assert _runnable(QMAC_PATH)


def test_the_features_follow_numbas_settings(monkeypatch):
    """$NUMBA_CPU_FEATURES (config.CPU_FEATURES) replaces the host's features, and
    $NUMBA_ENABLE_AVX=0 (config.ENABLE_AVX) turns every AVX feature off, as Numba compiles:
    no VNNI instruction is then emitted."""
    from numba.core import config

    monkeypatch.setattr(config, "CPU_FEATURES", "+sse4.2,+avxvnni")
    assert qmac_path(cpu_features()) == "avxvnni"
    monkeypatch.setattr(config, "CPU_FEATURES", None)
    monkeypatch.setattr(config, "ENABLE_AVX", False)
    features = cpu_features()
    assert not any(name.startswith("+avx") for name in features.split(","))
    assert qmac_path(features) == "generic"
