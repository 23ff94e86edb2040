"""Every command of the `cruxsql` CLI against the environments operators meet: a missing store, a
read-only store, a file where the data directory should be, a held writer lock, an out-of-range
integer and empty strings. The command list comes from the click group, so a new command is covered
the day it is registered; commands this file does not know get the generic checks (one `Error:`
line and exit 1, or success; never a traceback; the journal unchanged on failure)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Optional

import apsw
import click
import pytest
from click.testing import CliRunner

from cruxsql.cli import main
from cruxsql.documents import DocumentLane
from cruxsql.documents.sources import chunk_document
from cruxsql.facts.journal import Journal
from cruxsql.facts.store import Store
from cruxsql.governance import legal_holds
from support.mounts import mounted, read_only_mount

CREATES = {"init", "store", "store-batch", "store-conversation", "ingest", "hold place"}
WRITES = {"delete", "supersede", "clear-supersede", "set-validity", "set-horizon", "reverify", "rebuild", "compact",
          "erase", "retention apply", "hold release", "documents erase", "consolidate apply", "consolidate undo",
          "import mcp-memory", "import mem0", "bootstrap-seed", "mcp"}   # the last four create a store with --create
READS = {"get", "history", "sql", "verify", "query", "bootstrap", "view", "search", "scan", "expand",
         "segments list", "hold list", "hold override-receipt", "retention report", "export audit", "backup",
         "curate contradictions", "curate disagreements", "curate duplicates"}
NO_STORE = {"restore", "embed", "cluster status"}  # restore: a backup and a target; embed: text only;
# cluster status: the cluster's stream and registry (the data directory only names the cluster)
NO_LOCK = {"doctor"}                # reports who holds the lock instead of waiting for it
WORKSPACE = {name for name in ("workspace index", "workspace status", "workspace ledger", "ctx search", "ctx read",
                               "ctx doc", "ctx impact", "ctx context", "ctx expand")}
"""Commands on the derived workspace.db only: no fact store needed, no writer lock taken."""
STDIN = {"store-batch": '{"entity": "e", "key": "k", "value": "v"}\n',
         "store-conversation": '{"speaker": "ann", "text": "hello"}\n',
         "import mem0": '{"results": [{"id": "m1", "memory": "likes green tea", "user_id": "u1"}]}',
         "import mcp-memory": '{"type": "entity", "name": "Ada", "entityType": "person", "observations": ["x"]}\n'}
HUGE = "99999999999999999999"


def commands(group: click.Group = main, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        if isinstance(command, click.Group):
            yield from commands(command, prefix + (name,))
        else:
            yield " ".join(prefix + (name,)), command


SERVERS = {"console", "node"}
"""Run until stopped, so the generic loops below cannot invoke them; their refusals (missing store, bad
options) are tested in their own modules (console/test_server.py, cluster/test_cluster.py)."""
ALL = {name: command for name, command in commands() if name not in SERVERS}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> dict:
    """A populated store (a fact, a deleted fact, a hold on another tenant, a document) and its ids."""
    root = tmp_path_factory.mktemp("template")
    data = root / "data"
    with Store(data) as store:
        fact = store.store("svc", "owner", "alice runs deploys")
        other = store.store("svc", "team", "core")
        store.delete(other.fact_id)
        hold, _ = legal_holds.place_hold(store, "held-tenant", "litigation")
        DocumentLane(store).ingest([chunk_document("deploy.md", "# Deploy\n\nrollback steps", True)])
    notes = root / "notes"
    notes.mkdir()
    (notes / "n.md").write_text("# Note\n\nsomething to index")
    (root / "receipt.json").write_text("{}")
    return {"data": data, "fact_id": fact.fact_id, "other_id": other.fact_id, "hold_id": hold.hold_id,
            "notes": notes, "root": root}


@pytest.fixture(autouse=True)
def _work_in_tmp(tmp_path, monkeypatch):
    """A relative path a command is given (the generic "x") lands in the test's directory, never the repo."""
    monkeypatch.chdir(tmp_path)


