"""What a verification returns (verify(), the JAX frontend's
verify_jax()): the C judge's verdicts as a read-only mapping {run name:
verdict string} whose truth is `.ok`. No torch: every frontend returns it."""
import os
from collections.abc import Iterator, Mapping
from typing import Any

from .judge import Verdict


class Report(Mapping):
    """What verify() returns: a read-only mapping {run name: verdict string}
    ("PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR"), true when every verdict
    is the expected one (`.ok`), with where the report and the judge's
    outputs are and what was not measured. `.verdicts` holds the full
    Verdict records (reason, first divergence)."""

    def __init__(self, path: str, judge_dir: str, verdicts: dict[str, Verdict], exit_code: int, table: str,
                 skipped: dict[str, str], memory_source: str, estimate: Any = None):
        self.path, self.judge_dir, self.verdicts = path, judge_dir, verdicts
        self.exit_code, self.table, self.skipped, self.memory_source = exit_code, table, skipped, memory_source
        self.estimate = estimate  # estimate.Estimate made before training (report size, host memory), or None

    def __getitem__(self, run: str) -> str:
        return self.verdicts[run].verdict

    def __iter__(self) -> Iterator[str]:
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    def __bool__(self) -> bool:
        return self.ok

    @property
    def ok(self) -> bool:
        """Every verdict was the expected one."""
        return all(v.expected for v in self.verdicts.values())

    @property
    def html(self) -> str | None:
        """The judge's page of this report (report.html in judge_dir: the
        verdicts, each run's first divergence and per-tensor distances, the
        plots), or None where the judge could not write it."""
        page = os.path.join(self.judge_dir, "report.html")
        return page if os.path.isfile(page) else None

    def unexpected(self) -> list[Verdict]:
        return [v for v in self.verdicts.values() if not v.expected]

    def __repr__(self) -> str:
        runs = ", ".join(f"{run!r}: {v.summary()}" for run, v in self.verdicts.items())
        return f"<Report ok={self.ok} {{{runs}}} path={self.path!r}>"

    def __str__(self) -> str:
        lines = [f"{v.run}: {v.summary(whole_reason=True)}" for v in self.verdicts.values()]
        lines += [f"{name}: skipped: {why}" for name, why in self.skipped.items()]
        lines.append(f"memory: {self.memory_source}")
        lines.append(f"report: {self.path}")
        if self.html:
            lines.append(f"page: {self.html}")
        return "\n".join(lines)
