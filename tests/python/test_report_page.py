"""pytest: report.html reads at a glance (issue 50, item 6). An expected
FAIL is coloured in the verdict table as the determinism plot colours its
cell; each run's section says what was expected of it; a PASS says what it
compared; the header's wall time is measured; the plots not drawn for
lack of data are listed last, folded.

The runs are real: verify() on a tiny model, torch's checkpoint and the C
judge, which writes the page beside its summary."""
import json
import os
import re
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_first_hour import batch_fn, mine, model_fn, no_rng, plain  # noqa: E402

import ckpt_verify  # noqa: E402
import ckpt_verify.judge  # noqa: E402


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """mine PASSes as expected, no_rng FAILs as expected, declared PASSes
    though a FAIL was declared (unexpected)."""
    out = tmp_path_factory.mktemp("page") / "r.h5"
    report = ckpt_verify.verify(model_fn, batch_fn, {"mine": mine, "no_rng": no_rng, "declared": mine},
                                baseline=plain, noise_runs=0, out=str(out),
                                expect={"no_rng": "FAIL", "declared": "FAIL"})
    assert report.html, "the judge wrote no report.html"
    with open(report.html, encoding="utf-8") as f:
        html = f.read()
    with open(os.path.join(report.judge_dir, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    return html, summary


def _verdict_cell(html, impl):
    row = re.search(r'<tr [^>]*data-impl="%s"[^>]*>(.*?)</tr>' % impl, html, re.S)
    assert row, f"no table row for {impl}"
    cell = re.search(r'<td class="v-[A-Z_]+ (c-[a-z]+)"[^>]*>([^<]*)</td>', row.group(1))
    assert cell, row.group(1)
    return cell.group(1), cell.group(2)


def _background(html, cls):
    found = re.search(r"td\.%s,span\.%s\{background:#([0-9a-f]{6})\}" % (cls, cls), html)
    assert found, f"no style for {cls}"
    rgb = found.group(1)
    return tuple(int(rgb[i:i + 2], 16) for i in (0, 2, 4))


def test_an_expected_fail_is_coloured_in_the_table_as_the_determinism_plot_colours_it(page):
    html, _ = page
    cls, word = _verdict_cell(html, "no_rng")
    assert (cls, word) == ("c-caught", "FAIL")
    assert _verdict_cell(html, "mine") == ("c-expected", "PASS")
    assert _verdict_cell(html, "declared") == ("c-unexpected", "PASS")
    figure = re.search(r'<figure id="plot-determinism">(.*?)</figure>', html, re.S)
    if not figure:
        pytest.skip("no determinism plot drawn here (no gnuplot): the table's colour has nothing to match")
    drawn = {tuple(map(int, m)) for m in re.findall(r"rgb\( *(\d+), *(\d+), *(\d+)\)", figure.group(1))}
    for c in ("c-caught", "c-expected", "c-unexpected"):
        r, g, b = _background(html, c)
        assert (r, g, b) in drawn, f"{c}: the plot draws no cell in #{r:02x}{g:02x}{b:02x} ({sorted(drawn)})"


def test_each_runs_section_says_what_was_expected_of_it(page):
    html, _ = page
    heads = dict(re.findall(r'<h4>([a-z_]+) <span class="verdict [^"]*">[A-Z/nj]+</span> (.*?)</h4>', html))
    assert heads["mine"] == "as expected (PASS|NOISE)"
    assert heads["no_rng"] == "as expected (FAIL)"
    assert heads["declared"] == '<span class="outside">UNEXPECTED: expected FAIL</span>'


def test_a_pass_says_what_it_compared(page):
    html, _ = page
    section = re.search(r'id="case-1-impl-1">(.*?)</div>', html, re.S).group(1)
    assert "<h4>mine " in section
    found = re.search(r"<dt>first divergence</dt><dd>([^<]*)</dd>", section)
    assert found and re.match(r"none: bitwise identical to baseline_0: \d+ per-step tensors \(losses, gradients\) "
                              r"and \d+ final parameters$", found.group(1)), found and found.group(1)
    assert "or none was compared" not in html


def test_the_headers_wall_time_is_the_judges_own_measured(page):
    html, summary = page
    assert summary["wall_seconds"] > 0
    found = re.search(r"<dt>wall time</dt><dd>([0-9.e+-]+) s, this judge \(start to summary\); the runs were "
                      r"trained before, by their producer</dd>", html)
    assert found, re.search(r"<dt>wall time</dt><dd>[^<]*", html)
    assert float(found.group(1)) > 0


def test_the_plots_not_drawn_are_listed_last_and_folded(page):
    html, _ = page
    listed = html.find('<section id="plots-not-drawn">')
    if listed < 0:
        pytest.skip("every plot was drawn, or none could be (no gnuplot): no list to place")
    assert listed > html.rfind('<section class="case"'), "the list comes before a case's section"
    assert re.search(r'<section id="plots-not-drawn">\n<details><summary>\d+ plot\(s\) not drawn', html)
    assert "<details open" not in html[listed:]
    assert html.find("not drawn, for lack of data") >= listed


def test_a_twin_not_judged_shows_n_j_in_the_table_and_its_section(page, tmp_path):
    """A _vs_single / _vs_eager twin its run's own verdict explains carries
    judged: false in summary.json; the page, rewritten from that summary by
    `ckpt-verify html`, shows no verdict for it."""
    _, summary = page
    twin = dict(summary["records"][0], impl="mine_vs_single", verdict="NOISE", judged=False, expected=True)
    summary = dict(summary, records=[*summary["records"], twin])
    (tmp_path / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    judge = ckpt_verify.judge.find_judge()
    subprocess.run([judge, "html", str(tmp_path)], check=True, env=dict(os.environ, CKPT_GNUPLOT="none"))
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert _verdict_cell(html, "mine_vs_single") == ("c-nofigure", "n/j")
    assert re.search(r'<h4>mine_vs_single <span class="verdict [^"]*">n/j</span> not judged \(measured NOISE\)', html)
