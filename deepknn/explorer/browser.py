"""The explorer in a real browser: the app served by uvicorn in a thread, and headless Chromium.

Used by the browser tests (tests/explorer/test_explorer_browser.py) and the benchmark
(benchmarks/bench_explorer.py --browser). Chromium and chromedriver are found on PATH
(Debian's chromium and chromium-driver); selenium drives them. Nothing is fetched.
"""
import shutil
import socket
import threading
import time

from deepknn.explorer import app as explorer_app

CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')
CHROMEDRIVER = shutil.which('chromedriver')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Server:
    """The app of `session` (and `other`, compared) served by uvicorn on 127.0.0.1 in a
    thread, as explore.py serves it; `with Server(...) as base:` gives its address."""

    def __init__(self, session, other=None):
        import uvicorn
        self.port = free_port()
        config = uvicorn.Config(explorer_app.make_app(session, ['127.0.0.1', 'localhost'], other),
                                host='127.0.0.1', port=self.port, log_level='warning')
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 30
        while not self.server.started and time.time() < deadline:
            time.sleep(0.05)
        return 'http://127.0.0.1:{}/'.format(self.port)

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def chromium(width=1300, height=1000):
    """A headless Chromium (selenium webdriver) of a `width` x `height` window."""
    from selenium import webdriver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ('--headless=new', '--no-sandbox', '--disable-gpu',
                     '--disable-dev-shm-usage', '--window-size={},{}'.format(width, height)):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    return webdriver.Chrome(options=options, service=service)


def wait_for(driver, css, timeout=60):
    """The first element matching `css`, once there (a TimeoutException after `timeout` s)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css)))
