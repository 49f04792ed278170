#!/usr/bin/env python3
"""Looks at geofence's map page (Docs/map.md) in headless Chromium, for the tests.

  map-probe.py pixels FILE.png X,Y ...
      The colour at each point of a PNG screenshot: the commonest of the 5x5 pixels around it (so that a
      line of the graticule or an edge does not decide), as a JSON list of [r, g, b].

  map-probe.py watch URL --state STATE --screenshot FILE.png --events N --timeout S [--size WxH]
                  [--points LAT,LON;LAT,LON...]
      Opens URL in headless Chromium (driven through --remote-debugging-pipe: the DevTools protocol on
      file descriptors 3 and 4, no socket), waits until the page's body says data-state=STATE, saves a
      screenshot, prints {"ready": ...} (with "points": where the page's Leaflet map puts each of --points,
      geofenceMap.latLngToContainerPoint, as [x, y]; null without Leaflet) and then one line {"lastEvent": ID, "events": N, "at": UNIX TIME}
      each time the page shows a new latest event (it looks every 10 ms), with the ids the page lists
      (newest first), until N lines or S seconds, or a SIGTERM (Chromium is closed in every case).

Only Python's standard library; the PNG decoder reads what Chromium writes (8-bit RGB or RGBA, not
interlaced).
"""
import base64, json, os, shutil, signal, struct, subprocess, sys, tempfile, time, zlib


def decode_png(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "unsupported PNG"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        previous = line
    return width, height, channels, rows


def pixels(path, points):
    width, height, channels, rows = decode_png(open(path, "rb").read())
    out = []
    for point in points:
        x, y = (int(round(float(v))) for v in point.split(","))
        counts = {}
        for yy in range(max(0, y - 2), min(height, y + 3)):
            for xx in range(max(0, x - 2), min(width, x + 3)):
                px = tuple(rows[yy][xx * channels:xx * channels + 3])
                counts[px] = counts.get(px, 0) + 1
        out.append(list(max(counts, key=counts.get)) if counts else None)
    print(json.dumps({"size": [width, height], "colours": out}))


class DevTools:
    def __init__(self, chromium, width, height):
        self.profile = tempfile.mkdtemp(prefix="map-probe-")
        to_chrome, self.send_fd = os.pipe()
        self.recv_fd, from_chrome = os.pipe()

        def fds():
            os.dup2(to_chrome, 3)
            os.dup2(from_chrome, 4)

        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--user-data-dir=" + self.profile, f"--window-size={width},{height}",
             "--force-device-scale-factor=1", "--hide-scrollbars", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome)
        os.close(from_chrome)
        self.next_id, self.buffer = 0, b""

    def call(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.send_fd, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.recv_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium went away")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def watch(url, state, screenshot, events, timeout, width, height, chromium, points):
    tools = DevTools(chromium, width, height)
    try:
        target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tools.call("Emulation.setDeviceMetricsOverride",
                   {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        tools.call("Page.enable", {}, session)
        tools.call("Page.navigate", {"url": url}, session)

        def body(expression):
            result = tools.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            return result["result"].get("value")

        deadline = time.time() + timeout
        look = "document.body ? [document.body.dataset.state, document.body.dataset.lastEvent || null, " \
               "Number(document.body.dataset.events || 0), document.getElementById('status').textContent, " \
               "Array.from(document.querySelectorAll('#events li')).map(li => li.dataset.id)] : null"
        seen = body(look)
        while not seen or seen[0] != state:
            if time.time() > deadline:
                print(json.dumps({"error": f"the page did not reach data-state={state}", "page": seen}), flush=True)
                return 1
            time.sleep(0.02)
            seen = body(look)
        shot = tools.call("Page.captureScreenshot", {"format": "png"}, session)
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        where = body("window.geofenceMap ? " + json.dumps(points) + ".map(p => { "
                     "const c = geofenceMap.latLngToContainerPoint(p); return [c.x, c.y]; }) : null")
        print(json.dumps({"ready": seen[0], "lastEvent": seen[1], "events": seen[2], "points": where}), flush=True)
        last, told = seen[1], 0
        while told < events and time.time() < deadline:
            now = body(look)
            if now and now[1] != last:
                last = now[1]
                print(json.dumps({"lastEvent": last, "events": now[2], "at": time.time(), "ids": now[4]}), flush=True)
                told += 1
            time.sleep(0.01)
        return 0
    finally:
        tools.close()


def main(argv):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if len(argv) >= 2 and argv[0] == "pixels":
        pixels(argv[1], argv[2:])
        return 0
    if len(argv) >= 2 and argv[0] == "watch":
        options = {"--state": "live", "--screenshot": "map.png", "--events": "0", "--timeout": "30",
                   "--size": "1000x700", "--chromium": shutil.which("chromium") or "chromium", "--points": ""}
        rest = argv[2:]
        for name, value in zip(rest[::2], rest[1::2]):
            if name not in options:
                sys.exit(f"map-probe.py: unknown option {name}")
            options[name] = value
        width, height = (int(v) for v in options["--size"].split("x"))
        return watch(argv[1], options["--state"], options["--screenshot"], int(options["--events"]),
                     float(options["--timeout"]), width, height, options["--chromium"],
                     [[float(v) for v in p.split(",")] for p in options["--points"].split(";") if p])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
