"""Flags (one invalid value per rule, exact message) and the audit log's lumberjack rotation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from prober.fakeapiserver.__main__ import main
from prober.fakeapiserver.audit import AuditLog, backup_name
from prober.fakeapiserver.options import (
    DEFAULT_USER,
    OptionsError,
    User,
    build_parser,
    load_tokens,
    options_from_args,
)
from tests.support.apiservers import LabCerts


def args(certs: LabCerts, *extra: str) -> list[str]:
    return ["--cert", str(certs.server.cert), "--key", str(certs.server.key), *extra]


def test_flags_fill_the_options(certs: LabCerts, token_file: Path, tmp_path: Path) -> None:
    options = options_from_args(
        args(
            certs,
            "--port=0",
            "--plain-port=0",
            "--hostname=master-1",
            "--shutdown-delay-duration=1m10s",
            "--no-shutdown-send-retry-after",
            "--no-shutdown-audit-annotation",
            f"--token-file={token_file}",
            f"--audit-log={tmp_path / 'audit.log'}",
            f"--truth={tmp_path / 'truth.jsonl'}",
            "--goaway-chance=0.001",
            "--shutdown-watch-termination-grace-period=5s",
            "--read-header-timeout=500ms",
        )
    )
    assert options.shutdown_delay == 70.0
    assert not options.send_retry_after
    assert not options.shutdown_annotation
    assert options.plain_port == 0
    assert options.watch_grace == 5.0
    assert options.read_header_timeout == 0.5
    assert options.goaway_chance == 0.001
    assert options.apiserver_id.startswith("apiserver-")
    defaults = options_from_args(args(certs))
    assert defaults.send_retry_after
    assert defaults.shutdown_annotation
    assert defaults.port == 6443
    assert defaults.plain_port is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--goaway-chance=0.5"], "--goaway-chance 0.5: must be between 0 and 0.02"),
        (["--port=70000"], "--port 70000: not a port number (0-65535, 0 picks one)"),
        (["--hostname="], "--hostname: must not be empty"),
        (["--watch-drain-min-qps=0"], "--watch-drain-min-qps 0.0: must be positive"),
        (["--token-file=/nonexistent/token"], "--token-file /nonexistent/token: cannot be read"),
    ],
)
def test_each_bad_value_has_a_one_line_error(certs: LabCerts, extra: list, message: str) -> None:
    with pytest.raises(OptionsError) as caught:
        options_from_args(args(certs, *extra))
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_bad_duration_and_missing_files_exit_2_without_traceback(
    certs: LabCerts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(args(certs, "--shutdown-delay-duration=10"))
    assert caught.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: argument --shutdown-delay-duration: '10' is not a Go duration such as 100ms or 5s\n"
    )
    missing = tmp_path / "missing.crt"
    code = main(["--cert", str(missing), "--key", str(certs.server.key), "--port", "0"])
    assert code == 2
    assert capsys.readouterr().err == f"error: --cert {missing}: no such file\n"


def test_token_file_formats(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text('# comment\nplain-token\nabc,alice,1001,"devs,ops"\n')
    tokens = load_tokens(path)
    assert tokens["plain-token"].name == DEFAULT_USER
    assert tokens["abc"] == User("alice", "1001", ("devs", "ops", "system:authenticated"))
    path.write_text("a,\n")
    with pytest.raises(OptionsError, match=r"tokens:1: expected token or token,user,uid"):
        load_tokens(path)
    path.write_text("\n\n")
    with pytest.raises(OptionsError, match="no token in the file"):
        load_tokens(path)


def test_help_documents_every_flag_with_an_example() -> None:
    text = build_parser().format_help()
    for flag in (
        "--port", "--cert", "--key", "--hostname", "--shutdown-delay-duration",
        "--shutdown-send-retry-after", "--no-shutdown-send-retry-after", "--token-file",
        "--audit-log", "--truth", "--plain-port", "--no-shutdown-audit-annotation",
        "--goaway-chance", "--shutdown-watch-termination-grace-period",
    ):  # fmt: skip
        assert flag in text, flag
    assert "example:\n  python -m prober.fakeapiserver --port 0" in text


def test_help_from_the_command_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "prober.fakeapiserver", "--help"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert "/_lab/shutdown" in result.stdout


def event(n: int) -> dict[str, object]:
    return {"kind": "Event", "auditID": f"id-{n}", "pad": "x" * 80}


def test_audit_log_rotates_by_size_with_lumberjack_names(tmp_path: Path) -> None:
    clock = iter(1_700_000_000.0 + n * 0.5 for n in range(100))
    log = AuditLog(tmp_path / "audit.log", max_bytes=1000, max_backups=3, wall=lambda: next(clock))
    for n in range(40):
        log.write(event(n))
    log.close()
    backups = log.backups()
    assert len(backups) == 3, "older backups are removed"
    assert [p.name for p in backups] == sorted(p.name for p in backups)
    assert backups[0].name.startswith("audit-2023-11-14T22-13-")
    assert backups[0].name.endswith(".log")
    ids = []
    for path in [*backups, tmp_path / "audit.log"]:
        assert path.stat().st_size <= 1000
        ids += [json.loads(line)["auditID"] for line in path.read_text().splitlines()]
    assert ids == [f"id-{n}" for n in range(40 - len(ids), 40)], "no line lost or split"


def test_backup_name_is_lumberjacks_format() -> None:
    name = backup_name(Path("/var/log/kube-apiserver/audit.log"), 1_700_000_000.123)
    assert name == Path("/var/log/kube-apiserver/audit-2023-11-14T22-13-20.123.log")


def test_fast_audit_timestamps_match_rfc3339() -> None:
    from prober.core.models import rfc3339
    from prober.fakeapiserver.audit import _timestamp

    for wall in (1_700_000_000.0, 1_700_000_000.9999996, 1_700_000_000.123456, 1_700_000_059.5):
        assert _timestamp(wall) == rfc3339(wall)