def argv(name: str, command: click.Command, ids: dict, out_dir: Path) -> tuple[list[str], Optional[str]]:
    """Arguments and stdin that get `name` past click to its own work, with the template's ids."""
    by_name = {"fact_id": ids["fact_id"], "hold_id": ids["hold_id"], "paths": str(ids["notes"]), "file": "-",
               "path": str(ids["notes"]),
               "result_ids": "0:0", "horizon_class": "stable", "query": "deploy", "text": "deploy",
               "entity": "svc", "key": "owner", "value": "alice", "older_than": "1d", "reason": "r",
               "by_fact_id": ids["fact_id"], "output": str(out_dir / "export.out"), "tenant": "default",
               "dest": str(out_dir / "backup-dest"), "src": str(out_dir / "no-backup"), "target": str(out_dir / "t")}
    args: list[str] = []
    for param in command.params:
        if isinstance(param, click.Argument):
            args.append(by_name.get(param.name, "x"))
        elif param.required:
            value = by_name.get(param.name)
            if value is None:
                value = param.type.choices[0] if isinstance(param.type, click.Choice) else "x"
            args += [param.opts[0], value]
    if name == "sql":
        args[0] = "SELECT count(*) FROM facts"
    if name in ("erase", "retention apply"):  # their scope is never implied
        args += ["--tenant", "default"]
    return args, STDIN.get(name)


def invoke(data_dir: Path, name: str, args: list[str], stdin: Optional[str] = None, *pre: str):
    result = CliRunner().invoke(main, [*pre, *name.split(), *args, "--data-dir", str(data_dir)], input=stdin,
                                prog_name="cruxsql")
    assert "Traceback" not in result.output, (name, result.output)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        (name, result.exception)
    return result


def first_line(result) -> str:
    """The first line of stdout, or on failure the first stderr line that is not a note."""
    lines = [l for l in result.stderr.splitlines() if not l.startswith("note: ")] if result.exit_code \
        else result.stdout.splitlines()
    return lines[0] if lines else ""


def generic(name: str, result) -> None:
    """What any command must do: succeed, or fail with exit 1 (doctor: 2) and an `Error:` line."""
    assert result.exit_code in (0, 1, 2), (name, result.output)
    assert result.exit_code == 0 or name == "doctor" or first_line(result).startswith("Error: "), (name, result.output)


def journal_bytes(data_dir: Path) -> Optional[bytes]:
    path = data_dir / "facts.jsonl"
    return path.read_bytes() if path.is_file() else None


def test_every_command_is_classified_or_checked_generically():
    known = CREATES | WRITES | READS
    assert known <= set(ALL), sorted(known - set(ALL))


def test_missing_store(tmp_path, template, monkeypatch):
    """Only commands that add data create a store (for a user with none yet, or `init`: cli/known_stores.py);
    every other one names the path and changes nothing."""
    established = tmp_path / "established-config"
    (established / "cruxsql").mkdir(parents=True)
    (established / "cruxsql" / "stores.json").write_text(json.dumps([str(tmp_path / "the-users-store")]))
    for name, command in ALL.items():
        data_dir = tmp_path / name.replace(" ", "-") / "store"
        args, stdin = argv(name, command, template, tmp_path)
        fresh = tmp_path / f"{name.replace(' ', '-')}-config"
        monkeypatch.setenv("XDG_CONFIG_HOME", str(fresh if name in CREATES else established))
        result = invoke(data_dir, name, args, stdin)
        if name in CREATES:
            assert result.exit_code == 0, (name, result.output)
            assert (data_dir / "cruxsql.db").is_file()
        elif name in READS | WRITES or name in ("doctor", "workspace index"):
            assert result.exit_code == (3 if name == "doctor" else 1), (name, result.output)  # doctor: no store
            assert first_line(result) == f"Error: no cruxsql store at {data_dir} (run `cruxsql init` or pass " \
                                         f"--data-dir)", name
            assert not data_dir.exists(), name
        elif name in WORKSPACE:
            assert (result.exit_code, first_line(result)) == (1, f"Error: no workspace is indexed in {data_dir}: run "
                                                                 f"`cruxsql workspace index PATH` first"), name
            assert not data_dir.exists(), name
        else:
            generic(name, result)
            assert result.exit_code == 0 or not data_dir.exists(), name

def copy_of(template: dict, tmp_path: Path) -> Path:
    data_dir = tmp_path / "store"
    shutil.copytree(template["data"], data_dir)
    return data_dir


@pytest.fixture
def read_only_store(tmp_path, template) -> Iterator[Path]:
    """A populated store seen through a read-only bind mount."""
    with read_only_mount(copy_of(template, tmp_path), tmp_path / "ro") as mount_point:
        yield mount_point


READ_ONLY_EXIT_1 = {"hold override-receipt": "Error: no deleted fact is covered by an active legal hold; "
                                             "nothing to override"}


