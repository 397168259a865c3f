"""The recompute probe: proves a baseline plain by what it does, not by
what its checkpoint is called. A user's checkpoint may be an
autograd.Function, a saved-tensor hook or a wrapper applied inside
model_fn under any name; whatever it is, it shows in one of two ways while
one forward and backward run under this probe:

  - an op runs inside the autograd engine's backward with grad mode on.
    The engine runs a plain backward with grad mode off (no create_graph);
    grad mode on there is a forward being run again: a recompute (torch's
    reentrant and non-reentrant checkpoints both recompute under
    enable_grad, and so must any checkpoint whose recompute is differentiated);
  - saved-tensor default hooks are set while a forward op runs: the
    forward hands its saved tensors to someone (a non-reentrant checkpoint,
    or an offload to the CPU) instead of keeping them.

The probe is a TorchDispatchMode: every op passes through it unchanged, so
the step computes what it computes without it. It watches only the
unrecorded warm-up step, so no recorded time or byte includes it."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _saved_tensor_hooks_active() -> bool:
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)
    # The memory map's own hooks (frontends/memory_map.py) only note who
    # saves what and hand every tensor back: they are not the step's.
    return top is not None and not getattr(top[0], "_ckpt_verify_memory_map", False)


class RecomputeProbe(TorchDispatchMode):
    """Enter around a step's forward; call backward_starts() just before
    the backward call (after its initial gradient is made); finding() then
    says what was seen ("" when the step ran plainly)."""

    def __init__(self):
        super().__init__()
        self.in_backward = False
        self.recomputed: list[str] = []      # ops run with grad mode on inside backward
        self.hooked: list[str] = []          # forward ops run with saved-tensor hooks set

    def backward_starts(self) -> None:
        self.in_backward = True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.in_backward:
            if torch.is_grad_enabled():
                self.recomputed.append(str(func.overloadpacket))
        elif _saved_tensor_hooks_active():
            self.hooked.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))

    def finding(self) -> str:
        seen = []
        if self.recomputed:
            seen.append(f"{len(self.recomputed)} op(s) ran again with grad enabled during its backward, first "
                        f"{', '.join(_first(self.recomputed))} (a recompute)")
        if self.hooked:
            seen.append(f"{len(self.hooked)} forward op(s) ran with saved-tensor hooks set, first "
                        f"{', '.join(_first(self.hooked))}")
        return "; ".join(seen)


def _first(ops, n=3):
    out = []
    for op in ops:
        if op not in out:
            out.append(op)
        if len(out) == n:
            break
    return out
