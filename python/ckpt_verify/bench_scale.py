"""The scale benchmark (issue 30): a GPT-2-shaped torch model, built here
with torch.nn (random initialisation, fp32, no download), verified end to end
through verify() with torch.utils.checkpoint non-reentrant, reentrant and a
planted bug (non-reentrant with preserve_rng_state=False: the recompute
draws other dropout masks), which must FAIL with its first divergence.

For each model size it measures, each configuration in a fresh process:
  verify_s / plain_s      verify()'s wall time against plain training of the
                          same runs (the same step functions and steps, no
                          recording, no warm-up, no judge)
  verify_rss / plain_rss  the process's peak RSS (VmHWM) against plain
                          training's own
  report / one_run        the report's size against one run's tensors
                          (baseline_0's datasets), in a configuration with the
                          planted bug and in one where every run passes
  judge MB/s              tensor bytes of every run but baseline_0 (each is
                          compared with baseline_0's) over the wall time of
                          `ckpt-verify judge` on the report
and writes scale.json, scale.dat and scale.png (gnuplot) under --out.

--python-path DIR measures another checkout's ckpt_verify (its python/), for
the before/after figures: the child processes import verify() from there.
This file is also the child: run by path, it takes --child."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":  # run by path as a child: never import siblings as top-level modules
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

# name: (layers, d_model, heads). GPT-2's vocabulary; by default context 256
# tokens and batch 4, 1,024 tokens a step (--context, --batch): a small real
# batch. With 64 tokens a step (the first measurements) a step of the 124M
# model is under a second of compute against 1.4 GiB of gradients and
# parameters recorded per run, which no recorder of every gradient can hide.
SIZES = {
    "tiny": (2, 64, 2),
    "10M": (4, 192, 4),
    "30M": (6, 384, 6),
    "124M": (12, 768, 12),
    "350M": (24, 1024, 16),
}
VOCAB, CONTEXT, BATCH, DROPOUT = 50257, 256, 4, 0.1
CONFIGS = {
    # with the planted bug: it must FAIL; the others PASS
    "all": ("torch_nonreentrant", "torch_reentrant", "planted_no_rng_preserve"),
    # every run passes: the report is one run's tensors and links
    "passing": ("torch_nonreentrant", "torch_reentrant"),
}


def gpt(layers: int, d_model: int, heads: int):
    """A GPT-2-shaped language model: token and position embeddings, pre-norm
    blocks of causal self-attention and a 4x MLP with dropout, a final norm
    and the output head tied to the token embedding (as GPT-2)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.attn, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
            self.fc, self.out = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)
            self.drop = nn.Dropout(DROPOUT)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.attn(self.ln_1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // heads)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = self.drop(F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1))
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.drop(self.proj(y))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln_2(x)))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, d_model), nn.Embedding(CONTEXT, d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(d_model)
            self.drop = nn.Dropout(DROPOUT)

        def loss(self, idx, targets, region=None):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.blocks:
                x = region(block, x) if region else block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
            return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

        def forward(self, idx, targets):
            return self.loss(idx, targets)

    return GPT()


def batch_fn(step):
    import torch
    idx = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1))
    return idx[:, :-1], idx[:, 1:]


def step_fns():
    """{run name: step(model, batch)} with the baseline under "plain"."""
    from torch.utils.checkpoint import checkpoint

    def region(**kw):
        return lambda block, x: checkpoint(block, x, **kw)
    regions = {"plain": None,
               "torch_nonreentrant": region(use_reentrant=False),
               "torch_reentrant": region(use_reentrant=True),
               # The planted bug: the recompute does not restore the RNG
               # state, so its dropout masks are not the forward's.
               "planted_no_rng_preserve": region(use_reentrant=False, preserve_rng_state=False)}
    return {name: (lambda r: lambda model, batch: model.loss(*batch, region=r))(r) for name, r in regions.items()}


def vm_hwm() -> int:
    """This process's peak resident bytes (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and its waited-for
    children (the judge): less disturbed than wall time when other work
    shares the machine's cores."""
    import resource
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def _model_fn(size):
    return lambda: gpt(*SIZES[size])


