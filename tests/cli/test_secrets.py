"""Issue 12: credentials never appear in any output, whatever the URL's shape (real CLI processes).

Before: ``SCHOLAR_ES_URL=http://user:password@host:92x0`` ended ``scholar-es`` with a traceback
quoting the whole URL, password included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scholar_es.client import display_target

REPO = Path(__file__).resolve().parents[2]
SCHOLAR_ES = Path(sys.executable).with_name("scholar-es")
SECRET = "s3cr3t-Pa55"
API_KEY = "QUFBQUFBQUFBQUFB-apikey-value"


def run_cli(*args: str, env: dict[str, str], stdin: str = "GET /\n") -> subprocess.CompletedProcess:
    cmd = (
        [str(SCHOLAR_ES)]
        if SCHOLAR_ES.exists()
        else [sys.executable, "-c", "from scholar_es.cli import main; main()"]
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCHOLAR_ES_")}
    return subprocess.run(
        [*cmd, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "PYTHONPATH": str(REPO), **env},
        cwd=str(REPO),
    )


def _no_secret(proc: subprocess.CompletedProcess, *secrets: str) -> str:
    out = proc.stdout + proc.stderr
    for secret in secrets:
        assert secret not in out, out
    assert "Traceback" not in out, out
    return out


@pytest.mark.parametrize(
    "url",
    [
        f"http://elastic:{SECRET}@localhost:92x0",  # the case: a malformed port
        f"http://elastic:{SECRET}@localhost:-5",
        f"https://elastic:{SECRET}@localhost:99999999",
        f"http://elastic:{SECRET}@:9200",  # no host
        f"http://elastic:{SECRET}@[::1:9200",  # broken IPv6 literal
    ],
)
def test_malformed_url_is_one_redacted_error_line(url):
    proc = run_cli("console", env={"SCHOLAR_ES_URL": url})
    out = _no_secret(proc, SECRET)
    assert proc.returncode == 2, out
    assert proc.stderr.startswith("error: invalid cluster URL '") and "***@" in proc.stderr
    proc = run_cli("console", "--es", url, env={})
    _no_secret(proc, SECRET)
    assert proc.returncode == 2


@pytest.mark.parametrize("command", [["search", "what is x"], ["heads", "list"], ["index", "{papers}"]])
def test_other_commands_redact_a_malformed_url(command, tmp_path):
    papers = tmp_path / "p.jsonl"
    papers.write_text('{"id": "p1", "title": "x", "abstract": "y"}\n')
    args = [a.format(papers=papers) for a in command]
    proc = run_cli(*args, env={"SCHOLAR_ES_URL": f"http://elastic:{SECRET}@localhost:92x0"}, stdin="")
    _no_secret(proc, SECRET)
    assert proc.returncode == 2 and "invalid cluster URL 'http://***@localhost:92x0'" in proc.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"http://elastic:{SECRET}@127.0.0.1:1",
        f"HTTP://elastic:{SECRET}@127.0.0.1:1/prefix?pretty#frag",
        f"http://:{SECRET}@127.0.0.1:1",
        f"http://elastic:{SECRET[:4]}/{SECRET[4:]}@127.0.0.1:1",  # a '/' in the password
        f"http://elastic:{SECRET[:4]}@{SECRET[4:]}@127.0.0.1:1",  # an '@' in the password
        f"http://elastic:{SECRET[:4]}%40{SECRET[4:]}@[::1]:1",
    ],
)
def test_unreachable_cluster_with_password_in_url(url):
    proc = run_cli("console", env={"SCHOLAR_ES_URL": url})
    secrets = [SECRET, SECRET[4:]] if "/" in url.split("@")[0] or url.count("@") > 1 else [SECRET]
    out = _no_secret(proc, *secrets)
    assert '"transport_error"' in proc.stdout, out
    assert "warning" not in proc.stderr, out  # loopback: the password never leaves the machine
    # the same URL naming another machine warns, redacted (no request is sent: empty input)
    remote = url.replace("127.0.0.1", "es.example.invalid").replace("[::1]", "es.example.invalid")
    proc = run_cli("console", env={"SCHOLAR_ES_URL": remote}, stdin="")
    out = _no_secret(proc, *secrets)
    assert proc.stderr.count("warning: a password would travel unencrypted over") == 1, out
    assert "***@es.example.invalid" in proc.stderr


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.1.2.3", "[::1]"])
def test_credentials_over_http_to_a_local_serve_do_not_warn(host):
    """Issue 27: every CLI call against a local `scholar-es serve` printed the warning."""
    proc = run_cli(
        "console", "--es", f"http://{host}:1", env={"SCHOLAR_ES_API_KEY": API_KEY}, stdin="GET /\n"
    )
    _no_secret(proc, API_KEY)
    assert '"transport_error"' in proc.stdout and "warning" not in proc.stderr, proc.stderr


def test_api_key_and_env_password_over_http_warn_once_and_never_print():
    remote = "http://es.example.invalid:9200"
    proc = run_cli("console", env={"SCHOLAR_ES_URL": remote, "SCHOLAR_ES_API_KEY": API_KEY}, stdin="")
    _no_secret(proc, API_KEY)
    assert proc.stderr.count(f"warning: an API key would travel unencrypted over {remote}") == 1
    proc = run_cli(
        "console",
        "--es",
        "http://10.1.2.3:9200",
        env={"SCHOLAR_ES_USER": "elastic", "SCHOLAR_ES_PASSWORD": SECRET},
        stdin="",
    )
    _no_secret(proc, SECRET)
    assert proc.stderr.count("warning: a password would travel unencrypted over http://10.1.2.3:9200") == 1


def test_https_and_no_credentials_do_not_warn():
    proc = run_cli("console", env={"SCHOLAR_ES_URL": f"https://elastic:{SECRET}@127.0.0.1:1"})
    _no_secret(proc, SECRET)
    assert "warning" not in proc.stderr
    proc = run_cli("console", env={"SCHOLAR_ES_URL": "http://127.0.0.1:1"})
    assert "warning" not in proc.stderr


def test_unsupported_scheme_is_redacted():
    proc = run_cli("console", env={"SCHOLAR_ES_URL": f"ftp://elastic:{SECRET}@host/x"})
    _no_secret(proc, SECRET)
    assert proc.returncode == 2 and "unsupported target 'ftp://***@host/x'" in proc.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:p@h:9200/x?api_key=k#f", "https://***@h:9200/x"),
        ("http://u:p@h:92x0", "http://***@h:92x0"),
        ("http://u:p/q@h", "http://***@h"),
        ("http://h:9200", "http://h:9200"),
        ("./.scholar-es", "./.scholar-es"),
    ],
)
def test_display_target(url, shown):
    assert display_target(url) == shown
