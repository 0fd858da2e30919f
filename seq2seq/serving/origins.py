"""Which requests the gate lets through by where they come from: the app's own page and programs, not another site's
page in the technician's browser.

- **DNS rebinding.** A page on ``evil.example`` can point its own name at 127.0.0.1 and then read this app's answers
  as its own origin, feedback and uploads included. Its requests carry ``Host: evil.example``, so an app bound to
  a loopback address answers only requests that name it by a loopback name (``localhost``, ``127.x.x.x``, ``::1``)
  or by a name the operator allowed (``--allowed-host``, for a reverse proxy that passes its public name on).
- **Cross-site requests.** Another site's page may still send this app a POST without reading the answer (a plain
  form, an upload, ``text/plain`` to ``/api/recommend``): work, and files, on a stranger's say. A browser names the
  sending page in ``Origin``; a request with a body whose ``Origin`` is neither this app (the ``Host`` it was sent
  to, or a loopback name on the same port when the app is bound to loopback) nor an allowed name is refused. Programs
  (gradio_client, curl) send no ``Origin`` and are not affected.

An app bound to every address (``--host 0.0.0.0``) is reached by names it cannot know, so only the second rule holds.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

CHANGING_METHODS = ("POST", "PUT", "PATCH", "DELETE")  # what a cross-site page may not ask


def is_loopback(name: str | None) -> bool:
    """``localhost`` (or a name under it), or an address of the loopback network."""
    if not name:
        return False
    name = name.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def _split(authority: str) -> tuple[str | None, int | None]:
    """("127.0.0.1", 7860) of "127.0.0.1:7860"; the name lower-cased, IPv6 without its brackets; (None, None) when
    it is no host[:port]."""
    try:
        parts = urlsplit(f"//{authority}")
        return (parts.hostname.rstrip(".") if parts.hostname else None), parts.port  # "name." is "name"
    except ValueError:  # a port that is no number, a bracket left open
        return None, None


class Origins:
    """``fault(scope)``: why a request is refused by where it comes from, or None. ``bound``: the address the app
    serves on; ``allowed``: further names it may be reached by (a reverse proxy's public name)."""

    def __init__(self, bound: str, allowed: tuple[str, ...] = ()) -> None:
        self.bound = bound
        self.loopback_only = is_loopback(bound)
        self.allowed = {name.lower().rstrip(".") for name in allowed}

    def fault(self, scope: dict) -> str | None:
        headers = {key.lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        host = headers.get(b"host")
        if host is None:  # HTTP/1.0 from a program: a browser always names the host
            host = self.bound
        name, port = _split(host)
        if self.loopback_only and not (is_loopback(name) or name in self.allowed):
            return (f"Host {host[:80]!r} is not a name of this app, which serves {self.bound} only (a page that "
                    "points its own name at this machine is refused); to serve it under that name, start it with "
                    "--allowed-host NAME")
        origin = headers.get(b"origin")
        if origin is None or scope.get("method") not in CHANGING_METHODS:
            return None
        try:  # "null": a sandboxed frame or a file on disk
            sender = urlsplit(origin).netloc if origin != "null" else ""
        except ValueError:
            sender = ""
        sender_name, sender_port = _split(sender) if sender else (None, None)
        same = sender_name is not None and (sender.lower() == host.lower() or sender_name in self.allowed or (
            self.loopback_only and is_loopback(sender_name) and sender_port == port))
        if not same:
            return (f"a request sent by the page of another site ({origin[:80]!r}) is refused: this app answers its "
                    "own page and programs (which send no Origin header)")
        return None
