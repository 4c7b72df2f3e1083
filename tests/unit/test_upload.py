"""`ortdist publish`'s decisions without an index: the simple page read, which wheels go, twine's
argv and the order of the steps (twine and the index are faked; the real round trip is
tests/integration/test_publish.py)."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from ortdist import run, upload
from ortdist.errors import PublishError
from ortdist.inroot import Venv, VenvCommands
from ortdist.smoke import env
from ortdist.smoke.wheelinfo import WheelInfo
from ortdist.upload import IndexFile, ReleaseWheel

CP311 = "onnxruntime-1.21.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
CP313 = "onnxruntime-1.21.0-cp313-cp313-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"

SHA311 = "77f36e97df4dfa554b342afe364626b72f571ce3531910cf599f02cc5bff767b"
# What pypiserver 2.4.2 serves for /simple/onnxruntime/ (a real response).
PYPISERVER_PAGE = f"""<!DOCTYPE html>
<html lang="en"><head><title>Links for onnxruntime</title></head>
    <body>
        <h1>Links for onnxruntime</h1>
            <a href="/packages/{CP311}#sha256={SHA311}">{CP311}</a><br>
    </body>
</html>
"""


def wheel(name: str, sha: str = "a" * 64) -> ReleaseWheel:
    py = name.split("-")[2]
    return ReleaseWheel(Path("/dist") / name, sha, f"{py[2]}.{py[3:]}", "onnxruntime", "1.21.0")


def test_the_simple_page_gives_file_names_and_their_sha256() -> None:
    assert upload.parse_simple_page(PYPISERVER_PAGE) == [IndexFile(CP311, SHA311)]
    other = '<a href="../../files/onnxruntime-1.20.1.tar.gz">x</a><a href="https://cdn/x/onnxruntime%2B-1.0.zip#md5=1">y</a>'
    assert upload.parse_simple_page(other) == [
        IndexFile("onnxruntime-1.20.1.tar.gz", None),
        IndexFile("onnxruntime+-1.0.zip", None),
    ]


@pytest.mark.parametrize(
    ("filename", "version"),
    [
        (CP313, "1.21.0"),
        ("onnxruntime-1.20.1.tar.gz", "1.20.1"),
        ("onnxruntime_gpu-1.21.0-cp313-cp313-manylinux_2_28_x86_64.whl", None),  # another project
        ("README.txt", None),
    ],
)
def test_file_version(filename: str, version: str | None) -> None:
    assert upload.file_version(filename, "onnxruntime") == version


def test_a_new_project_or_version_uploads_everything() -> None:
    wheels = [wheel(CP311), wheel(CP313)]
    assert upload.plan_upload(wheels, [], skip_existing=False, where="i").upload == tuple(wheels)
    older = [IndexFile(CP311.replace("1.21.0", "1.20.1")), IndexFile("onnxruntime-1.20.1.tar.gz")]
    plan = upload.plan_upload(wheels, older, skip_existing=False, where="i")
    assert plan.upload == tuple(wheels) and plan.skipped == ()


def test_a_version_on_the_index_is_refused_naming_its_files() -> None:
    """Even a file of that version we are not uploading: the release is already out."""
    with pytest.raises(
        PublishError, match=r"onnxruntime 1\.21\.0 is already on the index \(onnxruntime-1\.21\.0-cp3"
    ) as e:
        upload.plan_upload([wheel(CP313)], [IndexFile(CP311, "b" * 64)], skip_existing=False, where="http://i/simple/")
    assert e.value.where == "http://i/simple/" and "--skip-existing" in str(e.value.fix)


def test_skip_existing_leaves_the_index_files_alone_and_adds_the_rest() -> None:
    held = IndexFile(CP311, "b" * 64)
    plan = upload.plan_upload([wheel(CP311), wheel(CP313)], [held], skip_existing=True, where="i")
    assert plan.upload == (wheel(CP313),)
    assert plan.skipped == ((wheel(CP311), held),)


@pytest.mark.parametrize(
    ("repository", "index"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/simple/"),
        ("https://upload.warehouse.example/legacy/", "https://warehouse.example/simple/"),
        ("https://upload.test.warehouse.example/legacy", "https://test.warehouse.example/simple/"),
        ("https://devpi.example/legacy", "https://devpi.example/legacy/simple/"),
        ("https://art/api/pypi/pypi-local/", "https://art/api/pypi/pypi-local/simple/"),
    ],
)
def test_default_index_url(repository: str, index: str) -> None:
    assert upload.default_index_url(repository) == index


def test_twine_never_prompts_and_gets_no_credentials_on_its_command_line() -> None:
    argv = upload.twine_upload_argv([Path("/d/a.whl")], "http://i/")
    assert argv[1:5] == ["-m", "twine", "upload", "--non-interactive"]
    assert argv[-3:] == ["--repository-url", "http://i/", "/d/a.whl"]
    assert not any(a in argv for a in ("-u", "-p", "--username", "--password"))
    assert upload.twine_check_argv([Path("/d/a.whl")])[3:] == ["check", "--strict", "/d/a.whl"]


def test_an_index_that_answers_an_error_is_named() -> None:
    with pytest.raises(PublishError, match="HTTP 401") as e:
        upload.index_files("http://i/simple", "onnxruntime", lambda url: (401, ""))
    assert e.value.where == "http://i/simple/onnxruntime/"
    assert upload.index_files("http://i/simple/", "onnxruntime", lambda url: (404, "")) == []


# --- the whole flow, with twine and the index faked ------------------------------------------------
def built_dist(tmp_path: Path, names: list[str], smoke_passed: bool = True) -> Path:
    dist = tmp_path / "cpu-linux"
    (dist / "smoke").mkdir(parents=True)
    artifacts = []
    for name in names:
        data = name.encode()
        (dist / name).write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        py = name.split("-")[2]
        artifacts.append({"path": name, "kind": "wheel", "sha256": sha, "python": f"{py[2]}.{py[3:]}"})
        report = {"wheel": name, "wheel_sha256": sha, "passed": smoke_passed}
        (dist / "smoke" / f"{Path(name).stem}.json").write_text(json.dumps(report), encoding="utf-8")
    (dist / "manifest.json").write_text(json.dumps({"artifacts": artifacts}), encoding="utf-8")
    return dist


class FakeIndex:
    """Twine's check and upload as recorded commands; the simple page lists what was uploaded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, held: dict[str, str] | None = None, drop: bool = False):
        self.files = dict(held or {})
        self.commands: list[list[str]] = []
        self.drop = drop  # an upload URL whose simple index is another one: nothing shows up
        monkeypatch.setattr(run, "capture", self.capture)
        monkeypatch.setattr(run, "call", self.call)

    def capture(self, argv: list[str], **_: Any) -> Any:
        self.commands.append([str(a) for a in argv])
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    def call(self, argv: list[str], **_: Any) -> None:
        self.commands.append([str(a) for a in argv])
        for f in argv[argv.index("--repository-url") + 2 :]:
            if not self.drop:
                self.files[Path(f).name] = hashlib.sha256(Path(f).read_bytes()).hexdigest()

    def fetch(self, url: str) -> tuple[int, str]:
        assert url == "http://i/simple/onnxruntime/"
        links = "".join(f'<a href="/packages/{n}#sha256={s}">{n}</a>' for n, s in self.files.items())
        return (200, links) if self.files else (404, "")


