#!/usr/bin/env python3
"""check_html_report.py CHECK ARGS...: report.html, checked in a real browser
(Debian's chromium through chromium-driver and selenium, headless, started
here) and as a file. Each CHECK is one behaviour (tests/html.cmake):

  setup CV JUDGE_FILES OUT   a run directory OUT/all with every verdict kind:
                             a harness run (PASS, MEMFAIL, FAIL) judged with
                             JUDGE_FILES/noise.h5 (NOISE, FAIL), outcome.h5
                             (ERROR) and absent.h5 (ERROR, unexpected); exit 1
                             unless all five verdicts and an unexpected one show;
                             OUT/again: the run again, --compare-to a previous
                             run in which no_rng_stash PASSed (a regression)
  regressions DIR            the regressions of --compare-to are counted on the
                             page and listed in their case's section
  counts DIR                 the counts on the page are the summary's
  filter DIR                 filtering to FAIL leaves exactly the FAIL rows
  sort DIR                   a click on a column's header sorts the rows by it,
                             a second click the other way
  follow DIR                 a FAIL row's link opens its case's section, whose
                             first divergence is summary.json's, word for word
  screenshot DIR PNG         a screenshot of the page is not blank
  noscript DIR               with scripts off, every row and case is on the page
  crafted CV DIR OUT         names with quotes, <script>, markup and line
                             breaks show as text and run nothing
  tensors DIR                each FAIL's and NOISE's section lists the per-tensor
                             distances summary.json records, in its order
  recorded DIR               (no browser) summary.json's tensor_distances, as the
                             judge records them: farthest first, every NOISE
                             tensor within its limit, a FAIL's first divergence
                             outside (where the nearest 32 are not left out)
  self_contained DIR         the file asks for nothing outside itself

A check that needs the browser exits 77 (Skipped, with the reason on its
first line) where chromium, chromedriver or selenium is not installed or
the browser cannot start."""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import png_pixels  # noqa: E402

SKIP = 77
VERDICTS = ["PASS", "NOISE", "FAIL", "MEMFAIL", "ERROR"]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def skip(why):
    print(f"skipped: {why}")
    sys.exit(SKIP)


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def page_url(run_dir):
    page = os.path.join(os.path.abspath(run_dir), "report.html")
    if not os.path.isfile(page):
        fail(f"{page}: not written")
    return "file://" + page


