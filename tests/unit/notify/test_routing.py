"""The routing file: what it resolves to, and a malformed file failing with one line naming it and the problem."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError
from acme.notify.routing import load_routing

GOOD = """
channels:
  mail: {kind: smtp, connection: smtp_h29a, from: acme@acme.example}
  chat: {kind: apprise, connection: apprise_h29a}
owners:
  channel: mail
  domain: acme.example
  addresses: {alice: alice.w@lab.example}
oncall:
  gpu_threshold: 128
  default: chat
  clusters:
    seren: {channel: mail, to: oncall-seren@acme.example}
"""


def test_the_shipped_file_routes_nothing_so_messages_stay_queued():
    routing = load_routing()  # include/config/notify.yaml (ACME_NOTIFY_FILE unset)
    assert not routing.configured
    assert routing.owner("alice").channel is None
    assert "no owner channel" in routing.owner("alice").why
    assert routing.oncall("kalos").channel is None
    assert routing.gpu_threshold == 64


def test_owner_addresses_come_from_the_user_and_the_domain_with_overrides(tmp_path):
    path = tmp_path / "notify.yaml"
    path.write_text(GOOD)
    routing = load_routing(path)
    assert routing.owner("bob").to == ("bob@acme.example",)
    assert routing.owner("alice").to == ("alice.w@lab.example",)
    assert routing.owner("bob").channel.connection == "smtp_h29a"
    assert routing.oncall("seren").to == ("oncall-seren@acme.example",)
    assert routing.oncall("kalos").channel.kind == "apprise"  # the default
    assert routing.gpu_threshold == 128


def test_the_setting_points_at_another_file(tmp_path, monkeypatch):
    path = tmp_path / "mine.yaml"
    path.write_text(GOOD)
    monkeypatch.setenv("ACME_NOTIFY_FILE", str(path))
    assert load_routing().configured


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("owners: [unclosed\n", "not valid YAML at line"),
        ("- a list\n", "must be a mapping"),
        ("owners: {channel: mail}\n", "owners.channel names channel 'mail', which is not defined"),
        ("channels: {mail: {kind: fax, connection: x}}\n", "channels.mail.kind 'fax' must be one of"),
        ("channels: {mail: {kind: smtp}}\n", "channels.mail.connection must name an Airflow connection"),
        ("oncall: {gpu_threshold: -1}\n", "oncall.gpu_threshold -1 must be a whole number"),
        ("owners: {domain: 'not a domain'}\n", "owners.domain 'not a domain' is not a mail domain"),
        (
            "channels: {mail: {kind: smtp, connection: c}}\noncall: {clusters: {seren: mail}}\n",
            "oncall.clusters.seren uses mail channel 'mail' but gives no `to` address",
        ),
        ("pager: {}\n", "unknown section(s) pager"),
    ],
)
def test_a_malformed_routing_file_fails_with_one_line_naming_file_and_problem(tmp_path, text, problem):
    path = tmp_path / "notify.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_routing(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert problem in message


def test_a_missing_routing_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read the routing file"):
        load_routing(tmp_path / "nope.yaml")