def test_publish_checks_uploads_then_verifies_each_wheel_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = built_dist(tmp_path, [CP311, CP313])
    index = FakeIndex(monkeypatch)
    verified: list[tuple[str, str, Path]] = []

    def verify(w: ReleaseWheel, index_url: str, out: Path) -> dict[str, Any]:
        verified.append((w.path.name, index_url, out))
        return {"passed": True}

    result = upload.publish(dist, "http://i/", index_url=None, skip_existing=False, verify=verify, fetch=index.fetch)
    verbs = [c[3] if c[1:3] == ["-m", "twine"] else "probe" for c in index.commands]
    assert verbs == ["probe", "check", "upload"]  # is twine there; check both; then one upload of both
    assert [Path(f).name for f in index.commands[2][-2:]] == [CP311, CP313]
    assert verified == [
        (CP311, "http://i/simple/", dist / "smoke-from-index"),
        (CP313, "http://i/simple/", dist / "smoke-from-index"),
    ]
    record = json.loads((dist / "publish.json").read_text())
    assert record["uploaded"] == [CP311, CP313] and record["skipped"] == {}
    assert record["served_sha256"][CP313] == hashlib.sha256(CP313.encode()).hexdigest()
    assert set(record["seconds"]) == {"check", "upload", "verify", "total"}
    assert result.passed


