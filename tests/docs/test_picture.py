"""docs/rollout.svg is what the report's timeline draws of the committed fixture today."""

from __future__ import annotations

from tests.docs import picture


def test_the_readme_picture_is_redrawn_byte_for_byte() -> None:
    drawn = picture.draw().encode()
    committed = picture.PICTURE.read_bytes()
    assert drawn == committed, "docs/rollout.svg is stale: make golden, then review its diff"


def test_the_picture_tells_the_late_lb_from_the_good_one() -> None:
    run = picture.Run(picture.FIXTURE)
    external, internal = (run.heading(lb) for lb in picture.SHOWN)
    assert external.startswith("external-lb: late: ")
    assert internal.startswith("internal-lb: good: ")
