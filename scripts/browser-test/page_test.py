"""The live session page in headless Chromium, driven over WebDriver (chromedriver, W3C protocol,
standard library only) against a real navigatord that run.sh starts and restarts.

Steps, each with a screenshot kept in the output directory:
  1. the page follows a session and draws its tree;
  2. an intent sent over ZeroMQ (navctl send) appears on the page within a deadline;
  3. Back on the page changes the service's tree (read back from its snapshot);
  4. navigatord is killed and started again: the page reconnects and shows the service's tree;
  5. the dashboard, with navload running and acknowledging as shells do, and a guarded screen
     whose guard is never met: its plots have data, and that route has the worst landing rate.
"""
import base64, json, os, subprocess, sys, time, urllib.request

driver_url, page_url, shots, navctl, requests_endpoint, restart_cmd, navload, intents_endpoint, commands_endpoint = \
    sys.argv[1:10]
session = "page-test"


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(driver_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}").get("value")
    except urllib.error.HTTPError as error:
        raise RuntimeError(f"WebDriver {method} {path}: {error.read().decode()}") from None


def wait(what, condition, timeout=15):
    deadline = time.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.time() > deadline:
            shot("failed")
            raise AssertionError(f"the page never showed {what}; it shows:\n{page_text()}")
        time.sleep(0.1)


def script(source, *args):
    return call("POST", f"/session/{sid}/execute/sync", {"script": source, "args": list(args)})


def page_text():
    return script("return document.body.innerText")


count = 0


def shot(name):
    global count
    count += 1
    png = base64.b64decode(call("GET", f"/session/{sid}/screenshot"))
    path = os.path.join(shots, f"{count:02d}-{name}.png")
    with open(path, "wb") as f:
        f.write(png)
    print(f"screenshot: {path}")


def top_screens():
    return script("return [...document.querySelectorAll('.screen.top')].map(e => e.dataset.screen)")


def navctl_run(*args):
    return subprocess.run([navctl, *args, "--requests", requests_endpoint], check=True, capture_output=True,
                          text=True, timeout=30).stdout


capabilities = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
    "binary": "/usr/bin/chromium",
    "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}}}}
sid = call("POST", "/session", capabilities)["sessionId"]
try:
    # 1. The tree shows.
    call("POST", f"/session/{sid}/url", {"url": f"{page_url}/?session={session}"})
    wait("the tree", lambda: script("return document.querySelectorAll('.stack').length") >= 1)
    wait("the live status", lambda: script("return document.getElementById('status').dataset.state") == "live")
    assert top_screens() == ["home"], top_screens()
    shot("tree")

    # 2. An intent sent over ZeroMQ appears.
    navctl_run("send", "--wait", "--session", session, "chat", "conversationId=42")
    wait("the chat on top", lambda: top_screens() == ["chat"])
    assert "conversationId=42" in page_text()

    # The service panel keeps up with it (read again soon after a batch), in whole numbers.
    def service():
        return script("""return Object.fromEntries([...document.querySelectorAll('#service dt')]
            .map(dt => [dt.textContent, dt.nextElementSibling.textContent]))""")
    wait("1 intent resolved in the service panel", lambda: service().get("intents resolved") == "1", timeout=5)
    panel = service()
    assert panel.get("sessions") == "1" and all("." not in v for v in panel.values()), panel

    # The page is the session's shell: it acknowledged the batch, so the intent landed.
    def metrics():
        with urllib.request.urlopen(f"{page_url}/metrics", timeout=10) as response:
            return response.read().decode()
    wait("the chat intent landed (the page's ack)",
         lambda: 'navigator_route_landed_total{route="chat"} 1' in metrics().splitlines(), timeout=10)
    shot("intent-over-zeromq")

    # 3. Back on the page changes the service's tree.
    script("document.getElementById('back').click()")
    wait("the chat list on top", lambda: top_screens() == ["chatList"])
    with urllib.request.urlopen(f"{page_url}/v1/sessions/{session}", timeout=10) as response:
        snapshot = json.loads(response.read())["snapshot"]
    tabs = snapshot["tree"]["root"]["tabBar"]["tabs"]
    chats = next(t for t in tabs if t["name"] == "chats")
    assert [s["context"]["screen"] for s in chats["stack"]] == ["chatList"], chats
    shot("back")

    # 4. navigatord killed and started again: the page reconnects and shows its tree.
    subprocess.run(restart_cmd, shell=True, check=True, timeout=60)
    navctl_run("send", "--wait", "--session", session, "settings")
    wait("settings on top after the restart", lambda: top_screens() == ["settings"], timeout=30)
    wait("the live status again", lambda: script("return document.getElementById('status').dataset.state") == "live")
    shot("after-restart")

    # 5. The dashboard: navload with every session's shell acknowledging, and editProfile for
    # sessions never signed in (its guard never met: parked, then expired after 300 ms).
    for n in range(5):
        navctl_run("send", "--wait", "--session", f"guarded-{n}", "--ttl", "300", "editProfile")
    subprocess.run([navload, "--intents", intents_endpoint, "--requests", requests_endpoint, "--commands",
                    commands_endpoint, "--rate", "200", "--duration", "4", "--warmup", "0", "--sessions", "100",
                    "--ack-share", "100"], check=True, capture_output=True, text=True, timeout=120)
    call("POST", f"/session/{sid}/window/rect", {"width": 1280, "height": 1500})
    call("POST", f"/session/{sid}/url", {"url": f"{page_url}/dashboard"})

    def bars():
        return script("""return [...document.querySelectorAll('#routes svg text[data-route]')].map(t =>
            [t.dataset.route, t.nextElementSibling.nextElementSibling.nextElementSibling.textContent])""")
    # Two samples (5 s apart) make a line; the routes' bars need one.
    wait("the intents plot", lambda: script("return document.querySelectorAll('#intents polyline').length") >= 2,
         timeout=30)
    wait("the time-to-land plot", lambda: script("return document.querySelectorAll('#land polyline, #land circle').length") >= 1,
         timeout=30)
    wait("editProfile among the routes", lambda: any(route == "editProfile" for route, _ in bars()), timeout=30)
    rates = [(route, float(text.split(" %")[0])) for route, text in bars()]
    edit = dict(rates)["editProfile"]
    assert edit == 0.0 and rates[0][1] == 0.0, rates
    assert [rate for _, rate in rates] == sorted(rate for _, rate in rates), rates  # worst first
    assert any(rate > 90 for _, rate in rates), rates  # acknowledged routes landed
    assert "0.0 %  (0 of 5)" in dict(bars())["editProfile"], bars()
    shot("dashboard")
    print("page test: 5 steps passed")
finally:
    call("DELETE", f"/session/{sid}")