@pytest.mark.slow
def test_read_only_store(read_only_store, tmp_path, template):
    """Reads work (one stderr note), writes fail with one line; nothing in the directory changes."""
    data_dir = read_only_store
    before = {p.name: p.read_bytes() for p in data_dir.iterdir() if p.is_file()}
    note = f"note: {data_dir} is read-only (read-only file system): reading an in-memory copy of the view " \
           f"caught up with the journal; nothing is written"
    for name, command in ALL.items():
        args, stdin = argv(name, command, template, tmp_path)
        result = invoke(data_dir, name, args, stdin)
        if name in CREATES | WRITES:
            assert result.exit_code == 1, (name, result.output)
            assert result.stderr == f"Error: {data_dir} is read-only (read-only file system); this command " \
                                    f"writes to it\n", name
        elif name == "backup":       # records itself in DATA_DIR/backups.json: refused by the file system
            assert result.exit_code == 1 and first_line(result).startswith(f"Error: {data_dir}/backups.json.")
            assert first_line(result).endswith(".tmp: Read-only file system"), result.stderr
        elif name in READ_ONLY_EXIT_1:
            assert (result.exit_code, result.stderr.splitlines()[1]) == (1, READ_ONLY_EXIT_1[name]), name
        elif name == "export audit":  # written outside the data directory, which cannot record it
            assert result.exit_code == 0, (name, result.output)
            assert result.stderr.splitlines() == [note, (
                f"warning: {tmp_path / 'export.out'} is outside the data directory, out of erasure's reach: an "
                "erasure cannot rewrite it; and it is not recorded (the data directory is read-only)")], name
        elif name in READS:
            assert result.exit_code == 0, (name, result.output)
            assert result.stderr.splitlines() == [note], name
        else:
            generic(name, result)
    assert {p.name: p.read_bytes() for p in data_dir.iterdir() if p.is_file()} == before
    # another writer (say a Crux daemon on the other side of the mount) appends: the copy catches up
    line = json.loads((data_dir / "facts.jsonl").read_bytes().splitlines()[0])
    line["fact"].update(fact_id="f_" + "a" * 32, key="pager", value="bob carries the pager")
    with open(tmp_path / "store" / "facts.jsonl", "a") as journal:
        journal.write(json.dumps(line, separators=(",", ":")) + "\n")
    rows = json.loads(invoke(data_dir, "sql", ["SELECT key, value FROM live_facts WHERE entity = 'svc' ORDER BY key",
                                               "--json"]).stdout)
    assert rows == [{"key": "owner", "value": "alice runs deploys"}, {"key": "pager", "value": "bob carries the pager"}]


def test_data_dir_that_is_not_a_directory(tmp_path, template):
    """A file as the data directory, a file as its parent, a directory as the journal: one line each."""
    plain = tmp_path / "plain-file"
    plain.write_text("not a store")
    odd = copy_of(template, tmp_path)
    (odd / "facts.jsonl").unlink()
    (odd / "facts.jsonl").mkdir()
    cases = [(plain, f"Error: --data-dir {plain} is not a directory"),
             (plain / "sub", f"Error: --data-dir {plain / 'sub'}: {plain} is not a directory"),
             (odd, f"Error: the journal {odd / 'facts.jsonl'} is not a regular file")]
    for name, command in ALL.items():
        args, stdin = argv(name, command, template, tmp_path)
        for data_dir, message in cases:
            result = invoke(data_dir, name, args, stdin)
            if name in NO_STORE or (name in WORKSPACE and data_dir == odd):
                generic(name, result)
                continue
            assert result.exit_code == (3 if name == "doctor" else 1), (name, data_dir, result.output)
            assert result.stderr == message + "\n", name
    assert plain.read_text() == "not a store" and list((odd / "facts.jsonl").iterdir()) == []


READS_BESIDE_A_WRITER = {"bootstrap", "curate contradictions", "curate disagreements", "curate duplicates", "expand",
                         "export facts", "get", "history", "hold list", "init", "mcp", "query", "recall", "related",
                         "scan", "search", "segments list", "sql", "view"}


