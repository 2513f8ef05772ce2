"""A local GitHub REST API: the issue, comment, label and user endpoints mlcopilot uses.

Real paths (``/repos/{owner}/{repo}/issues`` …, also under ``/api/v3`` as on GitHub Enterprise
Server), real status codes (201 on create, 401 "Bad credentials", 404, 422 "Validation
Failed" for a title over 256 or a body over 65 536 characters), and the rate-limit headers
(``x-ratelimit-*``) GitHub sends. Issues filter by label and state and paginate with ``Link``.

Behaviours a test switches on, as GitHub (or a network in front of it) shows them:
:meth:`FakeGitHub.reset_in_the_past` (a primary rate limit whose ``x-ratelimit-reset`` has
already passed by the client's clock), :meth:`FakeGitHub.always_429` (``429`` with
``Retry-After`` on every request) and :meth:`FakeGitHub.drip` (headers at once, then the body
one byte at a time).
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import UTC, datetime
from typing import Any

from testing.fakes.http import FakeServer, Request, Response

BOT = "mlcopilot-bot"
TOKEN = "ghp_" + "T" * 36


class FakeGitHub(FakeServer):
    def __init__(self, *, token: str = TOKEN, prefix: str = "", login: str = BOT) -> None:
        super().__init__()
        self.token = token
        self.login = login
        self.issues: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.labels: dict[str, dict[str, Any]] = {}
        self._ids = 1000
        self._guard = threading.Lock()
        self._limited: Response | None = None
        self._drip: tuple[float, bool] | None = None
        repo = prefix + r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        self.route("GET", prefix + "/user", self._user)
        self.route("GET", repo + "/labels/(?P<name>[^/]+)", self._get_label)
        self.route("POST", repo + "/labels", self._create_label)
        self.route("GET", repo + "/issues", self._list)
        self.route("POST", repo + "/issues", self._create)
        self.route("GET", repo + r"/issues/(?P<n>\d+)", self._get)
        self.route("PATCH", repo + r"/issues/(?P<n>\d+)", self._update)
        self.route("GET", repo + r"/issues/(?P<n>\d+)/comments", self._list_comments)
        self.route("POST", repo + r"/issues/(?P<n>\d+)/comments", self._comment)

    # --- helpers for tests

    def created(self) -> list[Request]:
        return self.calls("POST", r".*/repos/[^/]+/[^/]+/issues")

    def comment_posts(self) -> list[Request]:
        return self.calls("POST", r".*/issues/\d+/comments")

    def add_foreign_issue(
        self, body: str, *, login: str = "mallory", labels: tuple[str, ...] = ("mlcopilot",)
    ) -> int:
        return int(self._new_issue("forged", body, list(labels), login)["number"])

    def assign(self, number: int, login: str) -> None:
        self.issues[number]["assignees"] = [_user(login)]
        self.issues[number]["assignee"] = _user(login)

    # --- behaviours

    def reset_in_the_past(self, *, skew_s: int = 120) -> None:
        """Answer every request with GitHub's primary rate limit, reset ``skew_s`` ago.

        What a client whose clock runs ahead of GitHub's sees: ``x-ratelimit-remaining: 0``
        and a reset time it has already passed.
        """
        reset = str(int(time.time()) - skew_s)
        self._limited = Response(
            403,
            {
                "message": "API rate limit exceeded for user ID 1.",
                "documentation_url": _DOCS + "/overview/rate-limits-for-the-rest-api",
            },
            {"x-ratelimit-remaining": "0", "x-ratelimit-used": "5000", "x-ratelimit-reset": reset},
        )

    def always_429(self, *, retry_after: str = "1") -> None:
        """Answer every request ``429 Too Many Requests`` with ``Retry-After``, forever."""
        self._limited = Response(
            429,
            {"message": "You have exceeded a secondary rate limit.", "documentation_url": _DOCS},
            {"retry-after": retry_after},
        )

    def stop_limiting(self) -> None:
        """Answer normally again."""
        self._limited = None

    def drip(self, interval_s: float | None, *, headers: bool = False) -> None:
        """Send each response's body one byte every ``interval_s`` (a slow drip).

        With ``headers``, the status line and headers drip too. Each byte comes well within
        any read timeout.
        """
        self._drip = None if interval_s is None else (interval_s, headers)

    # --- routing

    def _route(self, request: Request) -> Response:
        auth = request.headers.get("authorization", "")
        if auth not in (f"token {self.token}", f"Bearer {self.token}"):
            return Response(401, {"message": "Bad credentials", "documentation_url": _DOCS})
        if self._limited is not None:
            return Response(self._limited.status, self._limited.body, dict(self._limited.headers))
        return super()._route(request)

    def _send(self, h: Any, response: Response) -> None:
        now = int(datetime.now(UTC).timestamp())
        defaults = {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": "4999",
            "x-ratelimit-reset": str(now + 3600),
            "x-ratelimit-used": "1",
            "x-ratelimit-resource": "core",
            "x-github-request-id": "F00D:1234:5678",
        }
        response.headers = {**defaults, **response.headers}
        if self._drip is None:
            super()._send(h, response)
            return
        interval, headers_too = self._drip
        body = json.dumps(response.body).encode() if response.body is not None else b""
        head = f"HTTP/1.1 {response.status} {h.responses[response.status][0]}\r\n"
        fields = {
            "Content-Type": response.content_type,
            "Content-Length": str(len(body)),
            **response.headers,
        }
        head += "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
        at_once, dripped = (b"", head.encode() + body) if headers_too else (head.encode(), body)
        try:
            h.wfile.write(at_once)
            h.wfile.flush()
            for i in range(len(dripped)):
                time.sleep(interval)
                h.wfile.write(dripped[i : i + 1])
                h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: what we test
            pass

    def _user(self, request: Request, m: re.Match[str]) -> Response:
        return Response(200, _user(self.login))

    def _get_label(self, request: Request, m: re.Match[str]) -> Response:
        label = self.labels.get(m["name"])
        if label is None:
            return Response(404, {"message": "Not Found", "documentation_url": _DOCS})
        return Response(200, label)

    def _create_label(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        if data["name"] in self.labels:
            return Response(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "Label", "code": "already_exists", "field": "name"}],
                },
            )
        self._ids += 1
        label = {
            "id": self._ids,
            "node_id": f"LA_{self._ids}",
            "url": f"{self.url}/labels/{data['name']}",
            "name": data["name"],
            "color": data.get("color", "ededed"),
            "default": False,
            "description": data.get("description"),
        }
        self.labels[data["name"]] = label
        return Response(201, label)

    def _list(self, request: Request, m: re.Match[str]) -> Response:
        wanted = [x for x in request.query.get("labels", "").split(",") if x]
        state = request.query.get("state", "open")
        issues = [
            i
            for i in sorted(self.issues.values(), key=lambda i: -i["number"])
            if (state == "all" or i["state"] == state)
            and i["repository"] == _repo(m)
            and all(w in {label["name"] for label in i["labels"]} for w in wanted)
        ]
        per_page = int(request.query.get("per_page", 30))
        page = int(request.query.get("page", 1))
        chunk = issues[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(issues):
            headers["Link"] = f'<{self.url}{request.path}?page={page + 1}>; rel="next"'
        return Response(200, chunk, headers)

    def _create(self, request: Request, m: re.Match[str]) -> Response:
        data = request.json()
        title, body = data.get("title"), data.get("body") or ""
        if not title:
            return _invalid("Issue", "title", "missing_field")
        if len(title) > 256:
            return _invalid(
                "Issue", "title", "custom", "title is too long (maximum is 256 characters)"
            )
        if len(body) > 65536:
            return _invalid(
                "Issue", "body", "custom", "body is too long (maximum is 65536 characters)"
            )
        issue = self._new_issue(
            title, body, data.get("labels", []), self.login, repository=_repo(m)
        )
        return Response(201, issue, {"Location": issue["url"]})

    def _issue(self, m: re.Match[str]) -> dict[str, Any] | None:
        """The issue numbered in the path, if it is in the path's repository (as GitHub's are)."""
        issue = self.issues.get(int(m["n"]))
        return issue if issue is not None and issue["repository"] == _repo(m) else None

    def in_repo(self, repository: str) -> list[dict[str, Any]]:
        """The issues of ``owner/name``, by number."""
        return [i for _, i in sorted(self.issues.items()) if i["repository"] == repository]

    def _get(self, request: Request, m: re.Match[str]) -> Response:
        issue = self._issue(m)
        return Response(200, issue) if issue else Response(404, {"message": "Not Found"})

    def _update(self, request: Request, m: re.Match[str]) -> Response:
        issue = self._issue(m)
        if issue is None:
            return Response(404, {"message": "Not Found"})
        data = request.json()
        if "state" in data and data["state"] != issue["state"]:
            issue["state"] = data["state"]
            issue["state_reason"] = data.get("state_reason")
            issue["closed_at"] = _now() if data["state"] == "closed" else None
        issue["updated_at"] = _now()
        return Response(200, issue)

    def _list_comments(self, request: Request, m: re.Match[str]) -> Response:
        comments = self.comments.get(int(m["n"]), [])
        per_page = int(request.query.get("per_page", 30))
        page = int(request.query.get("page", 1))
        return Response(200, comments[(page - 1) * per_page : page * per_page])

    def _comment(self, request: Request, m: re.Match[str]) -> Response:
        number = int(m["n"])
        if self._issue(m) is None:
            return Response(404, {"message": "Not Found"})
        body = request.json().get("body") or ""
        if len(body) > 65536:
            return _invalid("IssueComment", "body", "custom", "body is too long")
        with self._guard:
            self._ids += 1
            comment = {
                "id": self._ids,
                "node_id": f"IC_{self._ids}",
                "url": f"{self.url}/comments/{self._ids}",
                "html_url": f"https://github.com/o/r/issues/{number}#issuecomment-{self._ids}",
                "body": body,
                "user": _user(self.login),
                "created_at": _now(),
                "updated_at": _now(),
                "author_association": "NONE",
            }
            self.comments.setdefault(number, []).append(comment)
            self.issues[number]["comments"] += 1
        return Response(201, comment)

    def _new_issue(
        self,
        title: str,
        body: str,
        labels: list[str],
        login: str,
        *,
        repository: str = "acme/ml-alerts",
    ) -> dict[str, Any]:
        with self._guard:
            number = len(self.issues) + 1
            self._ids += 1
            issue = {
                "id": self._ids,
                "node_id": f"I_{self._ids}",
                "url": f"{self.url}/repos/{repository}/issues/{number}",
                "html_url": f"https://github.com/{repository}/issues/{number}",
                "number": number,
                "repository": repository,
                "state": "open",
                "state_reason": None,
                "title": title,
                "body": body,
                "user": _user(login),
                "labels": [self.labels.get(n, {"name": n}) for n in labels],
                "assignee": None,
                "assignees": [],
                "milestone": None,
                "locked": False,
                "comments": 0,
                "created_at": _now(),
                "updated_at": _now(),
                "closed_at": None,
                "author_association": "NONE",
            }
            self.issues[number] = issue
            return issue


_DOCS = "https://docs.github.com/rest"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _user(login: str) -> dict[str, Any]:
    return {"login": login, "id": abs(hash(login)) % 10**6, "type": "User", "site_admin": False}


def _invalid(resource: str, field: str, code: str, message: str | None = None) -> Response:
    error: dict[str, Any] = {"resource": resource, "field": field, "code": code}
    if message:
        error["message"] = message
    return Response(
        422, {"message": "Validation Failed", "errors": [error], "documentation_url": _DOCS}
    )


def _repo(m: re.Match[str]) -> str:
    return f"{m['owner']}/{m['repo']}"
