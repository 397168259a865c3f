#!/usr/bin/env python3
"""bench_memory_map.py [--size 124M] [--repeats 3]: what the memory map
costs verify() per step (docs/memory.md, "Cost"). The map rides on every
recorded step of baseline_1 and of each run, so its cost is in their
timings; this times one step plain and under the map (the baseline's,
which also notes the savers), owners looked for at the end of forward as
verify() does, on the scale benchmark's GPT-2-shaped model
(ckpt_verify.bench_scale, 1,024 tokens a step), interleaved, median of
--repeats, both in one process."""
import argparse
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402

from ckpt_verify import bench_scale, memory  # noqa: E402
from ckpt_verify.frontends import memory_map  # noqa: E402

# The counting allocator verify() measures with, installed before the first
# tensor; the map names CPU storages by its allocation serials, as in verify().
METER = memory.meter_for("cpu")
KEYS = memory_map.StorageKeys.for_meter(METER)


def one_step(size, mapped, checkpointed):
    torch.manual_seed(0)
    model = bench_scale._model_fn(size)()
    batch = bench_scale.batch_fn(1)
    steps = bench_scale.step_fns()
    step = steps["torch_nonreentrant"] if checkpointed else steps["plain"]
    names = {id(m): n for n, m in model.named_modules() if n}
    leaves = [t for t in (batch if isinstance(batch, (tuple, list)) else [batch]) if isinstance(t, torch.Tensor)]
    mapper = memory_map.MemoryMap(names, [*model.parameters(), *leaves], saves=not checkpointed,
                                  keys=KEYS) if mapped else None
    gc.collect()
    t0 = time.perf_counter()
    if mapper:
        with mapper:
            loss = step(model, batch)
            mapper.mark_end_forward(None, loss, list(model.named_modules()))
            grad = torch.ones_like(loss)  # as verify() does: made before backward starts
            mapper.backward_starts()
            loss.backward(grad)
            del loss, grad
            mapper.after_backward()
        summary = memory_map.summarize(mapper)
    else:
        loss = step(model, batch)
        loss.backward()
        del loss
        summary = None
    return time.perf_counter() - t0, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="124M", choices=sorted(bench_scale.SIZES))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"meter: {METER.source or METER.why}")
    one_step(args.size, False, False)  # warm the process
    for checkpointed in (False, True):
        plain, mapped = [], []
        for _ in range(args.repeats):
            plain.append(one_step(args.size, False, checkpointed)[0])
            t, summary = one_step(args.size, True, checkpointed)
            mapped.append(t)
        p, m = statistics.median(plain), statistics.median(mapped)
        what = "checkpointed run" if checkpointed else "baseline"
        print(f"{args.size} {what}: one step {p:.2f} s plain, {m:.2f} s mapped ({m / p:.2f}x, +{m - p:.2f} s); "
              f"map: {len(summary.held)} tensors held, {summary.recomputed_ops} ops recomputed")


if __name__ == "__main__":
    main()
