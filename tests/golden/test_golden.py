"""Every output format is byte-identical to `expected/`: a refactor that changes a byte of
what a user or CI reads fails here. An intended change: `make golden`, then review the diff."""

from __future__ import annotations

import pytest

from tests.golden.outputs import EXPECTED, render


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return render(tmp_path_factory.mktemp("golden"))


def _expected() -> list[str]:
    return sorted(p.relative_to(EXPECTED).as_posix() for p in EXPECTED.rglob("*") if p.is_file())


def test_the_commands_write_the_expected_files(rendered: dict[str, bytes]) -> None:
    assert sorted(rendered) == _expected()


@pytest.mark.parametrize("name", _expected())
def test_output_is_byte_identical(rendered: dict[str, bytes], name: str) -> None:
    expected = (EXPECTED / name).read_bytes()
    got = rendered.get(name)
    assert got is not None, f"{name}: no longer written"
    if got != expected:
        old, new = expected.decode().splitlines(), got.decode().splitlines()
        first = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
            min(len(old), len(new)),
        )
        pytest.fail(
            f"{name} differs from line {first + 1}:\n"
            f"  expected: {old[first] if first < len(old) else '<end>'}\n"
            f"  got:      {new[first] if first < len(new) else '<end>'}\n"
            "(an intended change: `make golden`, then review the diff)",
            pytrace=False,
        )
