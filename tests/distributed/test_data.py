"""Data sets: samples listed from file headers and read one at a time; every way a sample can
be wrong is a SampleError naming the file."""

from __future__ import annotations

import numpy as np
import pytest

from mrvl.distributed.data import (
    DataSetError,
    InputSpec,
    Preprocess,
    SampleError,
    read,
    samples,
)

ONE = [InputSpec("x", (1, 3, 4, 4))]
TWO = [InputSpec("a", (1, 2)), InputSpec("b", (1, 3))]


def test_npz_of_batches_for_one_input(tmp_path):
    path = tmp_path / "d.npz"
    first, second = np.arange(96, dtype=np.float32).reshape(2, 3, 4, 4), np.ones((1, 3, 4, 4))
    np.savez_compressed(path, first=first, second=second)
    refs = list(samples(path, ONE))
    assert [r.id for r in refs] == ["d.npz:first[0]", "d.npz:first[1]", "d.npz:second[0]"]
    assert np.array_equal(read(refs[1], ONE)["x"], first[1:2])
    assert read(refs[2], ONE)["x"].dtype == np.float32


def test_npz_keyed_by_input_names(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, a=np.zeros((4, 2), np.float32), b=np.ones((4, 3), np.float32))
    refs = list(samples(path, TWO))
    assert [r.id for r in refs] == [f"d.npz[{i}]" for i in range(4)]
    feeds = read(refs[3], TWO)
    assert feeds["a"].shape == (1, 2) and feeds["b"].shape == (1, 3)
    np.savez(path, a=np.zeros((4, 2), np.float32), b=np.ones((5, 3), np.float32))
    [bad] = samples(path, TWO)
    with pytest.raises(SampleError, match="differ in batch size"):
        read(bad, TWO)


def test_npy_is_memory_mapped_and_checked(tmp_path):
    path = tmp_path / "d.npy"
    np.save(path, np.zeros((3, 3, 4, 4), np.uint8))  # integers cast to a float input
    [ref, *_] = samples(path, ONE)
    assert read(ref, ONE)["x"].dtype == np.float32
    np.save(path, np.zeros((3, 3, 4, 4), np.float32))
    with pytest.raises(SampleError, match="d.npy\\[0\\]: dtype float32, input 'x' is int32"):
        read(ref, [InputSpec("x", (1, 3, 4, 4), "int32")])
    with pytest.raises(SampleError, match="a .npy feeds one input"):
        read(ref, TWO)


def test_bad_data_sets(tmp_path):
    with pytest.raises(DataSetError, match="no such file or folder"):
        list(samples(tmp_path / "none", ONE))
    with pytest.raises(DataSetError, match="no .npy, .npz, .png or .jpg files"):
        list(samples(tmp_path, ONE))
    (tmp_path / "x.csv").write_text("1,2")
    with pytest.raises(DataSetError, match="a .npy or .npz file, or a folder"):
        list(samples(tmp_path / "x.csv", ONE))


def test_preprocess_spec():
    spec = Preprocess.from_dict({"resize": 256, "mean": [0.485, 0.456, 0.406], "layout": "NHWC"})
    assert spec.mean == (0.485, 0.456, 0.406) and spec.layout == "NHWC"
    with pytest.raises(DataSetError, match="unknown field\\(s\\) crop"):
        Preprocess.from_dict({"crop": 224})
    with pytest.raises(DataSetError, match="layout must be NCHW or NHWC"):
        Preprocess.from_dict({"layout": "CHW"})


def test_image_resize_crop_normalize(tmp_path):
    from PIL import Image

    path = tmp_path / "i.png"
    Image.fromarray(np.full((8, 16, 3), 255, np.uint8)).save(path)
    [ref] = samples(tmp_path, ONE)
    pixels = read(ref, ONE, Preprocess(resize=4, mean=(0.5,), std=(0.5,)))["x"]
    assert pixels.shape == (1, 3, 4, 4) and np.allclose(pixels, 1.0)
    nhwc = [InputSpec("x", (1, 4, 4, 3))]
    assert read(ref, nhwc, Preprocess(layout="NHWC"))["x"].shape == (1, 4, 4, 3)
