"""What a reader sees in a Snakemake HTML report, measured in headless Chromium.

``probe_report(report)`` loads the report in an iframe of a 1400 x 900 window, reads the
landing page (is the campaign summary's first table inside the window and not covered;
its bold verdict cells likewise), then opens every PNG result the way the report's "view"
button does (``app.setView({content: "img", ...})``) and measures the width it renders
at. The page writes its measurements into the DOM, which ``--dump-dom`` returns.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

WINDOW = (1400, 900)

_PROBE = """<!doctype html>
<html><body style="margin:0">
<iframe id="report" src="REPORT" style="width:WIDTHpx;height:HEIGHTpx;border:0"></iframe>
<pre id="probe">pending</pre>
<script>
const sleep = ms => new Promise(r => setTimeout(r, ms));
function seen(w, d, el) {
  const r = el.getBoundingClientRect();
  const x = Math.min(Math.max(r.left + 4, 0), w.innerWidth - 1);
  const y = Math.min(Math.max(r.top + 4, 0), w.innerHeight - 1);
  const hit = d.elementFromPoint(x, y);
  const inside = r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0
    && r.top < w.innerHeight && r.left < w.innerWidth;
  return {top: r.top, left: r.left, width: r.width, height: r.height,
          visible: inside && !!hit && (el === hit || el.contains(hit))};
}
async function probe() {
  const frame = document.getElementById("report");
  const w = frame.contentWindow, d = frame.contentDocument;
  await sleep(3000);
  const out = {landing: null, verdicts: [], plots: {}};
  const page = d.querySelector(".tc-page");
  const table = page && page.querySelector("table");
  if (table) {
    out.landing = {...seen(w, d, table), text: table.innerText};
    out.verdicts = [...table.querySelectorAll("td strong")].map(
      s => ({text: s.textContent, ...seen(w, d, s)}));
  }
  const app = w.eval("app");
  for (const path of Object.keys(w.results).filter(p => p.endsWith(".png"))) {
    const uri = w.results[path].data_uri;
    app.setView({content: "img", contentPath: uri, resultPath: path});
    await sleep(800);
    const img = [...d.querySelectorAll("img")].find(i => i.getAttribute("src") === uri);
    out.plots[path] = img ? {width: img.getBoundingClientRect().width,
                             natural: img.naturalWidth, loaded: img.complete} : null;
  }
  document.getElementById("probe").textContent = JSON.stringify(out);
}
window.addEventListener("load", () => probe().catch(
  e => { document.getElementById("probe").textContent = JSON.stringify({error: String(e)}); }));
</script>
</body></html>
"""


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def probe_report(browser: str, report: Path, workdir: Path) -> dict:
    """Measurements of ``report`` as a reader sees it (see module doc)."""
    page = workdir / "probe.html"
    html = _PROBE.replace("REPORT", report.resolve().as_uri())
    page.write_text(html.replace("WIDTH", str(WINDOW[0])).replace("HEIGHT", str(WINDOW[1])))
    dom = subprocess.run(
        [
            browser,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-web-security",  # the probe page reads the report's frame
            "--allow-file-access-from-files",
            f"--user-data-dir={workdir / 'chromium-profile'}",
            f"--window-size={WINDOW[0]},{WINDOW[1] + 200}",
            "--virtual-time-budget=120000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    return json.loads(text.replace("&amp;", "&"))
