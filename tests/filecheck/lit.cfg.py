"""lit configuration: every .mlir file here is a FileCheck test run through mrvl-opt."""

import os
import sys

import lit.formats

config.name = "mrvl"  # noqa: F821 - `config` is provided by lit
config.test_format = lit.formats.ShTest()  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["inputs"]  # noqa: F821
# The venv's tools (mrvl-opt, filecheck) first, whichever interpreter runs lit.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")  # noqa: F821