def child_verify(size, config, steps, noise_runs, out):
    """verify() in this process; prints one JSON line of its figures."""
    import h5py

    import ckpt_verify
    fns = step_fns()
    runs = {name: fns[name] for name in CONFIGS[config]}
    expect = {"planted_no_rng_preserve": "FAIL"} if "planted_no_rng_preserve" in runs else None
    t0, c0 = time.perf_counter(), cpu_s()
    judge_error = None
    try:
        report = ckpt_verify.verify(_model_fn(size), batch_fn, runs, baseline=fns["plain"], steps=steps,
                                    noise_runs=noise_runs, expect=expect, out=out, name=f"scale_{size}_{config}")
    except ckpt_verify.JudgeError as e:  # the report is complete and kept: its training figures still count
        report, judge_error = None, str(e)
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    with h5py.File(out, "r") as f:
        trained = list(f["runs"])
        one_run = _tensor_bytes(f["runs/baseline_0"])
        judged = sum(_tensor_bytes(f[f"runs/{r}"]) for r in trained if r != "baseline_0")
        params_init = _tensor_bytes(f["params_init"])
    verdicts = {run: {"verdict": v.verdict, "reason": v.reason, "first_divergence": v.first_divergence}
                for run, v in (report.verdicts.items() if report else [])}
    print(json.dumps({"wall_s": wall, "cpu_s": cpu, "rss": vm_hwm(), "report_bytes": os.path.getsize(out),
                      "one_run_bytes": one_run, "params_init_bytes": params_init, "judged_bytes": judged,
                      "trained": trained, "verdicts": verdicts, "ok": bool(report and report.ok),
                      "judge_error": judge_error}), flush=True)


def _tensor_bytes(group):
    """Bytes of the tensors under a group, each path counted (a link too)."""
    import h5py
    total = []

    def visit(_, obj):
        if isinstance(obj, h5py.Dataset):
            total.append(obj.size * obj.dtype.itemsize)
    group.visititems(visit)
    return sum(total)


def child_plain(size, runs, steps):
    """Plain training of the named runs (each a fresh seeded model, `steps`
    steps of its step function, SGD), nothing recorded; one JSON line."""
    import torch
    fns = step_fns()
    batches = []
    torch.manual_seed(0)
    batches = [batch_fn(k) for k in range(1, steps + 1)]
    t0, c0 = time.perf_counter(), cpu_s()
    per_run, per_run_cpu = {}, {}
    for run in runs:
        r0, rc0 = time.perf_counter(), cpu_s()
        fn = fns["plain"] if run.startswith("baseline_") else fns[run.split("_rerun_")[0]]
        torch.manual_seed(0)
        model = _model_fn(size)()
        model.train()
        torch.manual_seed(0)
        for batch in batches:
            for p in model.parameters():
                p.grad = None
            fn(model, batch).backward()
            with torch.no_grad():
                for p in model.parameters():
                    if p.grad is not None:
                        p.add_(p.grad, alpha=-0.01)
        del model
        per_run[run], per_run_cpu[run] = time.perf_counter() - r0, cpu_s() - rc0
    print(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0, "rss": vm_hwm(), "per_run_s": per_run,
                      "per_run_cpu_s": per_run_cpu}), flush=True)


def _child(args, python_path, judge, extra):
    """Runs this file as a child with ckpt_verify from python_path and the
    judge binary `judge` (its directory first for its libraries); its JSON."""
    env = dict(os.environ, PYTHONPATH=python_path, CKPT_VERIFY=judge)
    aten = os.path.join(os.path.dirname(judge), "libckpt_aten.so")  # the memory meter, beside its judge
    if os.path.exists(aten):
        env["CKPT_ATEN_LIB"] = aten
    env["LD_LIBRARY_PATH"] = os.path.dirname(judge) + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH")
                                                       else "")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *args]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ''}",
                **extra}
    return {**json.loads(p.stdout.strip().splitlines()[-1]), **extra}


def time_judge(judge, report, out_dir):
    """Wall seconds of `ckpt-verify judge` on the report (its exit code:
    1 when a verdict is FAIL, as expected with the planted bug)."""
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(judge))
    t0 = time.perf_counter()
    p = subprocess.run([judge, "judge", "--out", out_dir, report], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env)
    return time.perf_counter() - t0, p.returncode


