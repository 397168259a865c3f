"""torch.utils.checkpoint on a TransformerEncoderLayer stack with dropout:
reentrant, non-reentrant and checkpoint_sequential (and, on torch >= 2.4,
selective) must all give the plain step's gradients bit for bit: PASS.

    python -m ckpt_verify python/examples/transformer_torch_checkpoint.py"""
from ckpt_verify import adapters
from transformer_stack import batch_fn, model_fn, step  # noqa: F401 (read by the CLI)

baseline, runs = adapters.torch_checkpoint_runs(step, segments=2)
