"""Self-managed webhook certificates: what is issued, renewed and trusted when."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

from cryptography import x509

from webhook import certs
from webhook.tls import write_pair

NAMES = certs.dns_names("hook", "sys")
CA = dt.timedelta(seconds=300)
LEAF = dt.timedelta(seconds=90)
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def plan(current: certs.Bundle, at: float) -> certs.Bundle | None:
    return certs.plan(current, NAMES, CA, LEAF, T0 + dt.timedelta(seconds=at), "hook")


def cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_first_plan_issues_a_ca_and_a_serving_cert_for_the_service_names() -> None:
    b = plan(certs.Bundle(), 0)
    assert b is not None and not b.previous_ca_crt
    leaf = cert(b.tls_crt)
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == NAMES
    assert "hook.sys.svc" in NAMES
    assert leaf.issuer == cert(b.ca_crt).subject
    assert b.ca_bundle == b.ca_crt


def test_nothing_changes_while_more_than_a_third_is_left() -> None:
    b = plan(certs.Bundle(), 0)
    assert b is not None
    assert plan(b, 55) is None  # 90 s leaf: renewed once under 30 s are left


def test_serving_cert_renews_with_a_third_left_same_ca() -> None:
    b = plan(certs.Bundle(), 0)
    assert b is not None
    r = plan(b, 65)
    assert r is not None
    assert r.ca_crt == b.ca_crt and r.tls_crt != b.tls_crt and not r.previous_ca_crt


def test_ca_renewal_keeps_the_old_ca_trusted_until_it_expires() -> None:
    b = plan(certs.Bundle(), 0)
    assert b is not None
    r = plan(b, 210)  # 300 s CA: renewed under 100 s left
    assert r is not None and r.ca_crt != b.ca_crt
    assert r.previous_ca_crt == b.ca_crt
    assert r.ca_bundle == r.ca_crt + b.ca_crt
    assert cert(r.tls_crt).issuer == cert(r.ca_crt).subject
    later = plan(r, 301)  # the old CA expired: dropped from the bundle
    assert later is not None and not later.previous_ca_crt


def test_serving_cert_never_outlives_its_ca() -> None:
    b = certs.plan(certs.Bundle(), NAMES, CA, dt.timedelta(days=365), T0, "hook")
    assert b is not None
    assert cert(b.tls_crt).not_valid_after_utc == cert(b.ca_crt).not_valid_after_utc


def test_other_service_names_get_a_new_certificate() -> None:
    b = plan(certs.Bundle(), 0)
    assert b is not None
    other = certs.plan(b, certs.dns_names("x", "y"), CA, LEAF, T0, "x")
    assert other is not None and other.ca_crt == b.ca_crt and other.tls_crt != b.tls_crt


def test_secret_round_trip_and_the_pair_loads_into_tls(tmp_path: Path) -> None:
    b = plan(certs.Bundle(), 0)
    assert b is not None
    assert certs.Bundle.from_data(b.to_data()) == b
    crt, key = write_pair(tmp_path, b.tls_crt, b.tls_key)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))
    assert oct(key.stat().st_mode & 0o777) == "0o600"
