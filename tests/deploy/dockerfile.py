"""Just enough of a Dockerfile builder to run an image's build steps without a Docker engine.

`parse` reads the instructions (comments, parser directives, line continuations), `stages`
groups them, and `run_stage` plays one stage into a sandbox directory that stands for the
container's root: ARG and ENV set variables (an absolute path value is rebased under the
sandbox), WORKDIR makes and enters a directory, COPY copies from the build context through
`.dockerignore`, and RUN runs its shell form with `/bin/sh -c`. Any other instruction in a
played stage is an error, so the Dockerfile cannot drift from what the test runs.

`problems` is the project's own lint, on top of hadolint: the rules the issue names (pinned
base, non-root numeric user, no secrets, no ADD of URLs) and what this image promises
(exec-form entrypoint, no RUN in the runtime stage).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
SECRET_NAME = re.compile(r"(?i)(password|passwd|secret|token|api_?key|private_?key|credential)")
SECRET_FILE = re.compile(r"(?i)(\.pem|\.key|id_rsa|\.p12|\.pfx|kubeconfig|\.env)$")
PINNED_TAG = re.compile(r"^[\w./-]+:\d+\.\d+\.\d+[\w.-]*$")  # full version: 3.11.13-slim-...
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class Instruction:
    keyword: str  # upper case
    args: str
    line: int


@dataclass(slots=True)
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


class DockerfileError(ValueError):
    """An instruction this builder does not play, or cannot play as written."""


def parse(text: str) -> list[Instruction]:
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue  # blank lines, comments and parser directives
        if pending and line.startswith("#"):
            continue  # comments inside a continued instruction are dropped by Docker too
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1].strip())
            continue
        pending.append(line)
        keyword, _, args = " ".join(part for part in pending if part).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = []
    if pending:
        raise DockerfileError(f"line {start}: the last instruction ends with a continuation")
    return instructions


def stages(instructions: list[Instruction]) -> tuple[list[Instruction], list[Stage]]:
    """(the global ARGs before the first FROM, the stages in order)."""
    preamble: list[Instruction] = []
    found: list[Stage] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            words = instruction.args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            found.append(Stage(words[0], name))
        elif found:
            found[-1].instructions.append(instruction)
        else:
            preamble.append(instruction)
    return preamble, found


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Docker's `$NAME` and `${NAME}` substitution (unset names become empty)."""
    return _VARIABLE.sub(lambda m: variables.get(m[1] or m[2], ""), text)


def global_args(preamble: list[Instruction]) -> dict[str, str]:
    values: dict[str, str] = {}
    for instruction in preamble:
        name, _, default = instruction.args.partition("=")
        values[name] = default
    return values


class DockerIgnore:
    """`.dockerignore` patterns: the last matching pattern wins, `!` re-includes, a pattern
    that matches a directory matches everything below it, `**` spans directories."""

    def __init__(self, text: str) -> None:
        self._rules: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            include = line.startswith("!")
            pattern = line.lstrip("!").strip("/")
            self._rules.append((include, re.compile(_glob_regex(pattern))))

    def excluded(self, relative: str) -> bool:
        parts = PurePosixPath(relative).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        verdict = False
        for include, pattern in self._rules:
            if any(pattern.fullmatch(prefix) for prefix in prefixes):
                verdict = not include
        return verdict


def _glob_regex(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


@dataclass(slots=True)
class Sandbox:
    """A directory standing for the container's root, and the state of the stage played."""

    root: Path
    context: Path
    ignore: DockerIgnore
    variables: dict[str, str] = field(default_factory=dict)  # ARG and ENV, as seen by $NAME
    env: dict[str, str] = field(default_factory=dict)  # ENV only: what RUN and the image see
    workdir: PurePosixPath = field(default_factory=lambda: PurePosixPath("/"))

    def host(self, path: str | PurePosixPath) -> Path:
        """The sandbox path of an absolute or WORKDIR-relative container path."""
        container = self.workdir / PurePosixPath(path)
        return self.root / str(container).lstrip("/")

    def rebased(self, value: str) -> str:
        return str(self.host(value)) if value.startswith("/") else value

    def context_files(self, source: str) -> Iterator[tuple[Path, str]]:
        """(file, its path relative to `source`) for every file COPY may take."""
        base = self.context / source.strip("/")
        relative_base = str(base.relative_to(self.context))
        if base.is_file():
            if not self.ignore.excluded(relative_base):
                yield base, base.name
            return
        for path in sorted(base.rglob("*")):
            relative = str(path.relative_to(self.context))
            if path.is_file() and not self.ignore.excluded(relative):
                yield path, str(path.relative_to(base))


def declare(
    keyword: str,
    args: str,
    sandbox: Sandbox,
    defaults: Mapping[str, str],
    env: dict[str, str],
) -> bool:
    """Play an ARG or ENV (ENV values also go to `env`); False for any other instruction."""
    if keyword == "ARG":
        name, has_default, default = args.partition("=")
        value = default if has_default else defaults.get(name, "")
        sandbox.variables[name] = sandbox.rebased(expand(value, sandbox.variables))
    elif keyword == "ENV":
        for name, value in _pairs(args):
            sandbox.variables[name] = env[name] = expand(value, sandbox.variables)
    else:
        return False
    return True


def run_stage(stage: Stage, sandbox: Sandbox, defaults: Mapping[str, str]) -> list[str]:
    """Play a build stage; returns the RUN commands it ran, as written."""
    ran: list[str] = []
    for instruction in stage.instructions:
        keyword, args = instruction.keyword, instruction.args
        if declare(keyword, args, sandbox, defaults, sandbox.env):
            continue
        if keyword == "WORKDIR":
            sandbox.workdir = sandbox.workdir / expand(args, sandbox.variables)
            sandbox.host(".").mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            _copy(shlex.split(expand(args, sandbox.variables)), sandbox, instruction)
        elif keyword == "RUN":
            _run(args, sandbox, instruction)
            ran.append(args)
        else:
            raise DockerfileError(f"line {instruction.line}: {keyword} is not played here")
    return ran


def _pairs(args: str) -> list[tuple[str, str]]:
    words = shlex.split(args)
    if words and "=" not in words[0]:  # the legacy `ENV NAME value` form
        return [(words[0], " ".join(words[1:]))]
    return [(word.partition("=")[0], word.partition("=")[2]) for word in words]


def _copy(words: list[str], sandbox: Sandbox, instruction: Instruction) -> None:
    if any(word.startswith("--") for word in words):
        raise DockerfileError(f"line {instruction.line}: COPY options are not played here")
    *sources, destination = words
    target = sandbox.host(destination)
    into_directory = destination.endswith("/") or len(sources) > 1
    for source in sources:
        for path, relative in sandbox.context_files(source):
            if (sandbox.context / source).is_dir() or into_directory:
                copied = target / relative
            else:
                copied = target
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copied)


