"""The routing file (``include/config/notify.yaml``, ``ACME_NOTIFY_FILE``): which channel and address each
message goes to. Its comments document the format; a mistake fails with one line naming the file and the
problem (:class:`~acme.errors.ConfigError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acme.errors import ConfigError

CHANNEL_KINDS = ("smtp", "apprise", "slack_webhook")
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+$")
_DOMAIN = re.compile(r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$|^localhost$")
_USER = re.compile(r"[^A-Za-z0-9._+-]")


@dataclass(frozen=True)
class Channel:
    """One way out: an Airflow connection and the kind of notifier that uses it."""

    name: str
    kind: str
    connection: str
    sender: str | None = None

    @property
    def is_mail(self) -> bool:
        return self.kind == "smtp"


@dataclass(frozen=True)
class Destination:
    """Where one message goes: a channel (None: nowhere configured, it stays queued) and, for mail, the
    addresses; ``why`` says why it has no channel."""

    channel: Channel | None
    to: tuple[str, ...] = ()
    why: str = ""


@dataclass(frozen=True)
class Routing:
    source: str
    channels: dict[str, Channel] = field(default_factory=dict)
    owner_channel: str | None = None
    owner_domain: str | None = None
    owner_addresses: dict[str, str] = field(default_factory=dict)
    gpu_threshold: int = 64
    oncall_default: tuple[str, tuple[str, ...]] | None = None
    oncall_clusters: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        """Whether any message has somewhere to go."""
        return bool(self.owner_channel or self.oncall_default or self.oncall_clusters)

    def owner(self, user: str | None) -> Destination:
        """The owner digest's destination for the job's ``user``."""
        if not self.owner_channel:
            return Destination(None, why=f"no owner channel in {self.source}")
        channel = self.channels[self.owner_channel]
        if not channel.is_mail:
            return Destination(channel)
        if not user:
            return Destination(None, why="the jobs have no user to address")
        address = self.owner_addresses.get(user)
        if address is None and self.owner_domain:
            address = f"{_USER.sub('_', user)}@{self.owner_domain}"
        if address is None:
            return Destination(None, why=f"no address for user {user!r}: set owners.domain in {self.source}")
        return Destination(channel, (address,))

    def oncall(self, cluster: str) -> Destination:
        """The on-call destination of ``cluster`` (pages, late notices)."""
        entry = self.oncall_clusters.get(cluster) or self.oncall_default
        if entry is None:
            return Destination(None, why=f"no on-call channel for {cluster} in {self.source}")
        name, to = entry
        return Destination(self.channels[name], to)


def load_routing(path: Path | str | None = None) -> Routing:
    """The routing file, checked (``ACME_NOTIFY_FILE`` when ``path`` is None)."""
    import yaml

    if path is None:
        from acme import settings

        path = settings.notify().routing_file
    source = str(path)
    try:
        document = yaml.safe_load(Path(source).read_text())
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the routing file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"{source}: not valid YAML{where}: {problem}") from None
    return parse_routing(document, source)


def parse_routing(document: Any, source: str) -> Routing:
    """A :class:`Routing` from the parsed file; ConfigError names ``source`` and the problem."""
    document = {} if document is None else document
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: the routing file must be a mapping, not {type(document).__name__}")
    unknown = set(document) - {"channels", "owners", "oncall"}
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(map(str, unknown)))}")
    channels = _channels(_mapping(document, "channels", source), source)
    owners = _mapping(document, "owners", source)
    oncall = _mapping(document, "oncall", source)
    owner_channel = _channel_ref(owners.get("channel"), channels, "owners.channel", source)
    domain = owners.get("domain")
    if domain is not None and (not isinstance(domain, str) or not _DOMAIN.match(domain)):
        raise ConfigError(f"{source}: owners.domain {domain!r} is not a mail domain")
    addresses = owners.get("addresses") or {}
    if not isinstance(addresses, dict):
        raise ConfigError(f"{source}: owners.addresses must map users to addresses")
    for user, address in addresses.items():
        _address(address, f"owners.addresses.{user}", source)
    threshold = oncall.get("gpu_threshold", 64)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ConfigError(f"{source}: oncall.gpu_threshold {threshold!r} must be a whole number >= 0")
    clusters = oncall.get("clusters") or {}
    if not isinstance(clusters, dict):
        raise ConfigError(f"{source}: oncall.clusters must map cluster names to channels")
    default = oncall.get("default")
    return Routing(
        source=source,
        channels=channels,
        owner_channel=owner_channel,
        owner_domain=domain,
        owner_addresses={str(k): str(v) for k, v in addresses.items()},
        gpu_threshold=threshold,
        oncall_default=None
        if default is None
        else _oncall_entry(default, channels, "oncall.default", source),
        oncall_clusters={
            str(name): _oncall_entry(entry, channels, f"oncall.clusters.{name}", source)
            for name, entry in clusters.items()
            if entry is not None
        },
    )


def _mapping(document: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    value = document.get(name) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: {name} must be a mapping, not {type(value).__name__}")
    return value


def _channels(entries: dict[str, Any], source: str) -> dict[str, Channel]:
    channels = {}
    for name, entry in entries.items():
        where = f"channels.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: {where} must be a mapping with kind and connection")
        kind = entry.get("kind")
        if kind not in CHANNEL_KINDS:
            raise ConfigError(f"{source}: {where}.kind {kind!r} must be one of {', '.join(CHANNEL_KINDS)}")
        connection = entry.get("connection")
        if not isinstance(connection, str) or not connection.strip():
            raise ConfigError(f"{source}: {where}.connection must name an Airflow connection")
        unknown = set(entry) - {"kind", "connection", "from"}
        if unknown:
            raise ConfigError(f"{source}: {where} has unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        sender = entry.get("from")
        if sender is not None:
            _address(sender, f"{where}.from", source)
        channels[str(name)] = Channel(str(name), kind, connection.strip(), sender)
    return channels


def _channel_ref(name: Any, channels: dict[str, Channel], where: str, source: str) -> str | None:
    if name is None:
        return None
    if name not in channels:
        known = ", ".join(sorted(channels)) or "none"
        raise ConfigError(
            f"{source}: {where} names channel {name!r}, which is not defined (channels: {known})"
        )
    return str(name)


def _oncall_entry(
    entry: Any, channels: dict[str, Channel], where: str, source: str
) -> tuple[str, tuple[str, ...]]:
    if isinstance(entry, str):
        entry = {"channel": entry}
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: {where} must be a channel name or {{channel, to}}")
    name = _channel_ref(entry.get("channel"), channels, f"{where}.channel", source)
    if name is None:
        raise ConfigError(f"{source}: {where} has no channel")
    to = entry.get("to") or []
    to = [to] if isinstance(to, str) else to
    if not isinstance(to, list):
        raise ConfigError(f"{source}: {where}.to must be an address or a list of addresses")
    addresses = tuple(_address(a, f"{where}.to", source) for a in to)
    if channels[name].is_mail and not addresses:
        raise ConfigError(f"{source}: {where} uses mail channel {name!r} but gives no `to` address")
    return name, addresses


def _address(value: Any, where: str, source: str) -> str:
    if not isinstance(value, str) or not _ADDRESS.match(value):
        raise ConfigError(f"{source}: {where} {value!r} is not a mail address")
    return value
