#!/usr/bin/env python3
"""A git smart-HTTP server for tests: `git http-backend` as a CGI behind HTTP basic auth, on
127.0.0.1 only.

Usage: git-http-server.py PROJECT_ROOT PORT_FILE LOG_FILE USER:SHA256_OF_PASSWORD

Serves every repository under PROJECT_ROOT. A request without an Authorization header, or
with a wrong user or password, gets 401 with a Basic challenge; the password is compared by
its SHA-256, so the command line never carries it. Writes the port it listens on to
PORT_FILE once it accepts connections, and one line per request to LOG_FILE
("401 no-auth", "401 wrong", "200 alice GET /repo.git/info/refs"). Runs until SIGTERM.
"""

import base64
import hashlib
import hmac
import http.server
import os
import signal
import subprocess
import sys


def main() -> None:
    project_root, port_file, log_file, expected = sys.argv[1:5]
    user, password_sha256 = expected.split(":", 1)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # the log file below records requests instead
            pass

        def record(self, line: str) -> None:
            with open(log_file, "a", encoding="utf-8") as log:
                log.write(line + "\n")

        def authorized_user(self) -> str | None:
            header = self.headers.get("Authorization", "")
            if not header.startswith("Basic "):
                self.record("401 no-auth")
                return None
            try:
                given_user, given_password = base64.b64decode(header[6:]).decode("utf-8").split(":", 1)
            except (ValueError, UnicodeDecodeError):
                self.record("401 malformed")
                return None
            digest = hashlib.sha256(given_password.encode("utf-8")).hexdigest()
            if given_user != user or not hmac.compare_digest(digest, password_sha256):
                self.record("401 wrong")
                return None
            return given_user

        def challenge(self) -> None:
            body = b"authentication required\n"
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="lockbox-test"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.serve()

        def do_POST(self) -> None:
            self.serve()

        def serve(self) -> None:
            length = int(self.headers.get("Content-Length", "0") or "0")
            body = self.rfile.read(length) if length else b""
            remote_user = self.authorized_user()
            if remote_user is None:
                self.challenge()
                return
            path, _, query = self.path.partition("?")
            environment = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": project_root,
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": remote_user,
                "REMOTE_ADDR": self.client_address[0],
                "GATEWAY_INTERFACE": "CGI/1.1",
                "SERVER_PROTOCOL": "HTTP/1.1",
            }
            for header, variable in (("Git-Protocol", "HTTP_GIT_PROTOCOL"), ("Content-Encoding", "HTTP_CONTENT_ENCODING")):
                if header in self.headers:
                    environment[variable] = self.headers[header]
            result = subprocess.run(
                ["git", "http-backend"], input=body, env=environment, capture_output=True, timeout=60, check=False
            )
            head, _, payload = result.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = result.stdout.partition(b"\n\n")
            status = 200
            headers = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.record(f"{status} {remote_user} {self.command} {path}")
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(port_file + ".tmp", "w", encoding="utf-8") as out:
        out.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
