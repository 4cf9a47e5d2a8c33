"""``bookie serve --conf bk_server.conf``: Apache BookKeeper's server configuration, read.

The file is read as BookKeeper reads it (bookie/properties.py). Each key is mapped onto our
settings with its unit converted, or classified by ``bookie.bkconf_keys`` (the table
docs/operations.md shows).

Invariants:

* BC1 never silent: every key of the file is mapped (or checked), ignored, refused or
  unknown, and each of the last three is listed exactly once at start (one log line per class: INFO for
  ignored, WARN for refused and unknown) and by ``bookie config show``.
* BC2 precedence: defaults < bk_server.conf < TOML ``--config`` < ``BOOKIE_*`` < flags. A key
  absent from the file leaves our default, not BookKeeper's.
* BC3 what would leave the bookie less safe or elsewhere than the file asks stops the start
  (ConfigError, exit 78) naming file, line and key: a data directory our layout cannot
  place, TLS or authentication it cannot honour, ZooKeeper security without credentials, a
  loopback host under allowLoopback=false, a metadata layout it does not write. A refusal
  that only changes tuning or schedules is listed and the bookie starts.
* BC4 a TOML settings file given as bk_server.conf stops the start (exit 78) and says to use
  ``--config`` (bookie/bkconf_toml.py says how it is told from a bk_server.conf).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from typing import Any, Mapping

from bookie import bkconf_autorecovery, bkconf_dirs, bkconf_identity, bkconf_placement
from bookie.bkconf_toml import toml_signs
from bookie.bkconf_keys import AS_OURS, IGNORED, MAPPED_BY_KEY, REFUSED, SPECIAL
from bookie.config import BookieConfig, ConfigError, load_config
from bookie.properties import Property, parse_properties

log = logging.getLogger("bookie.bkconf")

#: api/client/zookeeper.py SCHEMES: the layouts our metadata store reads and writes (the
#: core does not import api/, so the two names are repeated here).
_SCHEMES = ("zk", "zk+hierarchical")
_PULSAR_ZK = "metadata-store:zk:"  # Pulsar's form (docs/cluster.md §1)
_HTTP_SERVER_PORT = 8000  # BookKeeper's default httpServerPort
_TLS_FACTORY = "org.apache.bookkeeper.tls.TLSContextFactory"
_AUTHZ_FACTORY = "org.apache.bookkeeper.tls.BookieAuthZFactory"


@dataclasses.dataclass
class BkConf:
    """A read bk_server.conf: the settings it gives, each with its source, and the notes
    (class, key, line, value, why) of every key it does not map."""

    path: str
    settings: dict[str, tuple[Any, str]] = dataclasses.field(default_factory=dict)
    notes: list[tuple[str, str, int, str, str]] = dataclasses.field(default_factory=list)
    props: dict[str, Property] = dataclasses.field(default_factory=dict)

    def where(self, key: str) -> str:
        return f"{os.path.basename(self.path)}:{self.props[key].line}"

    def set(self, setting: str, value: Any, *keys: str) -> None:
        self.settings[setting] = (value, " ".join(self.where(k) for k in keys
                                                  if k in self.props) or self.path)

    def note(self, kind: str, key: str, why: str) -> None:
        prop = self.props[key]
        secret = "password" in key.lower() or key == "passwd"
        self.notes.append((kind, key, prop.line, "<redacted>" if secret and prop.value
                           else prop.value, why))

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.where(key)} {key}={self.props[key].value}: {why}")


def read(path: str) -> BkConf:
    """Read and classify ``path``; ConfigError (BC3) for what cannot be honoured."""
    try:
        with open(path, encoding="latin-1") as handle:  # java.util.Properties' encoding
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"bk_server.conf {path}: {exc.strerror}") from None
    toml = toml_signs(path, text)
    if toml is not None:  # BC4 (bookie/bkconf_toml.py)
        raise ConfigError(f"{path} looks like TOML ({toml}): use --config {path} "
                          f"(-c/--conf is BookKeeper's bk_server.conf)")
    conf = BkConf(path, props=parse_properties(text, path))
    for key, prop in conf.props.items():
        if key in SPECIAL:
            continue
        if not prop.value:
            conf.note("ignored", key, "empty: BookKeeper reads it as unset")
        elif key in MAPPED_BY_KEY:
            mapped = MAPPED_BY_KEY[key]
            try:
                conf.set(mapped.setting, mapped.convert(prop.value), key)
            except ValueError as exc:
                raise conf.fail(key, f"not a value for {mapped.setting}: {exc}") from None
        elif key in AS_OURS:
            values, why = AS_OURS[key]
            if prop.value.lower() in (v.lower() for v in values):
                conf.note("ignored", key, f"as here: {why}")
            else:
                conf.note("refused", key, why)
        elif key in IGNORED:
            conf.note("ignored", key, IGNORED[key])
        elif key in REFUSED:
            conf.note("refused", key, REFUSED[key])
        else:
            conf.note("unknown", key, "not a BookKeeper server key this bookie knows")
    bkconf_dirs.apply(conf)
    bkconf_placement.apply(conf)
    bkconf_identity.apply(conf)
    bkconf_autorecovery.apply(conf)
    _metadata(conf)
    _admin(conf)
    _tls(conf)
    _authorization(conf)
    for key, checked in (("zkEnableSecurity", "true"), ("allowLoopback", "false")):
        if key not in conf.props:
            continue
        if _value(conf, key).lower() == checked:  # honoured by check() on the final config
            conf.note("checked", key, SPECIAL[key])
        else:
            conf.note("ignored", key, f"as here: {_AS_HERE[key]}")
    return conf


_AS_HERE = {"zkEnableSecurity": "znodes get an ACL only with zk_sasl or zk_digest set",
            "allowLoopback": "a loopback host is allowed"}


def _value(conf: BkConf, key: str) -> str:
    prop = conf.props.get(key)
    return prop.value if prop is not None else ""


def _admin(conf: BkConf) -> None:
    """BookKeeper serves its admin REST API only with httpServerEnabled=true."""
    if _value(conf, "httpServerEnabled").lower() == "true":
        port = _value(conf, "httpServerPort") or str(_HTTP_SERVER_PORT)
        try:
            conf.set("admin_port", int(port), "httpServerEnabled", "httpServerPort")
        except ValueError:
            raise conf.fail("httpServerPort", "not a port") from None
        return
    for key in ("httpServerEnabled", "httpServerPort"):
        if key in conf.props:
            conf.note("ignored", key, "httpServerEnabled is not true: BookKeeper's admin "
                                      "REST API is not served")


def _metadata(conf: BkConf) -> None:
    uri = _value(conf, "metadataServiceUri")
    servers = conf.props["zkServers"].items if "zkServers" in conf.props else ()
    root = _value(conf, "zkLedgersRootPath") or "/ledgers"
    if uri:
        scheme = uri.split("://", 1)[0] if "://" in uri else ""
        if scheme not in _SCHEMES and not uri.startswith(_PULSAR_ZK):
            raise conf.fail("metadataServiceUri", "this bookie reads and writes the "
                            "hierarchical layout only: zk://, zk+hierarchical:// or "
                            "metadata-store:zk:")
        conf.set("metadata_service_uri", uri, "metadataServiceUri")
        for key in ("zkServers", "zkLedgersRootPath"):
            if key in conf.props:
                conf.note("ignored", key, "metadataServiceUri is set and wins, as in "
                                          "BookKeeper")
    elif servers:
        conf.set("metadata_service_uri", f"zk://{','.join(servers)}{root}",
                 "zkServers", "zkLedgersRootPath")
    elif "zkLedgersRootPath" in conf.props:
        conf.note("ignored", "zkLedgersRootPath", "zkServers is not set")
    for key in ("metadataServiceUri", "zkServers"):
        if key in conf.props and not _value(conf, key):
            conf.note("ignored", key, "empty: BookKeeper reads it as unset")


_TLS_KEYS = ("tlsKeyStoreType", "tlsKeyStore", "tlsCertificatePath", "tlsKeyStorePasswordPath",
             "tlsTrustStoreType", "tlsTrustStore", "tlsTrustStorePasswordPath",
             "tlsClientAuthentication", "tlsEnabledProtocols")


def _tls(conf: BkConf) -> None:
    factory = _value(conf, "tlsProviderFactoryClass")
    if not factory:
        for key in ("tlsProviderFactoryClass", *_TLS_KEYS):
            if key in conf.props:
                conf.note("ignored", key, "tlsProviderFactoryClass is not set: BookKeeper "
                                          "would not use it either")
        return
    if factory != _TLS_FACTORY:
        raise conf.fail("tlsProviderFactoryClass", f"only {_TLS_FACTORY} is known here")
    # ! BookKeeper's default store type is JKS; TLS we cannot load must not start as
    #   plain text, so every missing or unreadable piece refuses the start (BC3).
    if (_value(conf, "tlsKeyStoreType") or "JKS").upper() != "PEM":
        raise _tls_fail(conf, "tlsKeyStoreType", "this bookie reads PEM key stores only "
                        "(BookKeeper's default is JKS): convert it and set tlsKeyStoreType=PEM")
    for key, setting in (("tlsKeyStore", "tls_key_file"),
                         ("tlsCertificatePath", "tls_cert_file")):
        if not _value(conf, key):
            raise conf.fail("tlsProviderFactoryClass", f"{key} is required with PEM keys")
        conf.set(setting, _value(conf, key), key)
    if _value(conf, "tlsKeyStorePasswordPath"):
        conf.set("tls_key_password", _password(conf, "tlsKeyStorePasswordPath"),
                 "tlsKeyStorePasswordPath")
    trust = _value(conf, "tlsTrustStore")
    if trust:
        if (_value(conf, "tlsTrustStoreType") or "JKS").upper() != "PEM":
            raise _tls_fail(conf, "tlsTrustStoreType", "this bookie reads PEM trust stores "
                            "only (BookKeeper's default is JKS)")
        conf.set("tls_trust_file", trust, "tlsTrustStore")
    if _value(conf, "tlsClientAuthentication").lower() == "true":
        if not trust:
            raise conf.fail("tlsClientAuthentication", "needs tlsTrustStore, the CA of the "
                                                       "client certificates")
        conf.set("tls_ca_file", trust, "tlsTrustStore", "tlsClientAuthentication")
    if "tlsTrustStorePasswordPath" in conf.props:
        conf.note("ignored", "tlsTrustStorePasswordPath", "a PEM trust store has no password")
    _protocols(conf)


def _tls_fail(conf: BkConf, key: str, why: str) -> ConfigError:
    if key in conf.props:
        return conf.fail(key, why)
    return conf.fail("tlsProviderFactoryClass", f"{key} is not set: {why}")


def _password(conf: BkConf, key: str) -> str:
    try:
        with open(_value(conf, key), encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError as exc:
        raise conf.fail(key, exc.strerror) from None


def _protocols(conf: BkConf) -> None:
    if not _value(conf, "tlsEnabledProtocols"):
        return
    listed = {item.upper() for item in conf.props["tlsEnabledProtocols"].items}
    ours = [v for v in ("1.2", "1.3") if f"TLSV{v}" in listed]
    if not ours:
        raise conf.fail("tlsEnabledProtocols", "this bookie speaks TLSv1.2 and TLSv1.3 only")
    conf.set("tls_min_version", ours[0], "tlsEnabledProtocols")


def _authorization(conf: BkConf) -> None:
    factory = _value(conf, "bookieAuthProviderFactoryClass")
    if factory and factory != _AUTHZ_FACTORY:
        raise conf.fail("bookieAuthProviderFactoryClass", "this bookie authenticates clients "
                        "by TLS certificate only (BookieAuthZFactory); the clients this "
                        "class would check would go unchecked")
    if "bookieAuthProviderFactoryClass" in conf.props and not factory:
        conf.note("ignored", "bookieAuthProviderFactoryClass", "empty: BookKeeper reads it "
                                                               "as unset")
    if "authorizedRoles" not in conf.props:
        return
    if factory and _value(conf, "authorizedRoles"):
        conf.set("tls_authorized_roles", ",".join(conf.props["authorizedRoles"].items),
                 "authorizedRoles")
    else:
        conf.note("ignored", "authorizedRoles", "bookieAuthProviderFactoryClass is not "
                                                "BookieAuthZFactory: BookKeeper ignores it too")


def check(conf: BkConf, config: BookieConfig) -> None:
    """The keys that hold on the final config, whichever layer set the values (BC3)."""
    if _value(conf, "zkEnableSecurity").lower() == "true" and config.metadata_service_uri \
            and not (config.zk_sasl or config.zk_sasl_file or config.zk_digest
                     or config.zk_digest_file):
        raise conf.fail("zkEnableSecurity", "give the ZooKeeper credentials as BOOKIE_ZK_SASL "
                        "or zk_sasl_file (or zk_digest): BookKeeper's JAAS file is not read, "
                        "and znodes open to everyone are not what this file asks for")
    looped = bkconf_identity.loopback_identity(config.host, config.bookie_id) \
        if _value(conf, "allowLoopback").lower() == "false" else None
    if looped:
        raise conf.fail("allowLoopback", f"{looped}: a loopback address: set "
                        "advertisedAddress (or host) to this machine's address, or "
                        "allowLoopback=true")


def add_conf_flag(parser: argparse.ArgumentParser) -> None:
    """``--conf``/``-c``: BookKeeper's own spelling (its bookie's Main takes both)."""
    parser.add_argument("-c", "--conf", help="Apache BookKeeper's bk_server.conf: its keys map "
                        "onto the settings, below --config, BOOKIE_* and flags "
                        "(docs/operations.md §8)")


def load_settings(conf_path: str | None, config_file: str | None = None,
                  flags: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None
                  ) -> tuple[BookieConfig, dict[str, str], BkConf | None]:
    """``load_config`` with bk_server.conf, when given, as its lowest layer above the
    defaults (BC2); the read file is returned for its summary."""
    if not conf_path:
        return (*load_config(config_file, flags, environ), None)
    conf = read(conf_path)
    config, sources = load_config(config_file, flags, environ, underlay=conf.settings)
    check(conf, config)
    return config, sources, conf


_LEVELS = {"ignored": logging.INFO, "refused": logging.WARNING, "unknown": logging.WARNING}
_TITLES = {"ignored": "ignored (no meaning here)",
           "refused": "refused, not honoured (a behaviour this bookie does not have)",
           "unknown": "unknown (not a BookKeeper server key: a typo?)"}


def summary(conf: BkConf) -> list[tuple[int, str]]:
    """(level, line) per class of key with any: each key once, grouped by reason (BC1)."""
    lines = []
    for kind in ("refused", "unknown", "ignored"):
        notes = sorted(n for n in conf.notes if n[0] == kind)
        if not notes:
            continue
        by_why: dict[str, list[str]] = {}
        for _, key, line, value, why in sorted(notes, key=lambda n: n[2]):
            by_why.setdefault(why, []).append(f"{key}={value} (line {line})")
        groups = "; ".join(f"{', '.join(keys)}: {why}" for why, keys in by_why.items())
        lines.append((_LEVELS[kind], f"{conf.path}: {len(notes)} key(s) {_TITLES[kind]}: "
                                     f"{groups}"))
    return lines


def log_summary(conf: BkConf) -> None:
    for level, line in summary(conf):
        log.log(level, "%s", line)


def render_notes(conf: BkConf) -> str:
    """``bookie config show``'s tail: every key of the file not shown as a setting's
    source above, with its line and class."""
    name = os.path.basename(conf.path)
    lines = [f"# {name}:{line} {key}={value}: {kind}: {why}"
             for kind, key, line, value, why in sorted(conf.notes, key=lambda n: n[2])]
    return "".join(line + "\n" for line in lines)
