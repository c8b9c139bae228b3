"""`prober lab`'s flags: a short list of its own, each scenario's options under it, and a
removed flag refused in one line that names what stands in its place."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from prober.cli import main
from prober.lab.registry import OPTIONS, SCENARIOS

LIMIT = 15  # options besides -h that `prober lab --help` lists (issue 49)


def listed(help_text: str, section: str) -> list[str]:
    """The flags a help section lists, in order."""
    body = help_text.split(f"\n{section}:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  (-{1,2}[\w-]+)", body, re.M)


def help_of(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(["lab", *args, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_the_lab_lists_at_most_fifteen_options_of_its_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of(capsys)
    own = [flag for flag in listed(text, "options") if flag != "-h"]
    assert 0 < len(own) <= LIMIT, own
    assert not {o.flag for o in OPTIONS} & set(own)  # no scenario's option among them
    assert "options of --scenario" not in text


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_scenario_named_first_lists_its_own_options(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    text = help_of(capsys, "--scenario", name)
    mine = [o.flag for o in OPTIONS if o in SCENARIOS[name].options]
    if mine:
        assert listed(text, f"options of --scenario {name}") == mine
    else:  # none of its own: no section for them
        assert "options of --scenario" not in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--evict"], "--evict: a scenario of its own now: --scenario evict"),
        (["--control"], "--control: no longer a lab option: bench/policies.py runs the control "
         "daemon beside the lab's"),
        (["--slow-lb", "internal-lb"], "--slow-lb: an option of --scenario slow-lb, not of "
         "rollout (prober lab --scenario NAME --help lists a scenario's own)"),
        (["--scenario", "crash", "--compare-watch-grace", "0s,25s"],
         "--compare-watch-grace: an option of --scenario rollout or slow-lb, not of crash"),
    ],
    ids=["evict", "control", "slow-lb", "compare-watch-grace"],
)  # fmt: skip
def test_a_flag_not_of_this_lab_is_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    out = tmp_path / "out"
    try:
        code = main(["lab", *args, "--out", str(out)])
    except SystemExit as exit_:  # argparse's own refusal
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "error" in line or line.startswith("prober lab:")] == [
        line for line in err if message in line
    ]
    assert any(message in line for line in err), err
    assert not out.exists()
