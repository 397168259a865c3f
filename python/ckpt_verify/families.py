"""Baseline families beside the plain eager baseline (docs/compile.md).

verify(baselines={"compiled": step_fn | Run(...)}) trains, after
baseline_0 and baseline_1, each family's plain step as its own baselines,
and a run given as Run(..., against="compiled") is judged against them:

    compiled_baseline_<k>          the family's plain step: two runs, up to
                                   2 + noise_runs when the two differ (its
                                   own envelope). Named <family>_baseline_<k>
                                   because the judge takes a family's
                                   baselines by that suffix (judge.c
                                   baseline_family_len)
    <run>                          its `baselines` attribute names the family:
                                   bitwise / NOISE against it
    compiled_or_eager_baseline_<k> baseline_0.. and compiled_baseline_0..,
                                   hard links (no copy)
    <run>_vs_eager                 <run> as hard links, judged against that
                                   mixed family: NOISE within what compiling
                                   itself does to the plain model's numbers,
                                   FAIL beyond; bitwise only where the
                                   compiled and eager baselines agree bitwise.
                                   A twin (twin_of, noise_cause: twin_texts):
                                   it takes no expectation from its run, and
                                   the judge leaves it unjudged where its
                                   run's own verdict is FAIL, MEMFAIL or ERROR

This is the mechanism of distributed runs' `_vs_single` twins
(frontends/distributed.py), reused: the same link_run (recorder.py), and the same
twin_of / noise_cause attributes read by the C judge
(judge.c twins_follow_their_runs).

A family whose baseline ran Inductor's generated kernels (compile.codegen
1) gets the evidence of the rounding rule (docs/compile.md), trained under
compile_evidence.graphs_without_codegen():

    compiled_graphs_baseline_<k>   the family's plain step with Inductor's
                                   partitioned graphs run op by op (ATen's
                                   kernels, no code generation)
    <run>_graphs                   the run the same way, for each run of the
                                   family whose step ran Inductor's kernels:
                                   bitwise against compiled_graphs_baseline
                                   when the checkpointed graphs compute what
                                   the plain ones do. Not a twin for the
                                   judge: it keeps its run's expectation (a
                                   same-compiler family, judged bitwise, so a
                                   planted bug fails it as it fails its run)

A family's baseline is proven plain by the compiler's own evidence
(compile_evidence.py): a compiled region whose joint graph carries
checkpoint tags is refused (CheckpointInBaseline), as the eager baseline is
refused by the recompute probe. Every run's compile evidence, when its step
ran a region of compile_evidence.backend(), goes to its compile.* attributes."""
from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Mapping

from . import compile_evidence
from .errors import BadInput, BadRunName, CheckpointInBaseline
from .frontends.class_state import patched_text
from .frontends.eager import Run
from .recorder import Recorder, RunWriter, link_run, same_results
from .schema import attr_text

_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,30}$")


def family(key: str) -> str:
    return f"{key}_baseline"


def mixed_family(key: str) -> str:
    return f"{key}_or_eager_baseline"


def twin_name(run_name: str) -> str:
    return f"{run_name}_vs_eager"


def graphs_family(key: str) -> str:
    return f"{key}_graphs_baseline"


def graphs_twin(run_name: str) -> str:
    return f"{run_name}_graphs"


def ran_codegen(recorder: Recorder, name: str) -> bool:
    """Whether run `name`'s step ran kernels Inductor generated (its evidence)."""
    group = recorder.file.get(f"runs/{name}/compile")
    return group is not None and int(group.attrs.get("codegen", 0)) == 1


def check(baselines: dict | None, runs: dict, expect: dict | None = None) -> dict:
    """{key: Run} for verify(baselines=...), refusing what the judge could
    not read; every Run(against=key) must name one of them."""
    if baselines is not None and not isinstance(baselines, Mapping):
        raise BadInput(f"baselines= is a {type(baselines).__name__}, not a mapping {{family: step_fn or Run}} "
                       f"(e.g. baselines={{'compiled': compiled_step}})")
    fams = {}
    for key, fn in (baselines or {}).items():
        if not isinstance(key, str) or not _WORD.match(key) or key == "baseline" or key.endswith("_baseline"):
            raise BadRunName(f"baselines key {key!r}: a family is 1-31 letters, digits or underscores, starting with "
                             f"a letter, not 'baseline' and not ending in '_baseline' (its runs are "
                             f"<key>_baseline_<k>)")
        if any(f"{other}_graphs" == key for other in baselines or {}):
            raise BadRunName(f"baselines key {key!r}: <family>_graphs_baseline_<k> are the runs of family "
                             f"{key[:-7]!r} with Inductor's graphs run op by op; rename it")
        if not (callable(fn) or isinstance(fn, Run)):
            raise BadInput(f"baselines[{key!r}]: {type(fn).__name__} is not a step_fn(model, batch) -> loss or a Run")
        fams[key] = fn if isinstance(fn, Run) else Run(step=fn)
    for name, run in runs.items():
        against = getattr(run, "against", None)
        if against is None:
            continue
        if against not in fams:
            raise BadInput(f"run {name!r}: against={against!r} names no family of baselines= "
                           f"({', '.join(fams) or 'none given'})")
        if len(twin_name(name)) + len("_rerun_99") > 63:
            raise BadRunName(f"run {name!r}: its twin {twin_name(name)!r} and that twin's re-runs need "
                             f"{len(name)} + 17 characters, more than a run name's 63; shorten it")
        if name in runs and graphs_twin(name) in runs:
            raise BadRunName(f"run {graphs_twin(name)!r}: the name of run {name!r}'s twin with Inductor's graphs "
                             f"run op by op (docs/compile.md); rename it")
        if name in (expect or {}) and len(graphs_twin(name)) > 31:
            raise BadRunName(f"run {name!r}: its expectation goes to {graphs_twin(name)!r} too (its step run with "
                             f"Inductor's graphs op by op, when it runs Inductor's kernels), and /case expect holds "
                             f"names of up to 31 characters; shorten it")
    return fams