def browser(scripts=True):
    """Headless chromium through Debian's chromedriver, or Skipped."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip("selenium is not installed (pip install -r env/requirements.txt)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        skip("chromium or chromedriver is absent (apt-get install chromium chromium-driver; "
             "scripts/install-deps.sh does)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--disable-extensions"):
        opts.add_argument(arg)
    if not scripts:
        opts.add_argument("--blink-settings=scriptEnabled=false")
    try:
        return webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    except Exception as e:  # the browser could not start here: not a finding about the page
        skip(f"chromium cannot start here: {str(e).splitlines()[0] if str(e) else type(e).__name__}")


def run(cmd, codes=(0,), env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode not in codes:
        fail(f"{' '.join(cmd)} exited {p.returncode}, expected {codes}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def setup(cv, judge_files, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    run([cv, "--case", "none_bs4", "--impl", "nonreentrant,recompute_elided,no_rng_stash",
         "--out", os.path.join(out, "run")])
    files = sorted(glob.glob(os.path.join(out, "run", "*.h5")))
    files += [os.path.join(judge_files, f) for f in ("noise.h5", "outcome.h5", "absent.h5")]
    run([cv, "judge", "--out", os.path.join(out, "all")] + files, codes=(1,))
    recs = summary(os.path.join(out, "all"))["records"]
    seen = {r["verdict"] for r in recs}
    missing = [v for v in VERDICTS if v not in seen]
    if missing:
        fail(f"the fixture lacks verdict(s) {missing}; it has {sorted(seen)}")
    if all(r["expected"] for r in recs):
        fail("the fixture has no unexpected verdict")
    previous = summary(os.path.join(out, "run"))
    for r in previous["records"]:
        if r["impl"] == "no_rng_stash":
            r["verdict"] = "PASS"
    os.makedirs(os.path.join(out, "previous"))
    with open(os.path.join(out, "previous", "summary.json"), "w") as f:
        json.dump(previous, f)
    run([cv, "--case", "none_bs4", "--impl", "nonreentrant,recompute_elided,no_rng_stash",
         "--out", os.path.join(out, "again"), "--compare-to", os.path.join(out, "previous")], codes=(1,))
    print(f"run directory with verdicts {sorted(seen)}: {os.path.join(out, 'all')}")


def counts(run_dir):
    recs = summary(run_dir)["records"]
    d = browser()
    try:
        d.get(page_url(run_dir))
        for v in VERDICTS:
            want = sum(r["verdict"] == v for r in recs)
            got = d.find_element("css selector", f"#count-{v} .n").text
            if got != str(want):
                fail(f"{v}: the page counts {got}, summary.json {want}")
        unexpected = sum(not r["expected"] for r in recs)
        text = d.find_element("id", "count-unexpected").text
        if not text.startswith(f"{unexpected} unexpected"):
            fail(f"unexpected: the page says {text!r}, summary.json has {unexpected}")
        first = d.find_element("css selector", "#counts > *")
        if first.get_attribute("id") != "count-unexpected":
            fail("the unexpected count is not first in the summary bar")
        rows = d.find_elements("css selector", "#verdict-table tbody tr")
        if len(rows) != len(recs):
            fail(f"{len(rows)} rows for {len(recs)} records")
        if rows[0].get_attribute("data-expected") != "0":
            fail("the table does not open with an unexpected verdict")
        print(f"counts as summary.json: {len(recs)} records, {unexpected} unexpected")
    finally:
        d.quit()


def filter_fail(run_dir):
    recs = summary(run_dir)["records"]
    want = sorted((r["case"], r["impl"]) for r in recs if r["verdict"] == "FAIL")
    d = browser()
    try:
        from selenium.webdriver.support.ui import Select
        d.get(page_url(run_dir))
        Select(d.find_element("css selector", "#filters select[name=verdict]")).select_by_value("FAIL")
        shown = [r for r in d.find_elements("css selector", "#verdict-table tbody tr") if r.is_displayed()]
        got = sorted((r.get_attribute("data-case"), r.get_attribute("data-impl")) for r in shown)
        if got != want:
            fail(f"filtered to FAIL the page shows {got}, summary.json's FAIL records are {want}")
        if any(r.find_elements("css selector", "td")[2].text != "FAIL" for r in shown):
            fail("a row shown under the FAIL filter does not say FAIL")
        print(f"filter FAIL: {len(got)} row(s), exactly summary.json's")
    finally:
        d.quit()


def sort_rows(run_dir):
    recs = summary(run_dir)["records"]
    d = browser()
    try:
        d.get(page_url(run_dir))
        headers = d.find_elements("css selector", "#verdict-table thead th")
        col = [h.text for h in headers].index("scaled ULP")

        def column():
            return [float(r.find_elements("tag name", "td")[col].get_attribute("data-sort"))
                    for r in d.find_elements("css selector", "#verdict-table tbody tr")]
        headers[col].click()
        up = column()
        headers[col].click()
        down = column()
        if up != sorted(up) or down != sorted(up, reverse=True) or len(up) != len(recs):
            fail(f"scaled ULP sorted up {up}, down {down}")
        want = sorted((r.get("max_scaled_ulp", -1) if r.get("max_scaled_ulp", -1) is not None else 1e308)
                      for r in recs)
        if up != want:
            fail(f"sorted by scaled ULP the page shows {up}, summary.json's distances are {want}")
        print(f"sorted by scaled ULP both ways: {up}")
    finally:
        d.quit()


def follow(run_dir):
    recs = summary(run_dir)["records"]
    d = browser()
    try:
        d.get(page_url(run_dir))
        rows = [r for r in d.find_elements("css selector", "#verdict-table tbody tr")
                if r.get_attribute("data-verdict") == "FAIL"]
        if not rows:
            fail("no FAIL row on the page")
        row = rows[0]
        case, impl = row.get_attribute("data-case"), row.get_attribute("data-impl")
        rec = next(r for r in recs if r["case"] == case and r["impl"] == impl)
        if not rec["first_divergence"]:
            fail(f"{case}/{impl}: summary.json has no first divergence to compare")
        row.find_element("css selector", "td a").click()
        target = d.execute_script("return location.hash")
        section = d.find_element("css selector", target)
        if section.find_element("tag name", "h3").text != case:
            fail(f"the link of {case} opened {section.find_element('tag name', 'h3').text!r}")
        if not d.execute_script("var r=arguments[0].getBoundingClientRect();return r.top<innerHeight&&r.bottom>0;",
                                section):
            fail(f"{target}: the link did not bring the case's section into view")
        for div in section.find_elements("css selector", ".impl"):
            if div.find_element("tag name", "h4").text.split(" ")[0] == impl:
                shown = div.find_element("css selector", "code.first-divergence").get_attribute("textContent")
                if shown != rec["first_divergence"]:
                    fail(f"first divergence shown {shown!r}, summary.json {rec['first_divergence']!r}")
                step = div.find_elements("css selector", ".fd-step")
                if rec["first_divergence"].startswith("steps/") and not step:
                    fail("the first divergence's step is not shown on its own")
                print(f"{case}/{impl}: {target} shows the first divergence {shown!r}")
                return
        fail(f"{target}: no section for impl {impl}")
    finally:
        d.quit()


def screenshot(run_dir, png):
    d = browser()
    try:
        d.get(page_url(run_dir))
        if not d.save_screenshot(png):
            fail(f"{png}: no screenshot saved")
    finally:
        d.quit()
    w, h, channels, rows = png_pixels.rows(png)
    colours = set()
    inked = 0
    for r in rows:
        for x in range(0, len(r), channels):
            px = r[x:x + 3]
            colours.add(px)
            inked += px != b"\xff\xff\xff"
    share = inked / (w * h)
    if len(colours) < 8 or share < 0.01:
        fail(f"{png}: blank ({len(colours)} colours, {share:.2%} of pixels not white)")
    print(f"screenshot {png}: {w}x{h}, {len(colours)} colours, {share:.1%} inked")


def noscript(run_dir):
    recs = summary(run_dir)["records"]
    d = browser(scripts=False)
    try:
        d.get(page_url(run_dir))
        if d.find_element("id", "shown").get_attribute("textContent"):
            fail("the page's script ran: this check needs scripts off")
        if d.find_element("id", "filters").is_displayed():
            fail("with scripts off the filters, which need them, are shown")
        rows = [r for r in d.find_elements("css selector", "#verdict-table tbody tr") if r.is_displayed()]
        if len(rows) != len(recs):
            fail(f"with scripts off {len(rows)} of {len(recs)} rows are shown")
        cases = {r["case"] for r in recs}
        sections = d.find_elements("css selector", "section.case")
        if len(sections) != len(cases) or not all(s.is_displayed() for s in sections):
            fail(f"with scripts off {len(sections)} case section(s) for {len(cases)} case(s)")
        print(f"scripts off: {len(rows)} rows and {len(sections)} case sections readable")
    finally:
        d.quit()


CRAFTED_CASE = ('<script>window.__injected=1;document.title="injected"</script>"\'\n'
                '<img src=x onerror="window.__injected=2">&amp; </section>')
CRAFTED_IMPL = '"></td><script>window.__injected=3</script>\t<b onclick=x>'


def crafted(cv, run_dir, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    doc = summary(run_dir)
    for i, rec in enumerate(doc["records"]):
        rec["case"] = CRAFTED_CASE + str(i // 3)
        rec["impl"] = CRAFTED_IMPL + str(i)
        rec.setdefault("case_definition", {})["labels"] = 'x"><script>window.__injected=4</script>'
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(doc, f)
    run([cv, "html", out])
    d = browser()
    try:
        d.get(page_url(out))
        injected = d.execute_script("return window.__injected")
        if injected is not None:
            fail(f"an injected script ran (window.__injected = {injected})")
        if "injected" in d.title:
            fail(f"an injected script set the title: {d.title!r}")
        scripts = d.execute_script("return document.scripts.length")
        if scripts != 1:
            fail(f"{scripts} script elements on the page: markup from a name became a script")
        if d.find_elements("tag name", "img") or d.find_elements("tag name", "b"):
            fail("markup from a name became an element")
        heading = d.find_element("css selector", "section.case h3").get_attribute("textContent")
        if heading != CRAFTED_CASE + "0":
            fail(f"the case name shows as {heading!r}, not as written")
        cell = d.find_element("css selector", "#verdict-table tbody tr td:nth-child(2)").get_attribute("textContent")
        if not cell.startswith(CRAFTED_IMPL):
            fail(f"the impl name shows as {cell!r}, not as written")
        print("crafted names show as text; no injected script or element")
    finally:
        d.quit()


def impl_sections(d):
    """{(case, impl): the impl's element} over every case section."""
    out = {}
    for section in d.find_elements("css selector", "section.case"):
        case = section.find_element("tag name", "h3").get_attribute("textContent")
        for div in section.find_elements("css selector", ".impl"):
            out[(case, div.find_element("tag name", "h4").get_attribute("textContent").split(" ")[0])] = div
    return out


def tensors(run_dir):
    recs = [r for r in summary(run_dir)["records"] if r["verdict"] in ("FAIL", "NOISE")]
    listed = [r for r in recs if r.get("tensor_distances")]
    if not any(r["verdict"] == "FAIL" for r in listed) or not any(r["verdict"] == "NOISE" for r in listed):
        fail(f"summary.json records no per-tensor distances for a FAIL and a NOISE: {len(listed)} of {len(recs)}")
    d = browser()
    try:
        d.get(page_url(run_dir))
        sections = impl_sections(d)
        for r in listed:
            div = sections.get((r["case"], r["impl"]))
            if div is None:
                fail(f"{r['case']}/{r['impl']}: no section")
            rows = div.find_elements("css selector", "table.tensors tbody tr")
            if len(rows) != len(r["tensor_distances"]):
                fail(f"{r['case']}/{r['impl']}: {len(rows)} tensor rows, summary.json {len(r['tensor_distances'])}")
            for row, t in zip(rows, r["tensor_distances"]):
                cells = [c.get_attribute("textContent") for c in row.find_elements("tag name", "td")]
                step = t["tensor"].split("/")[1] if t["tensor"].startswith("steps/") else "-"
                want = "inf" if t["scaled_ulp"] is None else f"{t['scaled_ulp']:.3g}"
                if cells[0] != step or not t["tensor"].endswith(cells[1]) or cells[2] != want:
                    fail(f"{r['case']}/{r['impl']}: row {cells} is not summary.json's {t}")
            ulps = [float("inf") if t["scaled_ulp"] is None else t["scaled_ulp"] for t in r["tensor_distances"]]
            if ulps != sorted(ulps, reverse=True):
                fail(f"{r['case']}/{r['impl']}: distances not farthest first: {ulps}")
        print(f"per-tensor distances of {len(listed)} FAIL/NOISE record(s) shown as recorded")
    finally:
        d.quit()


def regressions(run_dir):
    found = summary(run_dir).get("regressions", [])
    if not found:
        fail(f"{run_dir}/summary.json records no regression to show")
    d = browser()
    try:
        d.get(page_url(run_dir))
        text = d.find_element("id", "count-regressions").text
        if not text.startswith(f"{len(found)} regression"):
            fail(f"the page counts {text!r}, summary.json {len(found)} regression(s)")
        sections = impl_sections(d)
        for r in found:
            div = sections.get((r["case"], r["impl"]))
            shown = [e.get_attribute("textContent") for e in div.find_elements("css selector", "dd.outside")] \
                if div else []
            if r["finding"] not in shown:
                fail(f"{r['case']}/{r['impl']}: the regression {r['finding']!r} is not in its section ({shown})")
        print(f"{len(found)} regression(s) counted and shown in their case sections")
    finally:
        d.quit()


def recorded(run_dir):
    recs = [r for r in summary(run_dir)["records"] if r["verdict"] in ("FAIL", "NOISE") and r.get("max_scaled_ulp")]
    if not recs:
        fail("no FAIL or NOISE record with a distance to check")

    def inf(v):
        return float("inf") if v is None else v

    for r in recs:
        what = f"{r['case']}/{r['impl']} {r['verdict']}"
        ts = r.get("tensor_distances")
        if not ts:
            fail(f"{what}: no tensor_distances though its distance is {r['max_scaled_ulp']}")
        ulps = [inf(t["scaled_ulp"]) for t in ts]
        if ulps != sorted(ulps, reverse=True) or r["tensors_differing"] < len(ts):
            fail(f"{what}: not farthest first, or more listed than differ: {ulps}, {r['tensors_differing']}")
        if abs(ulps[0] - inf(r["max_scaled_ulp"])) > 1e-9 * max(1.0, ulps[0]):
            fail(f"{what}: the farthest tensor ({ulps[0]}) is not the verdict's distance ({r['max_scaled_ulp']})")
        outside = [t["tensor"] for t in ts if inf(t["scaled_ulp"]) > inf(t["limit"])]
        if r["verdict"] == "NOISE" and outside:
            fail(f"{what}: NOISE with tensors outside their limits: {outside}")
        if r["verdict"] == "FAIL":
            first = r["first_divergence"].split(" ")[0].split(": ")[-1]
            listed = any(t["tensor"] == first for t in ts)
            if (listed and first not in outside) or (not listed and len(ts) == r["tensors_differing"]):
                fail(f"{what}: its first divergence {first} is not among the tensors outside: {outside}")
    print(f"tensor_distances of {len(recs)} FAIL/NOISE record(s) are the judge's verdicts, tensor by tensor")


def self_contained(run_dir):
    with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as f:
        page = f.read()
    import html.parser

    class Refs(html.parser.HTMLParser):
        bad = []

        def handle_starttag(self, tag, attrs):
            if tag in ("link", "iframe", "object", "embed", "img"):
                self.bad.append(f"<{tag}>")
            for k, v in attrs:
                if k in ("src", "href", "xlink:href", "action", "poster") and v and not v.startswith("#"):
                    self.bad.append(f"{tag} {k}={v}")

    p = Refs()
    p.feed(page)
    if p.bad:
        fail(f"the page refers outside itself: {p.bad[:5]}")
    if "@import" in page or "url(http" in page or "@font-face" in page:
        fail("the page's style loads something")
    if "Content-Security-Policy" not in page or "default-src 'none'" not in page:
        fail("the page does not forbid loads (Content-Security-Policy default-src 'none')")
    if "<svg" not in page:
        fail("no plot inlined as SVG")
    print(f"self-contained: {len(page.encode())} bytes, {page.count('<svg')} inline SVG plot(s)")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    check, args = sys.argv[1], sys.argv[2:]
    checks = {"setup": setup, "counts": counts, "filter": filter_fail, "sort": sort_rows, "follow": follow,
              "screenshot": screenshot,
              "noscript": noscript, "crafted": crafted, "tensors": tensors, "regressions": regressions,
              "recorded": recorded, "self_contained": self_contained}
    if check not in checks:
        print(f"unknown check {check!r}: one of {', '.join(checks)}")
        return 2
    checks[check](*args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
