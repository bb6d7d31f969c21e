"""The browser page in a real headless Chromium (fake camera): the swapped video comes back."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        CHROMIUM is None or DRIVER is None,
        reason="needs Chromium and its driver (Debian: apt-get install chromium chromium-driver)",
    ),
]


def test_the_page_shows_swapped_video_from_the_server(
    start_server: Callable[..., ServerThread], photo: Path
) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    server = start_server()
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    try:
        driver.get(server.url + "/")
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "photo").send_keys(str(photo))
        driver.find_element(By.ID, "consent").click()
        driver.find_element(By.ID, "start").click()
        end = time.monotonic() + 90
        frames = 0
        while time.monotonic() < end:
            frames = int(driver.find_element(By.ID, "frames").text or 0)
            if frames >= 15:
                break
            time.sleep(0.5)
        status = driver.find_element(By.ID, "status").text
        assert frames >= 15, f"{frames} frames back; status: {status}"
        width = driver.execute_script("return document.getElementById('remote').videoWidth")
        assert width > 0
        sessions = list(server.server.sessions.values())
        assert sessions and sessions[0].engine is not None and sessions[0].engine.stats().frames_out > 0
        driver.find_element(By.ID, "stop").click()
        end = time.monotonic() + 10
        while server.server.sessions and time.monotonic() < end:
            time.sleep(0.2)
        assert not server.server.sessions  # Stop hangs up: the server frees the stream
    finally:
        driver.quit()
