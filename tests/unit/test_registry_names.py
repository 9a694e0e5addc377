"""The names of an image pushed to a registry (issue 36): the tag is the image's own id,
so two images never share one; the repository keeps the local name under the registry."""

from __future__ import annotations

import pytest

from runner.containers.images import registry
from runner.containers.images.registry import content_tag, repository

ID = "sha256:" + "0f" * 32


def test_the_tag_is_the_images_own_id() -> None:
    assert content_tag(ID) == "id-" + "0f" * 32
    assert len(content_tag(ID)) <= 128  # a tag's limit


@pytest.mark.parametrize("bad", ["bakeoff/python:latest", "sha256:abc", "0f" * 32, ""])
def test_anything_but_an_image_id_is_refused_as_a_tag(bad: str) -> None:
    with pytest.raises(ValueError, match=r"not an image id \(sha256:<64 hex>\)"):
        content_tag(bad)


@pytest.mark.parametrize(("local", "repo"), [
    ("bakeoff/python:latest", "reg.example:5000/bakeoff/python"),
    ("bakeoff/node:22", "reg.example:5000/bakeoff/node"),
    ("bakeoff/base", "reg.example:5000/bakeoff/base"),
    ("bakeoff/x@sha256:" + "ab" * 32, "reg.example:5000/bakeoff/x"),
    ("localhost:5000/team/img:1", "reg.example:5000/team/img"),
    ("ghcr.io/org/tool:v2", "reg.example:5000/org/tool"),
])
def test_the_repository_is_the_local_name_under_the_registry(local: str, repo: str) -> None:
    assert repository("reg.example:5000/", local) == repo


def test_a_user_is_found_by_its_whole_name_with_numeric_ids_only() -> None:
    passwd = (b"root:x:0:0:root:/root:/bin/bash\n# a comment\n"
              b"postgresql:x:7:7::/:/bin/sh\npostgres:x:103:109:PostgreSQL:/var/lib/postgresql"
              b":/bin/bash\nodd:x:12a:1::/:/bin/sh\nshort:x:5\n")
    assert registry.passwd_ids(passwd, "postgres") == "103:109"  # not postgresql's
    assert registry.passwd_ids(passwd, "root") == "0:0"
    assert [registry.passwd_ids(passwd, name) for name in ("odd", "short", "nobody", "")] == [
        None, None, None, None]
