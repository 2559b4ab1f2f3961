"""ShardingSphere's transaction rule: LOCAL and XA become ``proxy.transactionMode``; BASE and unknown providers are refused."""

from __future__ import annotations

import pytest

from ddm_core.errors import ConfigError
from ddm_core.metadata import ConfigValidationError, dump_native, load_config

BASE = """
dataSources:
  ds_0: {jdbcUrl: 'jdbc:mysql://10.0.0.1:3306/a', username: app, password: pw}
  ds_1: {jdbcUrl: 'jdbc:mysql://10.0.0.2:3306/b', username: app, password: pw}
"""


def _problems(text: str) -> dict[str, str]:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + text)
    assert isinstance(info.value, ConfigError)
    return {p.path: p.message for p in info.value.problems}


@pytest.mark.parametrize(
    ("rule", "mode"),
    [
        ("rules:\n- !TRANSACTION\n  defaultType: XA\n  providerType: Atomikos\n", "xa"),  # 5.0-5.2
        ("transaction:\n  defaultType: XA\n  providerType: Narayana\n", "xa"),  # 5.3+
        ("transaction:\n  defaultType: xa\n  providerType: bitronix\n", "xa"),
        ("transaction:\n  defaultType: XA\n", "xa"),  # ShardingSphere's default provider
        ("rules:\n- !TRANSACTION\n  defaultType: LOCAL\n", "local"),
        ("transaction: {}\n", "local"),  # ShardingSphere's default type
    ],
)
def test_local_and_xa_become_the_proxy_transaction_mode(rule: str, mode: str) -> None:
    config = load_config(BASE + rule)
    assert config.proxy.transaction_mode == mode
    assert config.warnings == ()
    again = load_config(dump_native(config, secrets="keep"))  # the native form says the same
    assert again == config and again.proxy.transaction_mode == mode


def test_without_the_rule_the_mode_stays_local() -> None:
    assert load_config(BASE).proxy.transaction_mode == "local"


def test_base_is_refused_by_name() -> None:
    problems = _problems("transaction:\n  defaultType: BASE\n  providerType: Seata\n")
    assert list(problems) == ["transaction.defaultType"]
    assert "'BASE'" in problems["transaction.defaultType"] and "Seata" in problems["transaction.defaultType"]
    assert "LOCAL" in problems["transaction.defaultType"] and "XA" in problems["transaction.defaultType"]


def test_an_unknown_type_or_provider_is_refused_by_name() -> None:
    assert "'SAGA'" in _problems("rules:\n- !TRANSACTION\n  defaultType: SAGA\n")["rules[0].defaultType"]
    provider = _problems("transaction:\n  defaultType: XA\n  providerType: Seata\n")["transaction.providerType"]
    assert "'Seata'" in provider and "Atomikos" in provider
    assert "did you mean 'providerType'" in _problems("transaction:\n  defaultType: XA\n  provider: Atomikos\n")[
        "transaction.provider"
    ]


def test_the_rule_given_twice_is_refused() -> None:
    problems = _problems("rules:\n- !TRANSACTION\n  defaultType: XA\ntransaction:\n  defaultType: LOCAL\n")
    assert "given twice" in problems["transaction"] and "rules[0]" in problems["transaction"]


def test_provider_props_and_a_local_provider_load_with_a_warning() -> None:
    xa = load_config(BASE + "transaction:\n  defaultType: XA\n  providerType: Atomikos\n  props: {maxTimeout: 300000}\n")
    assert xa.proxy.transaction_mode == "xa"
    assert len(xa.warnings) == 1 and "transaction.props" in xa.warnings[0] and "maxTimeout" in xa.warnings[0]
    local = load_config(BASE + "transaction:\n  defaultType: LOCAL\n  providerType: Atomikos\n")
    assert local.proxy.transaction_mode == "local"
    assert len(local.warnings) == 1 and "transaction.providerType" in local.warnings[0]