@pytest.mark.slow
def test_held_writer_lock(tmp_path, template):
    """Another process holds the writer lock: every command that writes gives up after --lock-timeout,
    naming the holder's pid, and changes nothing; every read answers from the view as last committed."""
    data_dir = copy_of(template, tmp_path)
    before = journal_bytes(data_dir)
    holder = Journal(data_dir)
    with holder.lock():
        for name, command in ALL.items():
            args, stdin = argv(name, command, template, tmp_path)
            result = invoke(data_dir, name, [*args, "--lock-timeout", "0.05"], stdin)
            if name in NO_STORE | NO_LOCK | WORKSPACE:
                generic(name, result)
                continue
            if name in READS_BESIDE_A_WRITER:  # reads never wait for the writer lock: they answer
                assert result.exit_code == 0, (name, result.output)
                assert "writer lock" not in result.stderr and journal_bytes(data_dir) == before, name
                continue
            assert result.exit_code == 1, (name, result.output)
            assert result.stderr == f"Error: gave up waiting 0.05s for the writer lock held by pid {os.getpid()} " \
                                    f"({data_dir / 'LOCK'})\n", name
            assert journal_bytes(data_dir) == before, name
        # before the subcommand too, like `git -C`
        result = invoke(data_dir, "delete", [template["fact_id"]], None, "--lock-timeout", "0")
        assert result.stderr.startswith("Error: gave up waiting 0s for the writer lock")
    holder.close()


@pytest.mark.slow
def test_waiting_for_the_lock_is_said_after_one_second(tmp_path, template):
    data_dir = copy_of(template, tmp_path)
    holder = Journal(data_dir)
    with holder.lock():
        result = invoke(data_dir, "delete", [template["fact_id"], "--lock-timeout", "1.3"])
    holder.close()
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"waiting for the writer lock held by pid {os.getpid()} ... (--lock-timeout to give up sooner)",
        f"Error: gave up waiting 1.3s for the writer lock held by pid {os.getpid()} ({data_dir / 'LOCK'})"]


def test_integer_options_are_range_checked(tmp_path, template):
    """Every integer option of every command refuses a 20-digit number with one line naming it."""
    data_dir = copy_of(template, tmp_path)
    before = journal_bytes(data_dir)
    checked = []
    for name, command in ALL.items():
        args, stdin = argv(name, command, template, tmp_path)
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, (click.types.IntParamType,)):
                assert isinstance(param.type, click.IntRange) and param.type.max is not None, (name, param.name)
                result = invoke(data_dir, name, [*args, param.opts[0], HUGE], stdin)
                assert result.exit_code == 1, (name, result.output)
                assert result.stderr.startswith(f"Error: Invalid value for '{param.opts[0]}': {HUGE} is not in the "
                                                f"range {param.type.min}<=x<="), (name, result.stderr)
                assert len(result.stderr.splitlines()) == 1
                checked.append(f"{name} {param.opts[0]}")
    assert journal_bytes(data_dir) == before
    assert {"query --top-k", "query --token-budget", "view --top-k", "bootstrap --token-budget", "search --limit",
            "scan --limit", "search --token-budget", "scan --token-budget"} <= set(checked)


EMPTY_STRINGS = {
    # command: first line with every argument "" (and no --tenant); with `--tenant ""` every command that
    # has the option refuses it first
    "get": "Error: unknown fact id ''",
    "set-horizon": "Error: invalid horizon class '' (expected one of volatile, medium, stable, none)",
    "set-validity": "Error: unknown fact id ''",
    "reverify": "Error: unknown fact id ''",
    "sql": "Error: QUERY must not be empty",
    "store-batch": "Error: no store requests in the input",
    "hold release": "Error: unknown legal hold ''",
}


def test_empty_strings(tmp_path, template):
    """Empty arguments and `--tenant ""` are refused with one line (an empty fact value is allowed, as in
    Crux); the journal is unchanged."""
    data_dir = copy_of(template, tmp_path)
    before = journal_bytes(data_dir)
    for name, command in ALL.items():
        args, stdin = argv(name, command, template, tmp_path)
        names = [p for p in command.params if isinstance(p, click.Argument)]
        if not names and not any(p.name == "tenant" for p in command.params):
            continue
        args = ["" if (i < len(names) and not args[i].startswith("-")) else a for i, a in enumerate(args)]
        if any(p.name == "tenant" for p in command.params):
            args = [a for i, a in enumerate(args) if not (a == "--tenant" or (i and args[i - 1] == "--tenant"))]
            args += ["--tenant", ""]
        has_tenant = any(p.name == "tenant" for p in command.params)
        result = invoke(data_dir, name, args, "" if name == "store-batch" else stdin)
        if has_tenant:
            assert (result.exit_code, first_line(result)) == (
                1, f"Error: Invalid value for '--tenant': must not be empty (see `cruxsql {name} --help`)"), name
        elif name in EMPTY_STRINGS:
            assert (result.exit_code, first_line(result)) == (1, EMPTY_STRINGS[name]), (name, result.output)
        else:
            generic(name, result)
        if result.exit_code:
            assert len(result.stderr.splitlines()) == 1, (name, result.stderr)
    assert journal_bytes(data_dir) == before
    for args, message in [(("", "k", "v"), "Error: entity must not be empty"),
                          (("e", " ", "v"), "Error: key must not be empty")]:
        result = invoke(data_dir, "store", list(args))
        assert (result.exit_code, result.stderr) == (1, message + "\n")
    assert journal_bytes(data_dir) == before
    stored = invoke(data_dir, "store", ["e", "k", "", "--json"])
    fact = json.loads(stored.stdout)
    assert stored.exit_code == 0 and (fact["value"], fact["tokens"]) == ("", 0)


