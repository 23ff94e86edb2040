"""The reserved and daemon-owned namespace guard, enforced by `Store` on every write path (factstore
corecrux-memory/src/fact_privacy.rs), through the Python API and the real CLI, with Crux's error kinds."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from cruxsql.errors import CapabilityDenied, InvalidInput
from cruxsql.facts import privacy
from cruxsql.facts.store import Store, StoreRequest
from cruxsql.governance import erasure_proof, legal_holds
from support.journal_builders import fact_obj, line, write_journal
from support.journal_files import journal_bytes

CONTROL = "__agent::alice::__passport__::control-record"


@pytest.fixture
def crux_dir(tmp_path: Path) -> Path:
    """A data directory a Crux daemon wrote: a wrapped daemon control fact, a legal hold, a plain fact."""
    write_journal(tmp_path, [
        line("store", fact=fact_obj("f_control", entity=CONTROL, key="state", value="trusted", private=True,
                                    source_receipt="test:typed-daemon-workflow", actor="daemon:test")),
        line("store", fact=fact_obj("f_hold", entity="__legal_hold__::lh_1", key="state", value="{}",
                                    private=True)),
        line("store", fact=fact_obj("f_plain", entity="notes", key="state", value="draft")),
        line("store", fact=fact_obj("f_mine", entity="__agent::alice::notes", key="state", value="mine",
                                    private=True)),
    ])
    return tmp_path


def test_store_rejects_every_create_reserved_entity_prefix(tmp_path: Path) -> None:
    """Crux `store_fact_passport_rejects_every_create_reserved_entity_prefix` (crux-mcp tools/facts.rs):
    every daemon-owned prefix and `__agent::` is refused with -32602 RESERVED_ENTITY_PREFIX naming the
    entity, and nothing is persisted. cruxsql's own `__erasure_report__::` is guarded the same way."""
    with Store(tmp_path) as store:
        store.store("seed", "k", "v")
        before = journal_bytes(tmp_path, missing_ok=True)
        prefixes = privacy.DAEMON_OWNED_ENTITY_PREFIXES + privacy.GENERIC_CREATE_RESERVED_PREFIXES \
            + privacy.CRUXSQL_OWNED_ENTITY_PREFIXES
        assert len(prefixes) == 52
        for prefix in prefixes:
            entity = f"{prefix}attacker"
            with pytest.raises(privacy.ReservedEntityPrefix) as info:
                store.store(entity, "state", "attacker")
            err = info.value
            assert isinstance(err, InvalidInput) and err.code == -32602
            assert err.crux_message == f"entity uses create-reserved prefix `{prefix}`"
            assert err.data == {"error_code": "RESERVED_ENTITY_PREFIX", "param": "entity", "entity": entity,
                                "reserved_prefix": prefix}
            assert str(err) == f"entity {entity!r} uses create-reserved prefix `{prefix}`"
        with pytest.raises(privacy.ReservedEntityPrefix):
            store.store_batch([StoreRequest("ok", "k", "v"), StoreRequest("__ops::x", "k", "v")])
        assert journal_bytes(tmp_path, missing_ok=True) == before
        assert store.counts()["facts"] == 1


def test_private_fact_is_wrapped_after_the_raw_entity_is_checked(tmp_path: Path) -> None:
    """Crux `handle_store_fact`: the raw entity is checked first, then a private fact of an authenticated
    agent is stored under `__agent::<identity>::<entity>` (`private_entity_for_agent`)."""
    with Store(tmp_path) as store:
        fact = store.store("notes", "k", "v", private=True, agent="alice")
        assert (fact.entity, fact.private) == ("__agent::alice::notes", True)
        assert store.store("notes", "k", "public").entity == "notes"  # no agent: stored as given
        with pytest.raises(privacy.ReservedEntityPrefix, match="__passport__::"):
            store.store("__passport__::x", "k", "v", private=True, agent="alice")


def test_store_cannot_supersede_visible_wrapped_daemon_control_fact(crux_dir: Path) -> None:
    """Crux `store_fact_cannot_supersede_visible_wrapped_daemon_control_fact`: the policy entity of
    `__agent::alice::__passport__::...` is its logical entity, daemon-owned, so superseding it is refused
    with -32602 RESERVED_SUPERSEDES_TARGET and the control fact is untouched."""
    with Store(crux_dir) as store:
        new = store.store("safe-new-fact", "state", "attacker-controlled")
        before = journal_bytes(crux_dir, missing_ok=True)
        with pytest.raises(privacy.ReservedSupersedesTarget) as info:
            store.supersede("f_control", new.fact_id)
        assert info.value.code == -32602
        assert info.value.crux_message == "daemon-owned control facts cannot be superseded through store_fact"
        assert info.value.data == {"error_code": "RESERVED_SUPERSEDES_TARGET", "param": "supersedes",
                                   "reserved_refs": [{"fact_id": "f_control", "entity": "__passport__::control-record",
                                                      "reserved_prefix": "__passport__::"}]}
        assert store.get("f_control").superseded_by is None
        assert journal_bytes(crux_dir, missing_ok=True) == before
        store.supersede("f_mine", new.fact_id)  # an ordinary private fact of its owner: allowed
        assert store.get("f_mine").superseded_by == new.fact_id


