"""No network: not the internet, not cloud metadata, not the server on the host's loopback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.security.helpers import Secrets, assert_no_secrets, everything, run, stdout
from tests.support.live_server import LiveServer

CONNECT = """
import socket
try:
    sock = socket.create_connection(({host!r}, {port}), timeout=3)
    print('ESCAPED: connected to', sock.getpeername())
except Exception as exc:
    print('BLOCKED:' + type(exc).__name__, exc)
"""

Endpoint = Callable[[LiveServer], tuple[str, int]]
ENDPOINTS: dict[str, Endpoint] = {
    "cloudflare_dns_tcp": lambda s: ("1.1.1.1", 53),
    "google_https": lambda s: ("8.8.8.8", 443),
    "cloud_metadata": lambda s: ("169.254.169.254", 80),
    "server_on_host_loopback": lambda s: ("127.0.0.1", s.port),
}


@pytest.mark.parametrize("endpoint", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_tcp_connect_fails(server: LiveServer, sid: str, endpoint: Endpoint) -> None:
    host, port = endpoint(server)
    result = run(server, CONNECT.format(host=host, port=port), sid)
    assert "BLOCKED:" in stdout(result), everything(result)[:2000]
    assert "ESCAPED" not in stdout(result)


def test_dns_and_udp_fail(server: LiveServer, sid: str) -> None:
    code = (
        "import socket\n"
        "for name in ('example.com', 'metadata.google.internal'):\n"
        "    try:\n"
        "        print('ESCAPED:', socket.getaddrinfo(name, 80))\n"
        "    except Exception as exc:\n"
        "        print('BLOCKED:' + type(exc).__name__)\n"
        "sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n"
        "    sock.sendto(b'\\x12\\x34' + b'\\x00' * 10, ('8.8.8.8', 53))\n"
        "    print('ESCAPED: sent')\n"
        "except Exception as exc:\n"
        "    print('BLOCKED:' + type(exc).__name__)\n"
    )
    result = run(server, code, sid)
    assert "ESCAPED" not in stdout(result), stdout(result)
    assert stdout(result).count("BLOCKED:") == 3, everything(result)[:2000]


def test_only_an_isolated_loopback(server: LiveServer, secrets: Secrets, sid: str) -> None:
    code = (
        "import socket, urllib.request\n"
        "print('IFACES', [name for _, name in socket.if_nameindex()])\n"
        "print(open('/proc/net/tcp').read())\n"
        f"for url in ({server.url + '/health'!r}, 'http://localhost:{server.port}/health'):\n"
        "    try:\n"
        "        print('ESCAPED:', urllib.request.urlopen(url, timeout=3).read())\n"
        "    except Exception as exc:\n"
        "        print('BLOCKED:' + type(exc).__name__)\n"
    )
    result = run(server, code, sid)
    text = everything(result)
    assert "IFACES ['lo']" in stdout(result), text[:2000]
    # The server's listening socket lives in the host's namespace: not visible here.
    assert f":{server.port:04X}" not in stdout(result)
    assert stdout(result).count("BLOCKED:") == 2, text[:2000]
    assert '"status"' not in text
    assert_no_secrets(text, secrets)