def measure(size, args, python_path, judge, label, work):
    """The figures of one size for one checkout (label: before or after)."""
    row = {"size": size, "label": label, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for config in args.configs:
        report = os.path.join(work, f"{label}_{size}_{config}.h5")
        say(f"{label} {size} {config}: verify()")
        res = _child(["verify", size, config, str(args.steps), str(args.noise_runs), report, *_tokens(args)],
                     python_path, judge, {})
        if "error" not in res and not res.get("judge_error"):
            jt, code = time_judge(judge, report, os.path.join(work, f"{label}_{size}_{config}.judge"))
            res["judge_s"], res["judge_exit"] = jt, code
            res["judge_mb_s"] = res["judged_bytes"] / jt / 1e6
        for path in (report, report + ".tmp"):
            if os.path.exists(path):
                os.unlink(path)  # reports of the big sizes take gigabytes
        row[config] = res
    trained = next((row[c]["trained"] for c in args.configs if "trained" in row[c]), None)
    if trained:
        say(f"{label} {size}: plain training of {len(trained)} runs")
        row["plain"] = _child(["plain", size, json.dumps(trained), str(args.steps), *_tokens(args)], python_path,
                              judge, {})
    return row


def _tokens(args):
    return [str(args.context), str(args.batch)]


def _set_tokens(context, batch):
    global CONTEXT, BATCH
    CONTEXT, BATCH = int(context), int(batch)


def say(text):
    print(f"bench_scale: {text}", file=sys.stderr, flush=True)


def ratios(row):
    """The four figures of a row (None where not measured)."""
    plain = row.get("plain", {})
    out = {}
    for config in ("all", "passing"):
        res = row.get(config, {})
        if "error" in res or not res:
            continue
        plain_s = sum(plain["per_run_s"].get(r, 0) for r in res["trained"]) if "per_run_s" in plain else None
        plain_cpu = (sum(plain["per_run_cpu_s"].get(r, 0) for r in res["trained"]) if "per_run_cpu_s" in plain
                     else None)
        out[config] = {
            "wall_ratio": res["wall_s"] / plain_s if plain_s else None,
            "cpu_ratio": res["cpu_s"] / plain_cpu if plain_cpu and "cpu_s" in res else None,
            "rss_ratio": res["rss"] / plain["rss"] if plain.get("rss") else None,
            "report_ratio": res["report_bytes"] / res["one_run_bytes"],
            "report_ratio_runs": (res["report_bytes"] - res["params_init_bytes"]) / res["one_run_bytes"],
            "judge_mb_s": res.get("judge_mb_s"),
        }
    return out


def params_of(size):
    layers, d, _ = SIZES[size]
    return VOCAB * d + CONTEXT * d + layers * (12 * d * d + 13 * d) + 2 * d


def write_plot(rows, out):
    """scale.dat (one line per size: parameters, then after's and before's
    wall, RSS and report ratios and judge MB/s) and scale.png."""
    dat = os.path.join(out, "scale.dat")
    with open(dat, "w") as f:
        f.write("# params_M after:wall rss report judge_MBps before:wall rss report judge_MBps (config all; "
                "report: config passing)\n")
        for size in dict.fromkeys(r["size"] for r in rows):
            cols = [f"{params_of(size) / 1e6:.1f}"]
            for label in ("after", "before"):
                r = next((x for x in rows if x["size"] == size and x["label"] == label), None)
                fig = ratios(r) if r else {}
                a, p = fig.get("all", {}), fig.get("passing", {})
                for v in (a.get("wall_ratio"), a.get("rss_ratio"), p.get("report_ratio"), a.get("judge_mb_s")):
                    cols.append("NaN" if v is None else f"{v:.4g}")
            f.write(" ".join(cols) + "\n")
    if shutil.which("gnuplot") is None:
        say("no gnuplot: scale.dat written, no plot")
        return
    png = os.path.join(out, "scale.png")
    script = f"""set terminal pngcairo size 1200,900
set output '{png}'
set multiplot layout 2,2 title 'ckpt-verify scale benchmark: GPT-2-shaped model, CPU'
set logscale x
set xlabel 'parameters (M)'
set key top left
set yrange [0:*]
set title 'verify() wall / plain training'
plot '{dat}' u 1:2 w lp t 'after', '' u 1:6 w lp t 'before', 2 dt 2 t 'goal'
set title 'peak RSS / plain training peak'
plot '{dat}' u 1:3 w lp t 'after', '' u 1:7 w lp t 'before', 2 dt 2 t 'goal'
set title 'report / one run (every run passes)'
plot '{dat}' u 1:4 w lp t 'after', '' u 1:8 w lp t 'before', 1.2 dt 2 t 'goal'
set title 'judge throughput (MB/s)'
set logscale y
set yrange [10:*]
plot '{dat}' u 1:5 w lp t 'after', '' u 1:9 w lp t 'before', 1000 dt 2 t 'goal'
unset multiplot
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def table(rows):
    lines = ["| size | params | checkout | wall ratio | CPU ratio | RSS ratio | report ratio (all pass) | "
             "report ratio, runs only | judge MB/s |",
             "|---|---|---|---|---|---|---|---|---|"]

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)
    for r in rows:
        fig = ratios(r)
        a, p = fig.get("all", {}), fig.get("passing", {})
        errors = "; ".join(f"{c}: {r[c]['error']}" for c in ("all", "passing") if "error" in r.get(c, {}))
        lines.append(f"| {r['size']} | {params_of(r['size']) / 1e6:.1f} M | {r['label']} | "
                     f"{fmt(a.get('wall_ratio'), '.2f')} | {fmt(a.get('cpu_ratio'), '.2f')} | "
                     f"{fmt(a.get('rss_ratio'), '.2f')} | {fmt(p.get('report_ratio'), '.2f')} | "
                     f"{fmt(p.get('report_ratio_runs'), '.2f')} | {fmt(a.get('judge_mb_s'), '.0f')} |"
                     + (f" {errors}" if errors else ""))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description="verify() on GPT-2-shaped models of growing size (issue 30)")
    ap.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="10M,30M,124M,350M", help=f"comma-separated, of {', '.join(SIZES)}")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--context", type=int, default=CONTEXT, help="tokens per sequence (default %(default)s)")
    ap.add_argument("--batch", type=int, default=BATCH, help="sequences per step (default %(default)s)")
    ap.add_argument("--noise-runs", type=int, default=1, help="re-runs of a differing run (verify's noise_runs)")
    ap.add_argument("--configs", default="all,passing")
    ap.add_argument("--out", required=False, help="directory for scale.json, scale.dat, scale.png")
    ap.add_argument("--before", help="python/ of another checkout to measure too, as 'before'")
    ap.add_argument("--before-sizes", help="sizes to measure with --before (default: --sizes)")
    ap.add_argument("--judge", help="the ckpt-verify binary (default: as verify() finds it)")
    ap.add_argument("--before-judge", help="the ckpt-verify binary of the --before checkout")
    ap.add_argument("--from", dest="from_json", nargs="+", metavar="SCALE_JSON",
                    help="measure nothing: table and plot from earlier runs' scale.json (before and after)")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the planted bug FAILs with a first divergence and the rest pass")
    args = ap.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        if kind == "verify":
            size, config, steps, noise_runs, out, context, batch = rest
            _set_tokens(context, batch)
            child_verify(size, config, int(steps), int(noise_runs), out)
        else:
            size, runs, steps, context, batch = rest
            _set_tokens(context, batch)
            child_plain(size, json.loads(runs), int(steps))
        return 0
    if not args.out:
        ap.error("--out is required")
    _set_tokens(args.context, args.batch)
    if args.from_json:
        rows = []
        for path in args.from_json:
            with open(path) as f:
                rows += json.load(f)["rows"]
        os.makedirs(args.out, exist_ok=True)
        _save(args.out, rows)
        write_plot(rows, args.out)
        print(table(rows))
        return 0
    args.configs = args.configs.split(",")
    sizes = [s for s in args.sizes.split(",") if s]  # --sizes "": only --before
    for s in sizes + (args.before_sizes.split(",") if args.before_sizes else []):
        if s not in SIZES:
            ap.error(f"unknown size {s!r} (known: {', '.join(SIZES)})")
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    from ckpt_verify import judge as judge_mod
    here = os.path.dirname(_HERE)
    judge = os.path.abspath(judge_mod.find_judge(args.judge))
    rows = []
    for size in sizes:
        rows.append(measure(size, args, here, judge, "after", work))
        _save(args.out, rows)
    if args.before:
        before_judge = os.path.abspath(args.before_judge or judge)
        for size in (args.before_sizes.split(",") if args.before_sizes else sizes):
            rows.append(measure(size, args, os.path.abspath(args.before), before_judge, "before", work))
            _save(args.out, rows)
    write_plot(rows, args.out)
    print(table(rows))
    if args.check:
        return 0 if _checked(rows) else 1
    return 0


def _save(out, rows):
    meta = {"machine": f"{os.cpu_count()} CPUs", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "context": CONTEXT, "batch": BATCH, "vocab": VOCAB}
    with open(os.path.join(out, "scale.json"), "w") as f:
        json.dump({"meta": meta, "rows": [{**r, "ratios": ratios(r)} for r in rows]}, f, indent=1)


def _checked(rows):
    """The planted bug FAILs with its first divergence, every other run
    passes, in every configuration measured for 'after'."""
    good = True
    for r in rows:
        if r["label"] != "after":
            continue
        for config in ("all", "passing"):
            res = r.get(config)
            if res is None:
                continue
            if "error" in res:
                say(f"{r['size']} {config}: {res['error']}")
                good = False
                continue
            for run, v in res["verdicts"].items():
                if run.startswith("planted"):
                    if v["verdict"] != "FAIL" or not v["first_divergence"]:
                        say(f"{r['size']} {config}: {run}: {v['verdict']} ({v['reason']}): the planted bug must "
                            f"FAIL with its first divergence")
                        good = False
                    else:
                        say(f"{r['size']} {config}: {run}: FAIL at {v['first_divergence']}")
                elif v["verdict"] not in ("PASS", "NOISE"):
                    say(f"{r['size']} {config}: {run}: {v['verdict']}: {v['reason']}")
                    good = False
    return good


if __name__ == "__main__":
    sys.exit(main())
