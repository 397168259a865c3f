"""A checkpoint written the way frameworks write one, with
torch.autograd.graph.saved_tensors_hooks: in forward the pack hook hands
autograd a handle instead of each saved tensor; the first unpack recomputes
the region under the restored RNG state, and the recompute's own pack hook
fills the handles in order; each tensor is dropped once unpacked. It must
PASS.

Its planted variant resets the bookkeeping counter mid-backward: once half
of a region's handles were unpacked it believes a new pass began,
recomputes, and numbers the recomputed tensors from the unpacks already
served, so handle k receives the tensor recomputed for handle k + N. With
two identical layers per region, every handle of the first layer gets the
second layer's tensor of the same shape and dtype: no shape check can see
it, only the gradients. It must FAIL.

    python -m ckpt_verify python/examples/hook_checkpoint.py"""
import torch
from torch.autograd.graph import saved_tensors_hooks

from ckpt_verify import adapters
from transformer_stack import batch_fn, model_fn, step  # noqa: F401 (read by the CLI)


class _Region:
    """The bookkeeping of one checkpointed region: its inputs, the RNG
    state at its forward, and the recomputed tensors by handle."""

    def __init__(self, fn, args, counter_reset):
        self.fn, self.counter_reset = fn, counter_reset
        self.inputs = [(a.detach(), a.requires_grad) for a in args]
        self.devices = sorted({a.device.index or 0 for a in args if a.is_cuda})
        self.cpu_state = torch.get_rng_state()
        self.cuda_states = [torch.cuda.get_rng_state(d) for d in self.devices]
        self.n_handles = 0
        self.storage = None  # handle -> recomputed tensor, after the first unpack
        self.served = 0
        self.reset_done = False

    def pack(self, tensor):
        handle = self.n_handles
        self.n_handles += 1
        return handle

    def unpack(self, handle):
        if self.counter_reset and not self.reset_done and self.served == self.n_handles // 2:
            # PLANTED BUG: the counter restarts; fills are numbered from the
            # unpacks already served.
            self.reset_done = True
            self.recompute(first_fill=self.served)
        if self.storage is None:
            self.recompute(first_fill=0)
        tensor = self.storage[handle]
        if tensor is None:
            raise RuntimeError(f"checkpoint handle {handle} unpacked twice")
        self.storage[handle] = None  # freed once handed back
        self.served += 1
        return tensor

    def recompute(self, first_fill):
        storage = [None] * self.n_handles
        counter = 0

        def fill(tensor):
            nonlocal counter
            k = counter - first_fill
            counter += 1
            if 0 <= k < self.n_handles:
                storage[k] = tensor.detach()
            return None

        def never(_):
            raise RuntimeError("the recompute's graph is never backpropagated")

        with torch.random.fork_rng(devices=self.devices):
            torch.set_rng_state(self.cpu_state)
            for d, state in zip(self.devices, self.cuda_states):
                torch.cuda.set_rng_state(state, d)
            with torch.enable_grad(), saved_tensors_hooks(fill, never):
                self.fn(*[t.requires_grad_(rg) if rg else t for t, rg in
                          ((t.detach(), rg) for t, rg in self.inputs)])
        if counter != self.n_handles:
            raise RuntimeError(f"recompute saved {counter} tensors, forward {self.n_handles}")
        self.storage = storage


def hook_checkpoint(counter_reset=False):
    def wrap(fn, *args):
        region = _Region(fn, args, counter_reset)
        with saved_tensors_hooks(region.pack, region.unpack):
            return fn(*args)
    return wrap


baseline = adapters.with_stack(step, adapters.stack_of(adapters.plain))
# Two layers per region: the counter-reset bug then hands the first layer
# the second layer's tensors, which have the same shapes.
runs = {
    "hook_checkpoint": adapters.with_stack(step, adapters.stack_in_regions(hook_checkpoint(), 2)),
    "hook_checkpoint_counter_reset": adapters.with_stack(
        step, adapters.stack_in_regions(hook_checkpoint(counter_reset=True), 2)),
}
expect = {"hook_checkpoint_counter_reset": "FAIL"}
