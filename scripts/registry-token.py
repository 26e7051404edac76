#!/usr/bin/python3
"""The token server of scripts/registry.sh: Docker's token authentication for the test
registry that asks for bearer tokens, so clients are tested against a real bearer realm.
The registry (distribution) verifies every token: signature (the key id of its
certificate), issuer, audience, expiry, and the actions granted on the repository.

  registry-token.py PORT KEY.pem ISSUER SERVICE USER PASSWORD_FILE

GET /auth?service=SERVICE&scope=repository:NAME:ACTIONS (scope repeatable):
  - with USER and PASSWORD (basic): a token granting the actions asked for;
  - without credentials: a token granting nothing (the registry then answers 401, as
    registries answer an anonymous pull of a private repository);
  - with wrong credentials, or for another service: 401.
Runs until SIGTERM; listens on 127.0.0.1 only. Needs Debian's python3-jwt (PyJWT) and
python3-cryptography, hence /usr/bin/python3.
"""
import base64, hashlib, hmac, json, sys, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization

port, key_file, issuer, service, user, password_file = sys.argv[1:7]
password = open(password_file).read().strip()
key = serialization.load_pem_private_key(open(key_file, "rb").read(), password=None)


def key_id(public_key):
    """The registry finds the verifying key by libtrust's key id: the first 240 bits of the
    SHA-256 of the DER public key, base32, in groups of four joined by colons."""
    der = public_key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    b32 = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode().rstrip("=")
    return ":".join(b32[i:i + 4] for i in range(0, len(b32), 4))


KID = key_id(key.public_key())


def granted(scopes):
    """repository:NAME:pull,push -> the access claim's entries (everything asked for)."""
    access = []
    for scope in scopes:
        kind, _, rest = scope.partition(":")
        name, _, actions = rest.rpartition(":")
        if kind == "repository" and name:
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
    return access


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path != "/auth" or query.get("service", [service])[0] != service:
            return self.answer(404 if url.path != "/auth" else 401, {"details": "unknown service"})
        who = self.who()
        if who is None:
            return self.answer(401, {"details": "wrong username or password"})
        now = int(time.time())
        claims = {
            "iss": issuer, "sub": who, "aud": service, "iat": now, "nbf": now - 5,
            "exp": now + 300, "jti": uuid.uuid4().hex,
            "access": granted(query.get("scope", [])) if who else [],
        }
        token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})
        self.answer(200, {"token": token, "access_token": token, "expires_in": 300,
                          "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))})

    def who(self):
        """'' for anonymous, USER for the right credentials, None for wrong ones."""
        header = self.headers.get("Authorization", "")
        if not header:
            return ""
        scheme, _, value = header.partition(" ")
        try:
            given_user, _, given_password = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return None
        ok = scheme.lower() == "basic" and hmac.compare_digest(given_user.encode(), user.encode()) \
            and hmac.compare_digest(given_password.encode(), password.encode())
        return user if ok else None

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):  # one line per request, in the log file
        sys.stderr.write("token: %s\n" % (fmt % args))


ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
