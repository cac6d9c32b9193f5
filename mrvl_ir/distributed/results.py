"""Where an evaluation's rows go: a JSONL file appended batch by batch, or a Parquet file.

JSONL is its own journal: each finished batch is appended and flushed, so a run killed at any
point leaves every finished row on disk, and `resume` reads them back (dropping a last line
cut short by the kill). A Parquet file is written whole, with its footer, when the run
finishes; until then the rows go to a JSONL journal beside it (`NAME.parquet.partial.jsonl`),
so a killed Parquet run resumes exactly as a JSONL one does. Resuming a finished Parquet file
reads its rows and writes them again with the new ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def is_parquet(path: Path) -> bool:
    return path.suffix.lower() == ".parquet"


def journal_of(path: Path) -> Path:
    """The JSONL file that holds a Parquet output's rows while the run lasts."""
    return path.with_name(path.name + ".partial.jsonl") if is_parquet(path) else path


def _read_jsonl(path: Path) -> list[Row]:
    """The rows of a JSONL file; a last line cut short by a kill is dropped from the file."""
    rows: list[Row] = []
    if not path.exists():
        return rows
    good = 0
    with open(path, "rb") as f:
        for line in f:
            try:
                row = json.loads(line)
                row["id"]
            except (ValueError, KeyError, TypeError):
                break
            rows.append(row)
            good += len(line)
    with open(path, "rb+") as f:
        f.truncate(good)
    return rows


def _read_parquet(path: Path) -> list[Row]:
    import pyarrow.parquet as pq

    if not path.exists():
        return []
    return pq.read_table(path).to_pylist()


def _write_parquet(path: Path, rows: list[Row]) -> None:
    """All rows at once: every column's type is inferred over all of them (a column that is
    None in the first rows, e.g. `error`, still gets the type of its later values)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = dict.fromkeys(key for row in rows for key in row)
    table = pa.table({key: [row.get(key) for row in rows] for key in columns})
    partial = path.with_name(path.name + ".writing")
    pq.write_table(table, partial)
    partial.replace(path)  # a reader never sees half a file


class ResultsFile:
    """The rows of one evaluation on disk. Made, it has read what a resumed run already has
    (`done`); `start` opens it for the new rows, once the model has compiled."""

    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.journal = journal_of(path)
        self.parquet = is_parquet(path)
        self.resume = resume
        self.earlier: list[Row] = []
        """Rows of a finished Parquet file that a resumed run writes again at the end."""
        journaled: list[Row] = []
        if resume:
            if self.parquet:
                self.earlier = _read_parquet(path)
            journaled = _read_jsonl(self.journal)
        self.done = self._unique(self.earlier + journaled)
        self._out = None

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.parquet and not self.resume:
            self.path.unlink(missing_ok=True)  # no stale file beside a new run's journal
        self._out = open(self.journal, "a" if self.resume else "w", encoding="utf-8")  # noqa: SIM115

    @staticmethod
    def _unique(rows: Iterable[Row]) -> list[Row]:
        seen: dict[str, Row] = {}
        for row in rows:
            seen.setdefault(row["id"], row)
        return list(seen.values())

    def write(self, rows: list[Row]) -> None:
        self._out.write("".join(json.dumps(row) + "\n" for row in rows))
        self._out.flush()

    def close(self, finished: bool) -> None:
        """Close the journal; a finished Parquet run writes the file and drops its journal."""
        if self._out is None:
            return
        self._out.close()
        if not (finished and self.parquet):
            return
        rows = self._unique(self.earlier + _read_jsonl(self.journal))
        _write_parquet(self.path, rows)
        self.journal.unlink()
