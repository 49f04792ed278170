#!/usr/bin/env python3
"""A webhook receiver for geofence's HTTP sink (Docs/http.md): for the tests, and as a starting point.

It listens on 127.0.0.1 (HTTP/1.1, keep-alive), verifies X-Geofence-Signature when given the secret, and
appends one JSON line per request to --log: the connection it came on (numbered from 1, so a test can count
connections), its headers, its body, what it answered and whether its signature verified.

What it answers is scripted by --plan, a file read at each request: line N is the answer to request N
(counted from 1 since the receiver started), `STATUS [BODY]` or `hang SECONDS` (answer nothing for that
long); past the plan's end, 200. --delay waits that long before each answer. With --tls-cert and --tls-key
it speaks HTTPS.

  python3 Scripts/webhook-receiver.py --port 8080 --secret-file /etc/geofence/webhook.secret --log requests.jsonl
"""

import argparse
import hashlib
import hmac
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def verify(secret, header, body, tolerance=None):
    """True when `header` (t=UNIX,v1=HEX) is the HMAC-SHA256 under `secret` of b"<t>." + body."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        t = fields["t"]
        expected = hmac.new(secret, t.encode() + b"." + body, hashlib.sha256).hexdigest()
        if tolerance is not None and abs(time.time() - int(t)) > tolerance:
            return False
        return hmac.compare_digest(expected, fields["v1"])
    except (KeyError, ValueError):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="the port (0: any free one)")
    parser.add_argument("--port-file", help="write the port here once listening")
    parser.add_argument("--log", help="append a JSON line per request here")
    parser.add_argument("--plan", help="the answers, a line per request")
    parser.add_argument("--secret-file", help="verify signatures with the secret in this file")
    parser.add_argument("--delay", type=float, default=0, help="seconds to wait before each answer")
    parser.add_argument("--tls-cert", help="speak HTTPS with this certificate (PEM)")
    parser.add_argument("--tls-key", help="and this key (PEM)")
    args = parser.parse_args()

    secret = None
    if args.secret_file:
        with open(args.secret_file, "rb") as f:
            secret = f.read().rstrip(b"\r\n")
    lock = threading.Lock()
    counters = {"connections": 0, "requests": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            with lock:
                counters["connections"] += 1
                self.connection_number = counters["connections"]

        def log_message(self, format, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                counters["requests"] += 1
                number = counters["requests"]
            answer = "200"
            if args.plan:
                try:
                    with open(args.plan) as f:
                        lines = f.read().splitlines()
                    if number <= len(lines):
                        answer = lines[number - 1]
                except FileNotFoundError:
                    pass
            verified = None
            if secret is not None:
                verified = verify(secret, self.headers.get("X-Geofence-Signature", ""), body)
            word, _, text = answer.partition(" ")
            record = {
                "request": number, "connection": self.connection_number, "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body.decode("utf-8", "replace"), "answer": word, "verified": verified,
            }
            if args.log:
                with lock, open(args.log, "a") as f:
                    f.write(json.dumps(record) + "\n")
            if word == "hang":
                time.sleep(float(text or 60))
                self.close_connection = True
                return
            if args.delay:
                time.sleep(args.delay)
            payload = text.encode()
            self.send_response(int(word))
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        os.rename(args.port_file + ".tmp", args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
