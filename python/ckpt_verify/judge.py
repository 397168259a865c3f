"""Runs `ckpt-verify judge` on a report and reads its verdicts back from
summary.json. The verdict logic lives in C; this module only finds the
binary, runs it and parses what it wrote."""
import json
import os
import shutil
import subprocess

from .errors import JudgeError

_HERE = os.path.dirname(os.path.abspath(__file__))
# The judge `pip install` puts into the package (cmake/install_wheel.cmake).
_PACKAGE_BINARY = os.path.join(_HERE, "bin", "ckpt-verify")
# A project build's judges: the torch-free one first (it starts in
# milliseconds), then the full command.
_TREE_BINARIES = tuple(os.path.normpath(os.path.join(_HERE, "..", "..", "build", name))
                       for name in ("ckpt-verify-judge", "ckpt-verify"))


def find_judge(explicit: str | None = None) -> str | None:
    """The ckpt-verify binary that judges reports: the argument,
    $CKPT_VERIFY, the package's own (a pip-installed ckpt_verify), the
    tree's build/ (ckpt-verify-judge, then ckpt-verify), then PATH. None
    when there is none."""
    for candidate in (explicit, os.environ.get("CKPT_VERIFY")):
        if candidate:
            return candidate
    for candidate in (_PACKAGE_BINARY, *_TREE_BINARIES):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("ckpt-verify")


class Verdict:
    """One judged run, as summary.json records it. str() and repr() give
    the verdict, the verdicts that were expected and the reason's first
    line; a twin that was not judged (`judged` false: its run's own verdict
    explains it) shows "n/j" there, its measured verdict kept in .verdict."""

    def __init__(self, record: dict):
        self.run = record.get("impl", "")
        self.verdict = record.get("verdict", "")
        self.expected = bool(record.get("expected", False))
        # What the judge expected of the run ("PASS|NOISE", "FAIL", ...);
        # None in a summary written before the judge recorded it.
        self.expected_verdicts = record.get("expected_verdicts")
        self.judged = bool(record.get("judged", True))
        self.reason = record.get("reason", "")
        self.first_divergence = record.get("first_divergence", "")
        # The verdict's distance from the baseline in scaled ULP (ULPs of the
        # dtype at each tensor's max |x|), as the table shows it: None where
        # none was measured, inf where it has no ULP distance; and, labelled
        # raw, the element-wise max ULP (None: infinite).
        scaled = record.get("max_scaled_ulp", float("nan"))
        self.max_scaled_ulp = float("inf") if scaled is None else None if scaled != scaled else scaled
        self.raw_max_ulp = record.get("raw_max_ulp")
        self.record = record
        self.traceback = None  # an ERROR run's full traceback, from the report

    @property
    def detail(self) -> str:
        """The reason, then (for a run that raised) the full traceback."""
        return self.reason + (f"\n{self.traceback}" if self.traceback else "")

    @property
    def shown(self) -> str:
        """The verdict column's word: the verdict, or "n/j" for a twin not judged."""
        return self.verdict if self.judged else "n/j"

    def summary(self, whole_reason: bool = False) -> str:
        """'<verdict> (<expectation>): <the reason's first line>' (or all of
        it), e.g. "PASS (UNEXPECTED, expected FAIL): bitwise identical to ..."."""
        if not self.judged:
            expectation = "not judged"
        else:
            wanted = f"expected {self.expected_verdicts}" if self.expected_verdicts else ""
            expectation = (wanted or "as expected") if self.expected else \
                "UNEXPECTED" + (f", {wanted}" if wanted else "")
        first = self.reason if whole_reason else self.reason.split("\n", 1)[0]
        return f"{self.shown} ({expectation}): {first}" if first else f"{self.shown} ({expectation})"

    def __str__(self) -> str:
        return f"{self.run}: {self.summary()}"

    def __repr__(self) -> str:
        return f"Verdict({self.run}: {self.summary()})"


def parse_summary(path: str, case: str) -> dict[str, "Verdict"]:
    """{run: Verdict} of `case` in a summary.json written by the judge."""
    try:
        with open(path, encoding="utf-8") as f:
            root = json.load(f)
    except (OSError, ValueError) as e:
        raise JudgeError(f"{path}: cannot read the judge's summary ({e})") from e
    records = root.get("records") if isinstance(root, dict) else None
    if not isinstance(records, list):
        raise JudgeError(f"{path}: no \"records\" array")
    verdicts = {}
    for rec in records:
        if not isinstance(rec, dict) or rec.get("case") != case:
            continue
        v = Verdict(rec)
        if v.run == "*":  # the whole case failed to be judged
            raise JudgeError(f"{path}: case {case}: {v.verdict}: {v.reason}")
        verdicts[v.run] = v
    if not verdicts:
        raise JudgeError(f"{path}: no verdicts for case {case}")
    return verdicts


def judge(binary: str | None, report: str, out_dir: str, case: str) -> tuple[dict[str, "Verdict"], int, str]:
    """Runs `binary judge --out out_dir report`. Returns (verdicts, exit
    code, the judge's table). Exit 0 and 1 carry verdicts; 2 (the file was
    refused) and 3 (internal) raise JudgeError with the judge's words."""
    if not binary:
        raise JudgeError("ckpt-verify not found: build the tree (cmake --build build), put ckpt-verify on PATH "
                         "or set CKPT_VERIFY; the report was written to " + report)
    cmd = [binary, "judge", "--out", out_dir, report]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        raise JudgeError(f"cannot run {binary}: {e}") from e
    if p.returncode not in (0, 1):
        raise JudgeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stdout.strip()}")
    verdicts = parse_summary(os.path.join(out_dir, "summary.json"), case)
    return verdicts, p.returncode, p.stdout


def attach_tracebacks(verdicts: dict[str, "Verdict"], report: str) -> None:
    """Sets .traceback of each verdict whose run recorded one (the
    `traceback` attribute of /runs/<run>, written for a run that raised)."""
    import h5py

    from .schema import attr_text
    with h5py.File(report, "r") as f:
        for run, v in verdicts.items():
            text = f.get(f"runs/{run}")
            if text is not None and "traceback" in text.attrs:
                v.traceback = attr_text(text.attrs["traceback"])
