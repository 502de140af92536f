"""Talking to the hub as a person does: log in through the login form (PAM), then ask for an
API token of one's own (POST /hub/api/users/<me>/tokens with the xsrf cookie, as the hub's
token page does), and call the hub and one's own server with it."""

from __future__ import annotations

import time

import requests


class Person:
    def __init__(self, url: str, name: str, password: str):
        self.url, self.name = url, name
        self.web = requests.Session()
        self.web.get(f"{url}/hub/login", timeout=30)
        reply = self.web.post(f"{url}/hub/login", data={
            "username": name, "password": password, "_xsrf": self.web.cookies.get("_xsrf", path="/hub/")},
            allow_redirects=False, timeout=60)
        if reply.status_code != 302:
            raise PermissionError(f"{name}: login refused ({reply.status_code})")
        xsrf = self.web.cookies.get("_xsrf", path="/hub/")
        made = self.web.post(f"{url}/hub/api/users/{name}/tokens", json={"note": "hub tests", "expires_in": 3600},
                             headers={"X-XSRFToken": xsrf}, timeout=30)
        made.raise_for_status()
        self.token = made.json()["token"]

    def hub(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, f"{self.url}/hub/api{path}",
                                headers={"Authorization": f"token {self.token}"}, timeout=60, **kw)

    def server(self, method: str, path: str, user: str | None = None, **kw) -> requests.Response:
        """``/user/<user>/<path>`` (one's own by default) with one's own token."""
        return requests.request(method, f"{self.url}/user/{user or self.name}/{path.lstrip('/')}",
                                headers={"Authorization": f"token {self.token}"}, timeout=120, **kw)

    def start(self, timeout: float = 240) -> None:
        reply = self.hub("POST", f"/users/{self.name}/server")
        if reply.status_code not in (201, 202, 400):  # 400: already running
            raise RuntimeError(f"{self.name}: spawn failed {reply.status_code} {reply.text}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            model = self.hub("GET", f"/users/{self.name}").json()
            server = model.get("servers", {}).get("", {})
            if server.get("ready"):
                return
            time.sleep(1)
        raise TimeoutError(f"{self.name}'s server did not start in {timeout} s")

    def stop(self) -> None:
        self.hub("DELETE", f"/users/{self.name}/server")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not self.hub("GET", f"/users/{self.name}").json().get("servers"):
                return
            time.sleep(0.5)
