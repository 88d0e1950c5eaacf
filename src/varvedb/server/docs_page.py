"""GET /docs: the API for people, one HTML page made from the OpenAPI document
(openapi.py) when first asked. No script and nothing fetched from elsewhere:
each route with its summary, parameters, request body and answers, and the
schemas they name, as indented JSON."""
from __future__ import annotations

import json
from html import escape

_STYLE = """body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
h2{border-top:1px solid #ccc;padding-top:1rem}code,pre{font:13px ui-monospace,monospace}
pre{background:#f5f5f5;padding:.6rem;overflow-x:auto}.m{font-weight:bold;text-transform:uppercase}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}"""


class Page(str):
    """An HTML answer (the endpoint sends it as text/html)."""


def _json(value) -> str:
    return f"<pre>{escape(json.dumps(value, indent=2, ensure_ascii=False))}</pre>"


def _operation(path: str, method: str, op: dict) -> list[str]:
    out = [f'<h3 id="{escape(method + path)}"><span class="m">{escape(method)}</span> '
           f"<code>{escape(path)}</code></h3>", f"<p>{escape(op.get('summary', ''))}</p>"]
    params = op.get("parameters") or []
    if params:
        out.append("<table><tr><th>parameter</th><th>in</th><th>description</th></tr>")
        out += [f"<tr><td><code>{escape(p.get('name', ''))}</code></td>"
                f"<td>{escape(p.get('in', ''))}</td>"
                f"<td>{escape(p.get('description', ''))}</td></tr>" for p in params]
        out.append("</table>")
    body = op.get("requestBody")
    if body:
        for media, spec in body.get("content", {}).items():
            out.append(f"<p>Body ({escape(media)}):</p>{_json(spec.get('schema', {}))}")
    answers = op.get("responses", {})
    if answers:
        out.append("<p>Answers: " + ", ".join(
            f"<b>{escape(code)}</b> {escape(r.get('description', ''))}"
            for code, r in answers.items()) + "</p>")
    return out


def render(doc: dict) -> Page:
    info = doc.get("info", {})
    title = f"{info.get('title', 'API')} {info.get('version', '')}".strip()
    out = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{escape(title)}</h1>", f"<p>{escape(info.get('description', ''))}</p>",
           '<p>The same as JSON: <a href="/openapi.json">/openapi.json</a>.</p>', "<ul>"]
    ops = [(path, method, op) for path, methods in doc.get("paths", {}).items()
           for method, op in methods.items() if isinstance(op, dict)]
    out += [f'<li><a href="#{escape(m + p)}"><span class="m">{escape(m)}</span> '
            f"<code>{escape(p)}</code></a> {escape(op.get('summary', ''))}</li>"
            for p, m, op in ops]
    out.append("</ul><h2>Routes</h2>")
    for p, m, op in ops:
        out += _operation(p, m, op)
    schemas = doc.get("components", {}).get("schemas", {})
    if schemas:
        out.append("<h2>Schemas</h2>")
        for name, schema in schemas.items():
            out.append(f'<h3 id="schema-{escape(name)}">{escape(name)}</h3>{_json(schema)}')
    out.append("</body></html>")
    return Page("\n".join(out))
