"""Printed length of a finished run's report: Chromium prints results/report/report.html to PDF on A4
landscape (as a reader's "Print to PDF" would), and this counts the pages and finds the page each of
the report's top-level sections starts on (its heading's text, searched page by page). The report's
own print style opens every folded table first (its `beforeprint` handler; the print here runs it).
A section's first page is where the PDF's named destination of its heading points (Chromium writes
one for each anchor the contents link to).

    python benchmarks/bench_report_pages.py [RUN_DIR]   (default simulation/, `make simulate`'s run)

Writes benchmarks/out/report_pages.json (pages, the section order and each section's first page)
and the PDF beside it. Needs Debian's chromium and chromedriver (`make browser`).
"""

import base64
import html as html_lib
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.results import OUT, publish  # noqa: E402

A4_LANDSCAPE = {"orientation": "landscape", "page_width": 29.7, "page_height": 21.0}


def print_pdf(html: Path, pdf: Path) -> float:
    """Chromium's print of `html` to `pdf` (A4 landscape, backgrounds on); the seconds it took."""
    from selenium.webdriver.common.print_page_options import PrintOptions

    from tests.browser import chromium

    with tempfile.TemporaryDirectory() as tmp:
        driver = chromium(Path(tmp))
        try:
            driver.get(html.resolve().as_uri())
            driver.execute_script("window.dispatchEvent(new Event('beforeprint'))")
            options = PrintOptions()
            options.orientation = A4_LANDSCAPE["orientation"]
            options.page_width, options.page_height = A4_LANDSCAPE["page_width"], A4_LANDSCAPE["page_height"]
            options.background = True
            start = time.perf_counter()
            pdf.write_bytes(base64.b64decode(driver.print_page(options)))
            return time.perf_counter() - start
        finally:
            driver.quit()


def _object(data: bytes, number: int) -> bytes:
    match = re.search(rb"(?<![0-9])%d 0 obj\s*(.*?)endobj" % number, data, re.S)
    return match.group(1) if match else b""


def pdf_pages(data: bytes) -> tuple[int, dict[str, int]]:
    """(pages, {named destination: its 1-based page}) of a PDF as Chromium writes it: plain object
    dictionaries, the catalog's page tree and its /Dests (one per anchor a link points to: the
    contents' link to each heading)."""
    catalog = re.search(rb"/Type /Catalog(.*?)endobj", data, re.S).group(1)
    order = []

    def walk(number):
        node = _object(data, number)
        kids = re.search(rb"/Kids \[([^\]]*)\]", node)
        if kids and b"/Type /Pages" in node:
            for kid in re.findall(rb"(\d+) 0 R", kids.group(1)):
                walk(int(kid))
        else:
            order.append(number)
    walk(int(re.search(rb"/Pages (\d+) 0 R", catalog).group(1)))
    page_of = {number: i + 1 for i, number in enumerate(order)}
    dests = re.search(rb"/Dests (\d+) 0 R", catalog)
    found = re.findall(rb"/([^\s\[/]+) \[(\d+) 0 R", _object(data, int(dests.group(1)))) if dests else []
    return len(order), {_name(name): page_of.get(int(page)) for name, page in found}


def _name(raw: bytes) -> str:
    """A PDF name as text (#xx escapes decoded)."""
    return re.sub(r"#([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), raw.decode("latin-1"))


def sections(html: Path) -> list[tuple[str, str]]:
    """The report's top-level sections (h2) in order: (anchor, heading text)."""
    found = re.findall(r'<h2 id="([^"]+)"[^>]*>(.*?)</h2>', html.read_text(encoding="utf-8"), re.S)
    return [(anchor, html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)).strip()))
            for anchor, text in found]


def main(run: Path) -> dict:
    html = run / "results/report/report.html"
    OUT.mkdir(exist_ok=True)
    pdf = OUT / "report_pages.pdf"
    seconds = print_pdf(html, pdf)
    pages, starts = pdf_pages(pdf.read_bytes())
    report = {"report": str(html.relative_to(run)) if html.is_relative_to(run) else html.name,
              "paper": "A4 landscape (29.7 x 21.0 cm), Chromium print to PDF", "pages": pages,
              "print_seconds": round(seconds, 1),
              "sections": [{"section": title, "first_page": starts.get(anchor)} for anchor, title in sections(html)]}
    publish("report_pages", report)
    return report


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "simulation"))
