"""Campaign Markdown pages (summary.md, search.md, physical.md) rendered as HTML.

The HTML is what the Snakemake report shows inline: its landing page embeds the campaign
summary, and each category's page is one of these files. The page is a fragment wrapped in
``<div class="tc-page">`` with a stylesheet scoped to that class, so it reads the same
opened alone in a browser and embedded in the report, and does not restyle the report.
Deterministic: the same Markdown gives the same bytes (Python-Markdown, fixed extensions).
"""

from __future__ import annotations

import markdown

from tracecanary.canonical import write_text

PAGE_CLASS = "tc-page"
MARKDOWN_EXTENSIONS = ("tables", "sane_lists")

_STYLE = f"""
.{PAGE_CLASS} {{ font-family: system-ui, sans-serif; font-size: 14px; line-height: 1.4;
  color: #1f2328; max-width: 100%; }}
.{PAGE_CLASS} h1 {{ font-size: 1.5em; margin: 0.4em 0; }}
.{PAGE_CLASS} h2 {{ font-size: 1.2em; margin: 1em 0 0.4em; border-bottom: 1px solid #d0d7de; }}
.{PAGE_CLASS} h3 {{ font-size: 1.05em; margin: 0.8em 0 0.3em; }}
.{PAGE_CLASS} table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
.{PAGE_CLASS} th, .{PAGE_CLASS} td {{ border: 1px solid #d0d7de; padding: 3px 8px;
  text-align: left; vertical-align: top; }}
.{PAGE_CLASS} th {{ background: #f6f8fa; }}
.{PAGE_CLASS} tr:nth-child(even) td {{ background: #fbfcfd; }}
.{PAGE_CLASS} code {{ font-family: ui-monospace, monospace; font-size: 0.9em;
  word-break: break-all; }}
.{PAGE_CLASS} code::before, .{PAGE_CLASS} code::after {{ content: none; }}
.{PAGE_CLASS} ul {{ padding-left: 1.4em; list-style: disc; }}
.{PAGE_CLASS} strong {{ font-weight: 600; }}
"""


def markdown_to_html(text: str) -> str:
    """The Markdown ``text`` as a styled HTML fragment (``<div class="tc-page">``)."""
    body = markdown.markdown(text, extensions=list(MARKDOWN_EXTENSIONS), output_format="html")
    return f'<style>{_STYLE}</style>\n<div class="{PAGE_CLASS}">\n{body}\n</div>\n'


def write_markdown_page(path, text: str) -> str:
    """Write ``text`` rendered by ``markdown_to_html`` to ``path`` (atomic); return the
    SHA-256 of what was written."""
    return write_text(path, markdown_to_html(text))