def _run(command: str, sandbox: Sandbox, instruction: Instruction) -> None:
    if command.startswith("["):
        raise DockerfileError(f"line {instruction.line}: exec-form RUN is not played here")
    env = {**os.environ, **sandbox.env}
    for name, value in sandbox.variables.items():
        env.setdefault(name, value)  # build ARGs are in the environment of RUN too
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=sandbox.host("."),
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        said = (done.stdout + done.stderr)[-4000:]
        raise DockerfileError(f"line {instruction.line}: RUN exited {done.returncode}:\n{said}")


@dataclass(slots=True)
class Image:
    """What the runtime stage leaves: how the container is started and described."""

    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    user: str
    labels: dict[str, str]
    ports: list[str]
    copied: list[tuple[str, str, str]]  # (stage, source, destination), expanded


def runtime_image(stage: Stage, sandbox: Sandbox, defaults: Mapping[str, str]) -> Image:
    """Read the runtime stage: its COPY --from steps are returned, not played (the test
    asserts what they copy), and it must run nothing."""
    image = Image({}, [], [], "", {}, [], [])
    for instruction in stage.instructions:
        keyword, args = instruction.keyword, instruction.args
        if declare(keyword, args, sandbox, defaults, image.env):
            continue
        if keyword == "LABEL":
            image.labels.update(
                (name, expand(value, sandbox.variables)) for name, value in _pairs(args)
            )
        elif keyword == "COPY" and args.startswith("--from="):
            option, source, destination = shlex.split(expand(args, sandbox.variables))
            image.copied.append((option.removeprefix("--from="), source, destination))
        elif keyword in ("ENTRYPOINT", "CMD"):
            words = json.loads(args)
            if keyword == "ENTRYPOINT":
                image.entrypoint = words
            else:
                image.cmd = words
        elif keyword == "USER":
            image.user = args
        elif keyword == "EXPOSE":
            image.ports += args.split()
        else:
            raise DockerfileError(f"line {instruction.line}: {keyword} is not read here")
    return image


def problems(text: str) -> list[str]:
    """What the project's own rules find wrong with a Dockerfile; empty when clean."""
    preamble, built = stages(parse(text))
    if not built:
        return ["no FROM"]
    defaults = global_args(preamble)
    found = [
        f"base image {base!r} is not pinned to a full version or a digest"
        for base in (expand(stage.base, defaults) for stage in built)
        if not (PINNED_TAG.match(base) or DIGEST.search(base))
    ]
    for instruction in [*preamble, *(i for s in built for i in s.instructions)]:
        found += _instruction_problems(instruction)
    return found + _runtime_problems(built[-1])


def _instruction_problems(instruction: Instruction) -> list[str]:
    where, keyword, args = f"line {instruction.line}", instruction.keyword, instruction.args
    if keyword == "ADD":
        return [f"{where}: ADD (use COPY; never fetch URLs into an image)"]
    if keyword in ("ARG", "ENV"):
        names = [name for name, _ in _pairs(args)] if "=" in args else [args.split()[0]]
        return [
            f"{where}: {name} looks like a secret" for name in names if SECRET_NAME.search(name)
        ]
    if keyword == "COPY":
        sources = [word for word in shlex.split(args) if not word.startswith("--")][:-1]
        return [f"{where}: COPY {s} looks like a secret" for s in sources if SECRET_FILE.search(s)]
    return []


def _runtime_problems(final: Stage) -> list[str]:
    found: list[str] = []
    users = [i.args for i in final.instructions if i.keyword == "USER"]
    if not users:
        found.append("the runtime stage sets no USER: it would run as root")
    elif not users[-1].split(":")[0].isdigit() or int(users[-1].split(":")[0]) == 0:
        found.append(f"USER {users[-1]}: not a non-root numeric user")
    entrypoints = [i.args for i in final.instructions if i.keyword == "ENTRYPOINT"]
    if not entrypoints or not entrypoints[-1].startswith("["):
        found.append("the runtime stage needs an exec-form ENTRYPOINT (no shell at run time)")
    found += [
        f"line {i.line}: RUN in the runtime stage" for i in final.instructions if i.keyword == "RUN"
    ]
    return found