def twin_texts(recorder: Recorder, key: str, run_name: str) -> dict:
    """The attributes that make /runs/<run>_vs_eager a twin for the judge
    (judge.c, twins_follow_their_runs): the run it is (twin_of), and what
    its mixed family's spread stands for (noise_cause, the head of a NOISE
    reason): eager against a compiler, which rounds differently by
    construction, so a NOISE there claims only that the run is no further
    from eager than its plain compiled step is."""
    group = recorder.file.get(f"runs/{family(key)}_0/compile")
    backend = attr_text(group.attrs["backend"]) if group is not None and "backend" in group.attrs else "torch.compile"
    # Short, to be read: the figures and the
    # compile evidence follow this text.
    cause = (f"this run under {backend} vs eager ({mixed_family(key)}_<k>: the eager baselines and the plain step "
             f"under {backend}, a different compiler whose rounding differs by construction): no further from eager "
             f"than that plain step is")
    return {"twin_of": run_name, "noise_cause": cause}


def train_with_evidence(train: Callable, spec, run: Run, writer: RunWriter, measure: bool = False,
                        **kwargs) -> None:
    """train(spec, run, writer, **kwargs) with its compile evidence (if any)
    added to the run's attributes, also when the run raised; with
    `measure` (a family's run), the saved tensors its steps pack too."""
    try:
        with compile_evidence.collect(measure) as col, compile_evidence.intercepting():
            step = run.step
            run.step = col.step(step)  # the same Run (warm-ups are kept per Run), its step bracketed
            try:
                train(spec, run, writer, **kwargs)
            finally:
                run.step = step
                writer.attrs.update(col.attrs())
    finally:
        _undo_class_patches(spec, writer)


def _undo_class_patches(spec, writer: RunWriter) -> None:
    """After every run, raised or not: the classes of the model put back as
    verify() found them (frontends/class_state.py), and a run that changed
    them is named in its class_patches attribute (the judge adds it to the
    run's reason) and on stderr."""
    classes = getattr(spec, "classes", None)
    if classes is None:
        return
    changed = classes.changes()
    if changed:
        classes.restore()
        text = patched_text(writer.name, changed)
        writer.attrs["class_patches"] = text
        print(f"ckpt_verify: {text}", file=sys.stderr)


def refuse_class_patches(writer: RunWriter) -> None:
    """A baseline that patched the model's classes is not the plain model
    (and would have patched every run's): BadInput naming what it patched."""
    if "class_patches" in writer.attrs:
        raise BadInput(f"the plain baseline changes the model's classes: {writer.attrs['class_patches']}; the "
                       f"baseline must be the plain model, so every run is compared with it")


def train_family(spec, key: str, run: Run, noise_runs: int, recorder: Recorder, train: Callable,
                 graphs: bool = False) -> list[str]:
    """The family's baselines, streamed into the report: two, and up to
    2 + noise_runs when the first two differ. Returns their names. With
    `graphs`, the <key>_graphs_baseline_<k>: Inductor's graphs op by op."""
    names = []
    fam = graphs_family(key) if graphs else family(key)
    for k in range(2 + noise_runs):
        if k >= 2 and same_results(recorder.file, names[0], names[1]):
            break
        name = f"{fam}_{k}"
        writer = recorder.begin_run(name, fam)
        try:
            with compile_evidence.graphs_without_codegen() if graphs else contextlib.nullcontext():
                train_with_evidence(train, spec, run, writer, measure=True)
            refuse_class_patches(writer)
            tagged = writer.attrs.get("compile.ckpt_tagged_ops", 0)
            if tagged:
                raise CheckpointInBaseline(
                    f"run {name}: the {key!r} baseline checkpoints: torch.compile's joint graph carries {tagged} "
                    f"op(s) tagged for recompute in {writer.attrs.get('compile.ckpt_regions')} checkpoint "
                    f"region(s). A family's baseline must be the plain step; give the checkpoint as a run with "
                    f"against={key!r}")
        except BaseException:
            writer.abort()
            raise
        writer.finish()
        names.append(name)
    return names


def link_twins(recorder: Recorder, key: str, eager: list[str], compiled: list[str], samples: dict) -> None:
    """compiled_or_eager_baseline_<k> from both families' baselines, and each
    run's samples (the run and its re-runs) as <run>_vs_eager[_rerun_<i>]."""
    mixed = mixed_family(key)
    for k, source in enumerate([*eager, *compiled]):
        link_run(recorder, source, f"{mixed}_{k}", drop_ranks=True)
    for run_name, names in samples.items():
        texts = twin_texts(recorder, key, run_name)
        for i, sample in enumerate(names):
            link_run(recorder, sample, twin_name(run_name) + (f"_rerun_{i}" if i else ""), drop_ranks=True,
                      extra={"baselines": mixed, **texts})