@pytest.mark.parametrize("fact_id, entity, prefix", [
    ("f_hold", "__legal_hold__::lh_1", "__legal_hold__::"),
    ("f_control", "__passport__::control-record", "__passport__::"),
])
def test_every_mutation_of_a_daemon_owned_fact_is_refused(crux_dir: Path, fact_id: str, entity: str,
                                                          prefix: str) -> None:
    """Crux `handle_delete_fact` (and the HTTP `delete_fact`): a fact whose policy entity is daemon-owned
    is refused with CAPABILITY_DENIED (-32030) "fact belongs to reserved daemon-owned prefix"; cruxsql
    applies the same rule to clear_supersede, set_validity, set_horizon and reverify."""
    with Store(crux_dir) as store:
        before = journal_bytes(crux_dir, missing_ok=True)
        calls = [lambda: store.delete(fact_id), lambda: store.clear_supersede(fact_id),
                 lambda: store.set_validity(fact_id, 10**18, None), lambda: store.set_horizon(fact_id, "volatile"),
                 lambda: store.reverify(fact_id)]
        for call in calls:
            with pytest.raises(privacy.ReservedTarget) as info:
                call()
            err = info.value
            assert isinstance(err, CapabilityDenied) and err.code == -32030
            assert err.crux_message == f"fact belongs to reserved daemon-owned prefix `{prefix}`"
            assert err.data == {"error_code": "RESERVED_ENTITY_PREFIX", "fact_id": fact_id, "entity": entity,
                                "reserved_prefix": prefix}
        assert journal_bytes(crux_dir, missing_ok=True) == before
        store.delete("f_mine")  # the caller's own ordinary private fact is not daemon-owned
        store.delete("f_plain")


def test_owner_paths_write_only_their_own_namespaces(crux_dir: Path) -> None:
    """The code that owns a namespace writes through its `NamespaceOwner`; it owns nothing else."""
    with Store(crux_dir) as store:
        store.delete("f_hold", owner=legal_holds.OWNER)
        assert store.get("f_hold").deleted
        with pytest.raises(privacy.ReservedTarget):
            store.delete("f_control", owner=legal_holds.OWNER)
        with pytest.raises(privacy.ReservedEntityPrefix):
            store.store("__legal_hold__::x", "state", "{}", owner=erasure_proof.OWNER)
        hold, _ = legal_holds.place_hold(store, "default", "case 17")  # its own path still writes
        assert [f.private for f in store.history(hold.entity, "state")] == [True]


def test_cli_refuses_reserved_targets_in_one_line_and_changes_nothing(crux_dir: Path) -> None:
    """The CLI surfaces the guard: `Error: ...` naming the input, exit 1, the journal unchanged."""
    env = {"CRUXSQL_DATA_DIR": str(crux_dir)}
    runner = CliRunner()
    with Store(crux_dir):
        pass
    before = journal_bytes(crux_dir, missing_ok=True)
    result = runner.invoke(main, ["store", "__passport__::x", "k", "v"], env=env)
    assert (result.exit_code, result.output) == (
        1, "Error: entity '__passport__::x' uses create-reserved prefix `__passport__::`\n")
    result = runner.invoke(main, ["delete", "f_hold"], env=env)
    assert (result.exit_code, result.output) == (
        1, "Error: cannot delete fact f_hold: it belongs to reserved daemon-owned prefix `__legal_hold__::`\n")
    result = runner.invoke(main, ["reverify", "f_control"], env=env)
    assert result.exit_code == 1 and result.output.startswith("Error: cannot re-verify fact f_control")
    result = runner.invoke(main, ["store-batch", "-"], env=env,
                           input='{"entity":"ok","key":"k","value":"v"}\n{"entity":"__agent::bob::x","key":"k","value":"v"}\n')
    assert (result.exit_code, result.output) == (
        1, "Error: entity '__agent::bob::x' uses create-reserved prefix `__agent::`\n")
    assert journal_bytes(crux_dir, missing_ok=True) == before