def test_a_failed_install_from_the_index_fails_the_publish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = built_dist(tmp_path, [CP313])
    index = FakeIndex(monkeypatch)
    result = upload.publish(
        dist, "http://i/", index_url=None, skip_existing=False, verify=lambda *a: {"passed": False}, fetch=index.fetch
    )
    assert not result.passed


def test_skip_existing_uploads_only_what_the_index_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = built_dist(tmp_path, [CP311, CP313])
    index = FakeIndex(monkeypatch, held={CP311: hashlib.sha256(CP311.encode()).hexdigest()})
    with pytest.raises(PublishError, match="already on the index"):
        upload.publish(dist, "http://i/", index_url=None, skip_existing=False, verify=None, fetch=index.fetch)
    assert not any("upload" in c for c in index.commands) and not (dist / "publish.json").exists()
    upload.publish(dist, "http://i/", index_url=None, skip_existing=True, verify=None, fetch=index.fetch)
    assert [Path(f).name for f in index.commands[-1][-1:]] == [CP313]
    record = json.loads((dist / "publish.json").read_text())
    assert record["uploaded"] == [CP313] and record["skipped"][CP311]["same"] is True


def test_an_upload_the_index_does_not_list_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = built_dist(tmp_path, [CP313])
    index = FakeIndex(monkeypatch, drop=True)
    with pytest.raises(PublishError, match="the index does not list") as e:
        upload.publish(dist, "http://i/", index_url=None, skip_existing=False, verify=None, fetch=index.fetch)
    assert "--index-url" in str(e.value.fix)


def test_a_failed_smoke_report_stops_publish_before_twine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = built_dist(tmp_path, [CP311, CP313], smoke_passed=False)
    index = FakeIndex(monkeypatch)
    with pytest.raises(PublishError, match="not passed the smoke suite") as e:
        upload.publish(dist, "http://i/", index_url=None, skip_existing=False, verify=None, fetch=index.fetch)
    assert CP311 in str(e.value) and CP313 in str(e.value) and index.commands == []


# --- installing by name in the smoke environment -----------------------------------------------------
INFO = WheelInfo(Path("/w") / CP313, "3.13", (2, 17), ("numpy>=1.21.6", 'sympy; python_version >= "3.9"'), None)


def test_from_an_index_the_requirements_come_from_the_wheelhouse_and_the_project_from_the_index() -> None:
    venv = Venv(VenvCommands("python -m venv /v", "pip", "/v/bin/python"), "/house")
    source = env.IndexInstall("http://i/simple/", "onnxruntime==1.21.0")
    script = env.install_script(venv, "/w/" + CP313, INFO, source, "/s")
    offline, from_index = script.split(" && ")
    assert shlex.split(offline) == [
        "pip", "install", "--quiet", "--no-compile", "--no-index", "--find-links", "/house",
        "numpy>=1.21.6", 'sympy; python_version >= "3.9"',
    ]  # fmt: skip
    assert shlex.split(from_index) == [
        "pip", "install", "--quiet", "--no-compile", "--no-cache-dir", "--no-deps", "--index-url", "http://i/simple/",
        "--report", "/s/install-report.json", "onnxruntime==1.21.0",
    ]  # fmt: skip
    assert CP313 not in script
    file_script = env.install_script(venv, "/w/" + CP313, INFO, None, "/s")
    assert shlex.split(file_script)[-1] == "/w/" + CP313


def test_the_install_report_names_the_file_pip_installed() -> None:
    report = {
        "install": [
            {"metadata": {"name": "numpy"}, "download_info": {"url": "file:///house/numpy.whl"}},
            {
                "metadata": {"name": "onnxruntime"},
                "download_info": {
                    "url": f"http://i/packages/{CP313}",
                    "archive_info": {"hashes": {"sha256": "c" * 64}},
                },
            },
        ]
    }
    assert env.installed_file(report, "onnxruntime") == (f"http://i/packages/{CP313}", "c" * 64)
    with pytest.raises(Exception, match="does not list onnxruntime"):
        env.installed_file({"install": []}, "onnxruntime")


def test_an_install_from_an_index_runs_in_the_clean_root_even_when_the_host_fits() -> None:
    host = env.choose(INFO, ("3.13",), (2, 41), (2, 36), "/usr/bin/python3.13")
    assert host.kind == "host"
    root = env.choose(INFO, ("3.13",), (2, 41), (2, 36), "/usr/bin/python3.13", prefer_root=True)
    assert root.kind == "root" and "asked for" in root.reason
