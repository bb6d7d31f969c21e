"""The browser page in a real headless Chromium (fake camera): the swapped video comes back, and a
stream the server ends (its content policy) says why on the page."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from realtime.remote.runner import ServerThread
from tests.realtime.remote.conftest import TOKEN, frame_image
from tests.realtime.remote.test_content_policy import flagged

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        CHROMIUM is None or DRIVER is None,
        reason="needs Chromium and its driver (Debian: apt-get install chromium chromium-driver)",
    ),
]


def chromium(camera_file: Path | None = None) -> Any:
    """A headless Chromium whose camera is Chrome's fake one: its test pattern, or `camera_file`
    (a Y4M clip, looped)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

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
    if camera_file is not None:
        opts.add_argument(f"--use-file-for-fake-video-capture={camera_file}")
    return webdriver.Chrome(service=Service(str(DRIVER)), options=opts)


def start_the_page(driver: Any, server: ServerThread, photo: Path) -> None:
    from selenium.webdriver.common.by import By

    driver.get(server.url + "/")
    driver.find_element(By.ID, "token").send_keys(TOKEN)
    driver.find_element(By.ID, "photo").send_keys(str(photo))
    driver.find_element(By.ID, "consent").click()
    driver.find_element(By.ID, "start").click()


def write_y4m(path: Path, picture: np.ndarray, frames: int = 30) -> Path:
    """`picture` (BGR, even sides) as a Y4M clip of `frames` frames at 30 fps, 4:2:0."""
    h, w = picture.shape[:2]
    i420 = cv2.cvtColor(picture, cv2.COLOR_BGR2YUV_I420).tobytes()
    with path.open("wb") as out:
        out.write(f"YUV4MPEG2 W{w} H{h} F30:1 Ip A1:1 C420jpeg\n".encode())
        for _ in range(frames):
            out.write(b"FRAME\n" + i420)
    return path


def test_the_page_shows_swapped_video_from_the_server(
    start_server: Callable[..., ServerThread], photo: Path
) -> None:
    from selenium.webdriver.common.by import By

    server = start_server()
    driver = chromium()
    try:
        start_the_page(driver, server, photo)
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


def test_a_stream_the_content_policy_ends_says_why_on_the_page(
    start_server: Callable[..., ServerThread], photo: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    server = start_server(content_policy="refuse")
    camera = write_y4m(tmp_path / "camera.y4m", flagged(frame_image(640, 480)))
    driver = chromium(camera)
    try:
        start_the_page(driver, server, photo)
        end = time.monotonic() + 90
        status = ""
        while time.monotonic() < end:
            status = driver.find_element(By.ID, "status").text
            if status.startswith("ended"):
                break
            time.sleep(0.5)
        assert status.startswith("ended: ") and "content policy" in status, status
    finally:
        driver.quit()
