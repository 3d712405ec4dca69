"""A headless Chromium driven by Selenium, for the page's tests (the ``browser`` marker).

Debian's ``chromium`` and ``chromedriver`` (``scripts/check-chromium.sh`` installs them),
named by path so Selenium Manager downloads nothing. :func:`start_browser` starts one;
the session fixture in ``tests/conftest.py`` shares it and quits it at the end. Each step a
test takes can be kept as a screenshot (:meth:`Browser.shot`) under the run's temp folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "Browser",
    "BrowserMissing",
    "start_browser",
]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_SECONDS = 60.0
"""How long an explicit wait waits at most (a Spark job's first start on a busy machine)."""

T = TypeVar("T")


class BrowserMissing(RuntimeError):
    """Chromium or its driver is not installed where the tests look for them."""


@dataclass
class Browser:
    """One headless Chromium: its WebDriver, and where the screenshots go."""

    driver: Any
    shots: Path
    taken: list[Path] = field(default_factory=list)

    def open(self, url: str) -> None:
        """Load ``url`` and wait until the page says it is ready (stores and ops loaded)."""
        self.driver.get("about:blank")  # a new document, even when only the hash differs
        self.driver.get(url)
        self.wait(lambda d: d.execute_script("return document.body.dataset.ready === 'true'"))

    def wait(self, condition: Callable[[Any], T], seconds: float = WAIT_SECONDS) -> T:
        """Wait until ``condition(driver)`` is truthy (Selenium's ``WebDriverWait``)."""
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, seconds, poll_frequency=0.1).until(condition)

    def find(self, css: str) -> Any:
        """The first element matching ``css``, once it is visible."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        return self.wait(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def texts(self, css: str) -> list[str]:
        """The text of each element matching ``css`` (as shown)."""
        from selenium.webdriver.common.by import By

        return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

    def fill(self, css: str, text: str) -> None:
        """Put ``text`` into the input matching ``css`` (what it held goes)."""
        element = self.find(css)
        element.clear()
        if text:
            element.send_keys(text)

    def shot(self, name: str) -> Path:
        """Keep a screenshot of the window as ``NN-name.png`` in the shots folder."""
        path = self.shots / f"{len(self.taken) + 1:02d}-{name}.png"
        self.driver.save_screenshot(str(path))
        self.taken.append(path)
        return path

    def resize(self, width: int, height: int) -> None:
        """Set the window's size."""
        self.driver.set_window_size(width, height)

    def console_errors(self) -> list[str]:
        """The page's console errors since the last call (script errors, failed loads)."""
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry.get("level") == "SEVERE"
        ]

    def quit(self) -> None:
        """Stop the browser and its driver."""
        self.driver.quit()


def start_browser(shots: Path, width: int = 1280, height: int = 800) -> Browser:
    """Start a headless Chromium of ``width`` x ``height`` whose screenshots go to ``shots``.

    Raises:
        BrowserMissing: ``chromium`` or ``chromedriver`` is not installed.
    """
    for program in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(program) is None:
            raise BrowserMissing(
                f"{program} is missing: run 'sh scripts/check-chromium.sh' (as root it installs "
                "Debian's chromium and chromium-driver)"
            )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--disable-extensions",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-sync",
        "--lang=en-US",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    shots.mkdir(parents=True, exist_ok=True)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT_SECONDS)
    return Browser(driver, shots)
