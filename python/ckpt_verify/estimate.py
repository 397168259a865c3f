"""What a verify() will need, from the model's shapes alone, before any
training: the report's size (worst case: every run differs from
baseline_0 and is re-run noise_runs times, each step's gradients and
buffers and the final parameters stored anew; best case: every run is
bitwise baseline_0, so only baseline_0 is stored and the others are links)
and the host memory the training holds at once (the model, its gradients,
its buffers, and one tensor of baseline_0 read back to compare with;
activations come on top and are not known before a step runs).

A run that cannot fit the memory limit (memory.memory_limit():
CKPT_MEMORY_LIMIT, else MemAvailable) is refused with one line saying what
it needs and what is there."""
from dataclasses import dataclass

import torch

from .errors import BadInput
from .memory import memory_limit


def _bytes(text_bytes: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if text_bytes >= size:
            return f"{text_bytes / size:.1f} {unit}"
    return f"{int(text_bytes)} B"


@dataclass
class Estimate:
    params: int          # parameters (count)
    param_bytes: int     # bytes of the parameters (= of their gradients)
    buffer_bytes: int
    largest_bytes: int   # the largest parameter or buffer
    steps: int
    runs_best: int       # runs trained when every run is bitwise baseline_0
    runs_worst: int      # ... when every run differs and is re-run
    on_host: bool        # the model lives in host memory (device cpu)

    @property
    def run_bytes(self) -> int:
        """One run's tensors: every step's gradients and buffers, the final
        parameters (losses and checks are a few bytes)."""
        return self.param_bytes * (self.steps + 1) + self.buffer_bytes * self.steps

    @property
    def report_worst(self) -> int:
        return self.run_bytes * self.runs_worst + self.param_bytes

    @property
    def report_best(self) -> int:
        return self.run_bytes + self.param_bytes

    @property
    def ram_bytes(self) -> int:
        """Host bytes held at once, activations not counted."""
        if self.on_host:
            return 2 * self.param_bytes + self.buffer_bytes + self.largest_bytes
        return 2 * self.largest_bytes  # a copy to the host and the tensor read back

    def line(self) -> str:
        return (f"ckpt_verify: {self.params / 1e6:.1f} M parameters ({_bytes(self.param_bytes)}), {self.steps} "
                f"steps: report {_bytes(self.report_best)} if every run is bitwise baseline_0 "
                f"({self.runs_best} runs), at most {_bytes(self.report_worst)} ({self.runs_worst} runs); "
                f"host memory {_bytes(self.ram_bytes)} plus activations")


def estimate(model: torch.nn.Module, steps: int, runs: int, noise_runs: int, device: torch.device) -> Estimate:
    """The estimate for `runs` runs (not counting baselines) of `model`."""
    params = list(model.parameters())
    buffers = [b for b in model.buffers() if b is not None]
    sizes = [t.numel() * t.element_size() for t in params + buffers] or [0]
    return Estimate(params=sum(p.numel() for p in params),
                    param_bytes=sum(p.numel() * p.element_size() for p in params),
                    buffer_bytes=sum(b.numel() * b.element_size() for b in buffers),
                    largest_bytes=max(sizes), steps=steps, runs_best=2 + runs,
                    runs_worst=(2 + noise_runs) + runs * (1 + noise_runs),
                    on_host=torch.device(device).type == "cpu")


def check_fits(est: Estimate, held: int = 0) -> None:
    """BadInput, in one line, when the training cannot fit the memory limit.
    `held`: bytes this process holds now that the training will free first
    (the model built to take these sizes), which MemAvailable does not count
    as available."""
    try:
        limit, source = memory_limit()
    except ValueError as e:
        raise BadInput(str(e)) from e
    if limit is not None and source != "CKPT_MEMORY_LIMIT":
        limit += held
    if limit is not None and est.ram_bytes > limit:
        what = ("the model, its gradients and buffers, and one tensor read back"
                if est.on_host else "a tensor's host copy and one tensor read back")
        raise BadInput(f"verify() needs at least {_bytes(est.ram_bytes)} of host memory ({what}; activations "
                       f"come on top), more than the {_bytes(limit)} {source}; nothing run")
