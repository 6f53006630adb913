"""Runs one Scrapy crawl in this process: ``python crawl.py START_URL SETTINGS_JSON``.

A crawl needs a fresh Twisted reactor, so each crawl is its own process.
Prints one JSON line: the crawl's stats.
"""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess


class FollowAll(scrapy.Spider):
    """Follows every link; the start request goes through the duplicate filter too."""

    name = "follow_all"

    def __init__(self, start_url: str, **kwargs: object) -> None:
        """A spider starting at ``start_url``."""
        super().__init__(**kwargs)
        self.start_url = start_url

    async def start(self):  # Scrapy >= 2.13
        """The start URL, filtered like every other request."""
        for r in self.start_requests():
            yield r

    def start_requests(self):  # Scrapy < 2.13
        """The start URL, filtered like every other request."""
        yield scrapy.Request(self.start_url, dont_filter=False)

    def parse(self, response):
        """Follows every link of the page."""
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


def main() -> None:
    """Runs the crawl and prints its stats."""
    start_url, settings = sys.argv[1], json.loads(sys.argv[2])
    base = {
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "CONCURRENT_REQUESTS": 16,
        "DOWNLOAD_DELAY": 0,
        "RETRY_ENABLED": False,
        "COOKIES_ENABLED": False,
    }
    base.update(settings)
    process = CrawlerProcess(base)
    crawler = process.create_crawler(FollowAll)
    process.crawl(crawler, start_url=start_url)
    process.start()
    stats = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in crawler.stats.get_stats().items()}
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