def test_empty_input_is_refused_alike_and_creates_nothing(tmp_path):
    data_dir = tmp_path / "store"
    for name, message in (("store-batch", "Error: no store requests in the input"),
                          ("store-conversation", "Error: no turns in the input"),
                          ("ingest", "Error: no documents in the input")):
        result = invoke(data_dir, name, ["-"], "")
        assert (result.exit_code, result.stderr) == (1, message + "\n"), name
        assert not data_dir.exists()


def test_data_dir_before_the_subcommand_and_subcommand_wins(tmp_path, template):
    data_dir = copy_of(template, tmp_path)
    runner = CliRunner()
    before = runner.invoke(main, ["--data-dir", str(data_dir), "get", template["fact_id"]], prog_name="cruxsql")
    assert before.exit_code == 0 and json.loads(before.stdout)["value"] == "alice runs deploys"
    wins = runner.invoke(main, ["--data-dir", str(data_dir), "get", template["fact_id"], "--data-dir",
                                str(tmp_path / "elsewhere")], prog_name="cruxsql")
    assert wins.stderr == f"Error: no cruxsql store at {tmp_path / 'elsewhere'} (run `cruxsql init` or pass " \
                          f"--data-dir)\n"


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 600 KiB tmpfs, to fill up."""
    with mounted(tmp_path / "small", "a tmpfs", "-t", "tmpfs", "-o", "size=600k", "tmpfs") as mount_point:
        yield mount_point


def test_full_disk(small_disk):
    """On a full disk a write fails with one line and leaves the journal as it was; reads still answer."""
    data_dir = small_disk / "store"
    assert invoke(data_dir, "store", ["svc", "owner", "alice"]).exit_code == 0
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    before = journal_bytes(data_dir)
    # larger than any free room left in the journal's last block, so the append itself fails part-way
    # (a line that fits is durable once fsynced: the write is then reported done, the view repaired later)
    result = invoke(data_dir, "store", ["svc", "team", "x" * 20000])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("Error: "), result.stderr
    assert journal_bytes(data_dir) == before
    read = invoke(data_dir, "query", ["alice"])
    assert read.exit_code == 0 and read.stdout.startswith("[svc] owner = alice")
    assert "Traceback" not in read.stderr   # a read opens no write and needs no room: it just answers


def test_read_only_journal_file(tmp_path, template):
    """An immutable journal in a writable directory (`chattr +i`): reads answer, writes refuse."""
    data_dir = copy_of(template, tmp_path)
    journal = data_dir / "facts.jsonl"
    if subprocess.run(["chattr", "+i", str(journal)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")
    try:
        read = invoke(data_dir, "get", [template["fact_id"]])
        write = invoke(data_dir, "store", ["svc", "owner", "bob"])
    finally:
        subprocess.run(["chattr", "-i", str(journal)], check=True)
    assert read.exit_code == 0 and json.loads(read.stdout)["value"] == "alice runs deploys"
    assert read.stderr == f"note: {data_dir} is read-only ({journal} is not writable): reading an in-memory copy " \
                          f"of the view caught up with the journal; nothing is written\n"
    assert (write.exit_code, write.stderr) == (
        1, f"Error: {data_dir} is read-only ({journal} is not writable); this command writes to it\n")


def test_sql_on_a_read_only_store_copies_nothing_to_disk(read_only_store, tmp_path, monkeypatch):
    """The console queries the read-only store's in-memory view itself: no file copy anywhere (a killed
    `sql` would leave one where erasure cannot reach it)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with Store(read_only_store, read_only=True) as store:
        target = store.view_for_queries()
        assert isinstance(target, apsw.Connection)
        result = invoke(read_only_store, "sql", ["SELECT count(*) AS n FROM live_facts", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["n"] >= 1
    assert list(scratch.iterdir()) == []
