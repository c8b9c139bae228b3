"""The Dockerfile without a Docker engine: hadolint, the project's own rules, and its build
steps played into a fresh venv (the same requirement set, the same commands) whose `prober`
then runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.deploy.dockerfile import (
    DockerIgnore,
    Sandbox,
    global_args,
    parse,
    problems,
    run_stage,
    runtime_image,
    stages,
)

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
REQUIREMENTS = ROOT / "deploy" / "image" / "requirements.txt"
HADOLINT = Path(sys.executable).parent / "hadolint"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(HADOLINT), "--no-color", str(path)], capture_output=True, text=True, check=False
    )


def test_hadolint_finds_nothing() -> None:
    linted = hadolint(DOCKERFILE)
    assert (linted.returncode, linted.stdout + linted.stderr) == (0, "")


def test_hadolint_does_lint(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install flask\n")
    linted = hadolint(bad)
    assert linted.returncode != 0
    assert {"DL3007", "DL3013", "DL3042"} <= set(re.findall(r"DL\d{4}", linted.stdout))


def test_the_projects_rules_hold() -> None:
    assert problems(DOCKERFILE.read_text()) == []


GOOD_RUNTIME = 'FROM python:3.11.13-slim\nUSER 65532:65532\nENTRYPOINT ["prober"]\n'


@pytest.mark.parametrize(
    ("dockerfile", "problem"),
    [
        (
            GOOD_RUNTIME.replace("3.11.13-slim", "3.11-slim"),
            "base image 'python:3.11-slim' is not pinned to a full version or a digest",
        ),
        (
            "ARG BASE=python:latest\nFROM ${BASE}\n" + GOOD_RUNTIME.split("\n", 1)[1],
            "base image 'python:latest' is not pinned to a full version or a digest",
        ),
        (GOOD_RUNTIME.replace("USER 65532:65532\n", ""), "the runtime stage sets no USER: it "
         "would run as root"),
        (GOOD_RUNTIME.replace("65532:65532", "prober"), "USER prober: not a non-root numeric user"),
        (GOOD_RUNTIME.replace("65532:65532", "0"), "USER 0: not a non-root numeric user"),
        (GOOD_RUNTIME + "ADD https://example.test/x.tgz /x\n",
         "line 4: ADD (use COPY; never fetch URLs into an image)"),
        (GOOD_RUNTIME + "ENV API_TOKEN=abc\n", "line 4: API_TOKEN looks like a secret"),
        (GOOD_RUNTIME + "ARG DB_PASSWORD\n", "line 4: DB_PASSWORD looks like a secret"),
        (GOOD_RUNTIME + "COPY server.key /etc/\n", "line 4: COPY server.key looks like a secret"),
        (GOOD_RUNTIME.replace('["prober"]', "prober"),
         "the runtime stage needs an exec-form ENTRYPOINT (no shell at run time)"),
        (GOOD_RUNTIME + "RUN rm -rf /tmp/x\n", "line 4: RUN in the runtime stage"),
    ],
)  # fmt: skip
def test_each_rule_names_what_is_wrong(dockerfile: str, problem: str) -> None:
    assert problems(dockerfile) == [problem]


def test_the_good_example_is_clean() -> None:
    assert problems(GOOD_RUNTIME) == []


def test_continuations_and_comments_are_read_as_docker_does() -> None:
    text = "# syntax=docker/dockerfile:1\nFROM a:1.2.3 AS b\nRUN one \\\n  # note\n    && two\n"
    (run,) = stages(parse(text))[1][0].instructions
    assert (run.keyword, run.args, run.line) == ("RUN", "one && two", 3)


def test_dockerignore_lets_in_only_the_package() -> None:
    ignore = DockerIgnore((ROOT / ".dockerignore").read_text())
    for kept in (
        "pyproject.toml",
        "README.md",
        "prober/core/models.py",
        str(REQUIREMENTS.relative_to(ROOT)),
    ):
        assert not ignore.excluded(kept), kept
    for dropped in (".venv/bin/python", ".git/HEAD", "tests/deploy/test_dockerfile.py",
                    "prober/core/__pycache__/models.cpython-311.pyc", "deploy/base/rbac.yaml",
                    "lab-out/x/events.jsonl", "Dockerfile"):  # fmt: skip
        assert ignore.excluded(dropped), dropped


def test_labels_say_where_the_image_comes_from_and_its_version() -> None:
    preamble, built = stages(parse(DOCKERFILE.read_text()))
    image = runtime_image(built[-1], Sandbox(Path("/nonexistent"), ROOT, DockerIgnore("")),
                          global_args(preamble))  # fmt: skip
    assert image.labels["org.opencontainers.image.source"] == PYPROJECT["project"]["urls"]["Source"]
    assert image.labels["org.opencontainers.image.version"] == PYPROJECT["project"]["version"]
    assert image.ports == ["9090"]


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_requirement_set_pins_every_package_and_covers_pyproject() -> None:
    lines = [
        line for line in REQUIREMENTS.read_text().splitlines() if line and not line.startswith("#")
    ]
    assert all(re.fullmatch(r"[\w.-]+==[\w.!+-]+", line) for line in lines), lines
    pinned = {_name(line) for line in lines}
    assert {_name(dep) for dep in PYPROJECT["project"]["dependencies"]} <= pinned


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_build_steps_install_a_prober_that_runs(tmp_path: Path) -> None:
    """Play the build stage into a fresh venv (pip reaches PyPI, like `docker build`)."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "python").symlink_to(sys._base_executable)  # the base image's `python`
    text = DOCKERFILE.read_text()
    preamble, (build, runtime) = stages(parse(text))
    defaults = global_args(preamble)
    root = tmp_path / "root"
    ignore = DockerIgnore((ROOT / ".dockerignore").read_text())
    sandbox = Sandbox(root, ROOT, ignore, env={"PATH": f"{shim}:/usr/bin:/bin"})
    ran = run_stage(build, sandbox, defaults)
    assert len(ran) == 2
    assert ran[-1].endswith('/bin/pip" check')

    inputs = {"requirements.txt", "pyproject.toml", "README.md", "prober"}
    outputs = {"dist", "build", "prober.egg-info"}  # what `pip wheel .` leaves
    assert {p.name for p in (root / "src").iterdir()} == inputs | outputs
    assert not list((root / "src" / "prober").rglob("__pycache__"))

    image = runtime_image(runtime, Sandbox(root, ROOT, ignore), defaults)
    venv = str(root / "opt" / "prober")
    # A venv does not survive a move: the runtime stage must copy it to the same path.
    assert image.copied == [("build", venv, venv)]
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", **image.env}
    env["PATH"] = image.env["PATH"].replace(os.environ["PATH"], "/usr/bin:/bin")
    assert image.entrypoint == ["prober"]
    for args in (image.cmd, ["run", "--help"], ["audit", "follow", "--help"], ["analyze", "-h"]):
        done = subprocess.run(
            [*image.entrypoint, *args], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage: prober"), done.stdout[:200]
        assert Path(env["PATH"].split(":")[0], "prober").exists()
    # Every module imports: the pinned set holds all the daemon, lab and k8s need.
    imported = subprocess.run(
        [f"{venv}/bin/python", "-c", "import importlib, pkgutil, prober\n"
         "for m in pkgutil.walk_packages(prober.__path__, 'prober.'):\n"
         "    if not m.name.endswith('__main__'):\n"
         "        importlib.import_module(m.name)\n"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr[-2000:]
