"""A generated site served on a loopback port, counting the fetches of every page.

Page ``i`` of ``n`` links to several others, each link many times and in
several spellings that Scrapy's request fingerprint treats as one URL
(query arguments reordered, a fragment, absolute or relative). Page ``i+1``
is always among the links, so every page is reachable from page 0.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def links(i: int, n: int, port: int, per_page: int = 8, seed: int = 7) -> list[str]:
    """The hrefs of page ``i``: duplicate and differently spelled links."""
    rng = random.Random(seed * 1_000_003 + i)
    targets = [(i + 1) % n] + [rng.randrange(n) for _ in range(per_page - 1)]
    out = []
    for t in targets:
        spellings = [
            f"/page?id={t}&lang=en",
            f"/page?lang=en&id={t}",
            f"/page?id={t}&lang=en#section-{rng.randrange(9)}",
            f"http://127.0.0.1:{port}/page?id={t}&lang=en",
            f"page?lang=en&id={t}#top",
        ]
        out.extend(rng.sample(spellings, k=3))
    rng.shuffle(out)
    return out


class Site:
    """A threaded HTTP server on 127.0.0.1 with ``n`` pages; ``hits`` counts
    fetches per page id (and ``other`` every other path)."""

    def __init__(self, n: int) -> None:
        """Starts serving; call ``stop`` when done."""
        self.n = n
        self.hits: Counter[int] = Counter()
        self.other: Counter[str] = Counter()
        self._lock = threading.Lock()
        # `hold_for`: user agents whose first request every page waits for.
        self.hold_for: set[str] = set()
        self._seen_agents: set[str] = set()
        self._arrived = threading.Condition(self._lock)
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                u = urlsplit(self.path)
                q = parse_qs(u.query)
                try:
                    i = int(q["id"][0])
                    ok = u.path == "/page" and q.get("lang") == ["en"] and 0 <= i < site.n
                except (KeyError, ValueError):
                    ok = False
                if not ok:
                    with site._lock:
                        site.other[self.path] += 1
                    self.send_error(404)
                    return
                with site._arrived:
                    site._seen_agents.add(self.headers.get("User-Agent", ""))
                    site._arrived.notify_all()
                    site._arrived.wait_for(lambda: site.hold_for <= site._seen_agents, timeout=60)
                    site.hits[i] += 1
                port = self.server.server_address[1]
                body = "".join(f'<a href="{h}">link</a>\n' for h in links(i, site.n, port))
                data = f"<html><body><h1>page {i}</h1>\n{body}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def start_url(self) -> str:
        """Page 0."""
        return f"http://127.0.0.1:{self.port}/page?id=0&lang=en"

    def reset(self) -> None:
        """Forgets the counts."""
        with self._lock:
            self.hits.clear()
            self.other.clear()
            self._seen_agents.clear()

    def stop(self) -> None:
        """Stops serving."""
        self.server.shutdown()
        self.server.server_close()
