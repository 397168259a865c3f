"""jax.checkpoint on XLA:CPU under jax.jit, each variant with the verdict
the compiler's evidence gives it (tests/jax/check_jax_case.py runs them;
docs/xla.md, "JAX", has the numbers).

The model is xla_checkpoints.py's in JAX: BLOCKS residual MLP blocks
(x + W2 gelu_tanh(W1 x + b1) + b2), each block one checkpointed region,
mean squared error. Runs (the baseline calls the blocks plainly):

  prevent_cse              jax.checkpoint(block, prevent_cse=True) (JAX's default)
  no_prevent_cse           jax.checkpoint(block, prevent_cse=False)
  checkpoint_dots          jax.checkpoint(block, policy=jax.checkpoint_policies.checkpoint_dots)
                           (saves the matmuls' outputs, replays the rest)
  planted_recompute_drops_bias
                           a hand-written checkpoint (jax.custom_vjp) whose
                           backward replays the block without b1: wrong
                           gradients, which the judge must catch"""
import jax
import jax.numpy as jnp
import numpy as np

HIDDEN, WIDE, BATCH, BLOCKS = 32, 128, 64, 4


def init_fn(key: jax.Array) -> list:
    """BLOCKS blocks of {w1, b1, w2, b2}, torch.nn.Linear's uniform init."""
    out = []
    for k in jax.random.split(key, BLOCKS):
        k1, k2, k3, k4 = jax.random.split(k, 4)
        a, b = 1 / np.sqrt(HIDDEN), 1 / np.sqrt(WIDE)
        out.append({"w1": jax.random.uniform(k1, (HIDDEN, WIDE), minval=-a, maxval=a),
                    "b1": jax.random.uniform(k2, (WIDE,), minval=-a, maxval=a),
                    "w2": jax.random.uniform(k3, (WIDE, HIDDEN), minval=-b, maxval=b),
                    "b2": jax.random.uniform(k4, (HIDDEN,), minval=-b, maxval=b)})
    return out


def batch_fn(step: int) -> tuple:
    rng = np.random.default_rng(step)
    return (rng.standard_normal((BATCH, HIDDEN), dtype=np.float32),
            rng.standard_normal((BATCH, HIDDEN), dtype=np.float32))


def block(p: dict, x: jax.Array) -> jax.Array:
    return x + jax.nn.gelu(x @ p["w1"] + p["b1"], approximate=True) @ p["w2"] + p["b2"]


def _loss(wrap, params, batch):
    x, y = batch
    for p in params:
        x = wrap(block)(p, x)
    return jnp.mean((x - y) ** 2)


def plain(params, batch):
    return _loss(lambda f: f, params, batch)


def prevent_cse(params, batch):
    return _loss(lambda f: jax.checkpoint(f, prevent_cse=True), params, batch)


def no_prevent_cse(params, batch):
    return _loss(lambda f: jax.checkpoint(f, prevent_cse=False), params, batch)


def checkpoint_dots(params, batch):
    return _loss(lambda f: jax.checkpoint(f, policy=jax.checkpoint_policies.checkpoint_dots), params, batch)


@jax.custom_vjp
def _block_dropping_bias(p, x):
    return block(p, x)


def _fwd(p, x):
    return block(p, x), (p, x)   # saves only the block's inputs, as a checkpoint does


def _bwd(saved, g):
    p, x = saved
    # The planted bug: the replay leaves b1 out.
    _, vjp = jax.vjp(block, {**p, "b1": jnp.zeros_like(p["b1"])}, x)
    return vjp(g)


_block_dropping_bias.defvjp(_fwd, _bwd)


def planted_recompute_drops_bias(params, batch):
    return _loss(lambda f: _block_dropping_bias, params, batch)


RUNS = {"prevent_cse": prevent_cse, "no_prevent_cse": no_prevent_cse, "checkpoint_dots": checkpoint_dots,
        "planted_recompute_drops_bias": planted_recompute_drops_bias}
