"""Hugging Face transformers (PyPI) on tiny configs built locally with random
initialisation (nothing downloaded): GPT-2, Llama and BERT with dropout on,
each with gradient_checkpointing_enable() under use_reentrant True and
False (a ckpt_verify.Run prepare: the baseline stays plain, the default
baseline taking the model output's .loss), and
activation_checkpointing_enable(offload=True) on GPT-2.

Known-bug version, a patch around the real transformers:
- issue #21381 (fixed by PR #21598, enable_input_require_grads, which
  gradient_checkpointing_enable now calls): with the input embeddings frozen
  and the reentrant checkpoint, no input of a checkpointed layer requires
  grad, so its parameters get no gradient. Reproduced by making
  enable_input_require_grads a no-op: FAIL."""
from __future__ import annotations

import importlib.util
from typing import Any

import torch

from . import patching
from .case import Case, RunSpec

PKG = "transformers"
VOCAB, SEQ, BATCH, HIDDEN = 64, 8, 2, 32


def _missing() -> str | None:
    if importlib.util.find_spec("transformers") is None:
        return "transformers is not installed (env/requirements.txt pins it)"
    return None


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=HIDDEN, n_layer=2, n_head=2,
                                      resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1))


def _llama(frozen_embeddings: bool = False):
    def build():
        from transformers import LlamaConfig, LlamaForCausalLM
        model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                             max_position_embeddings=32, attention_dropout=0.1,
                                             tie_word_embeddings=False))
        if frozen_embeddings:
            model.get_input_embeddings().weight.requires_grad_(False)
        return model
    return build


def _bert():
    from transformers import BertConfig, BertForMaskedLM
    return BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                                      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))


def _batch(step: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids.clone()}


def _causal_batch(step: int) -> dict[str, Any]:
    # Training runs without the KV cache; gradient_checkpointing_enable forces
    # use_cache=False, so the plain step must too (hf_gpt2_use_cache shows why).
    return dict(_batch(step), use_cache=False)


def _enable(reentrant: bool):
    def prepare(model):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    return prepare


def _compiled(model):
    """gradient_checkpointing_enable(use_reentrant=False), then the model
    under torch.compile with ckpt_verify's evidence-recording aot_eager
    (AOTAutograd's own partitioner, no C++ compile: docs/compile.md)."""
    from ckpt_verify import compile_evidence
    _enable(False)(model)
    return torch.compile(model, backend=compile_evidence.backend("aot_eager"))


def _offload(model):
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False}, offload=True)


def _install_issue21381():
    from transformers import PreTrainedModel
    # Before PR #21598 nothing made the embeddings' output require grad.
    patching.patch(PreTrainedModel, "enable_input_require_grads", "hf_issue21381", lambda original, self: None)


def cases() -> list[Case]:
    skip = _missing()
    ok = "the layers' checkpoint replays dropout's RNG: bitwise as the plain model"
    out = []
    for arch, build, desc, batch in (("gpt2", _gpt2, "GPT2LMHeadModel", _causal_batch),
                                     ("llama", _llama(), "LlamaForCausalLM", _causal_batch),
                                     ("bert", _bert, "BertForMaskedLM", _batch)):
        model = f"{desc}: 2 layers, hidden {HIDDEN}, dropout 0.1, tokens {BATCH}x{SEQ}, random init"
        runs = [RunSpec(f"hf_{arch}_reentrant", f"{desc}.gradient_checkpointing_enable(use_reentrant=True)", ok,
                        prepare=_enable(True)),
                RunSpec(f"hf_{arch}_nonreentrant", f"{desc}.gradient_checkpointing_enable(use_reentrant=False)",
                        ok, prepare=_enable(False))]
        if arch == "gpt2":
            runs.append(RunSpec("hf_gpt2_offload", f"{desc}.activation_checkpointing_enable(offload=True)",
                                ok + "; saved inputs kept on the host (save_on_cpu)", prepare=_offload))
            runs.append(RunSpec("hf_gpt2_compiled", f"torch.compile({desc}) over "
                                f"gradient_checkpointing_enable(use_reentrant=False), aot_eager",
                                "Dynamo traces the layers' checkpoint and AOTAutograd's partitioner keeps its "
                                "recompute (its evidence in the reason); dropout's masks are the eager ones: bitwise "
                                "as the plain model", prepare=_compiled, reason_has="torch.compile recomputed"))
        out.append(Case(name=f"hf_{arch}", framework="transformers", package=PKG, model=model, model_fn=build,
                        batch_fn=batch, baseline=None, runs=runs, skip=skip))
    gpt2 = f"GPT2LMHeadModel: 2 layers, hidden {HIDDEN}, dropout 0.1, plain step with the KV cache on (the default)"
    out.append(Case(name="hf_gpt2_use_cache", framework="transformers", package=PKG, model=gpt2, model_fn=_gpt2,
                    batch_fn=_batch, baseline=None, skip=skip, runs=[
        RunSpec("hf_gpt2_use_cache", "GPT2LMHeadModel.gradient_checkpointing_enable(use_reentrant=False)",
                "not the recompute: gradient checkpointing forces use_cache=False, and GPT-2's attention without "
                "the cache rounds differently (1.5 ULP at the tensor's scale) from the plain step with it",
                prepare=_enable(False), expect="FAIL", reason_has="c_attn"),
    ]))
    frozen = "LlamaForCausalLM: 2 layers, hidden 32, input embeddings frozen, random init"
    out.append(Case(name="hf_llama_frozen_embeddings", framework="transformers", package=PKG, model=frozen,
                    model_fn=_llama(frozen_embeddings=True), batch_fn=_batch, baseline=None, skip=skip,
                    setup=_install_issue21381, runs=[
        RunSpec("hf_frozen_reentrant", "LlamaForCausalLM.gradient_checkpointing_enable(use_reentrant=True)",
                "enable_input_require_grads (PR #21598) makes the embeddings' output require grad",
                prepare=_enable(True)),
        RunSpec("hf_bug_frozen_no_input_grads", "gradient_checkpointing_enable before PR #21598 (issue #21381)",
                "no input of a checkpointed layer requires grad: its parameters get no gradient",
                prepare=_enable(True), variant="hf_issue21381", expect="FAIL",
                reason_has="recorded by baseline_0 but not by hf_bug_frozen_no_input_grads",
                known_bug="huggingface/transformers issue #21381, PR #21598", fixed_by="hf_frozen_reentrant"),
    ]))
    return out
