"""Which auth ``jobloom serve`` chooses for an address: tokens always; ``--insecure-no-auth`` on loopback only."""

from __future__ import annotations

import pytest

from jobloom.cli.common import UsageProblem
from jobloom.cli.serve import choose_auth, is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)
    assert choose_auth(host, False) == "required"
    assert choose_auth(host, True) == "off"


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "example.com", "192.168.1.1"])
def test_other_addresses_always_need_a_token(host: str) -> None:
    assert not is_loopback(host)
    assert choose_auth(host, False) == "required"
    with pytest.raises(UsageProblem, match="not a loopback address"):
        choose_auth(host, True)
